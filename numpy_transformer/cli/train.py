"""``train``, ``predict`` and ``evaluate``: train the NumPy Transformer on a synthetic task, and use it.

``--model gpt --text FILE`` trains a character-level (``--tokenizer char``, the default) or byte-level
(``--tokenizer byte``) language model on your own text instead, its last ``--val-fraction`` held out
and ``--seq-len`` tokens of context; the final report compares the held-out loss (and perplexity)
with the text's unigram entropy, and ``sample CHECKPOINT --prompt TEXT`` continues a prompt. An empty
file, a file that is not UTF-8 with ``char``, or one too short for a window of ``--seq-len`` + 1
tokens in both parts is refused with one error line naming it.

``python -m numpy_transformer train --task reverse --steps 1000 --save reverse.npz`` trains with a
progress bar (loss, token accuracy, tokens/s), validates on held-out sequences every ``--eval-every``
steps, prints a final report and writes a checkpoint (state_dict, optimizer state, configuration)
that ``train --resume`` continues exactly and ``predict``/``evaluate`` load. ``--check-torch`` trains
a PyTorch twin in lockstep (same weights, batches and dropout masks) and reports the largest
difference seen. A JSON-lines log (``--log``, by default ``reverse.log.jsonl`` next to the checkpoint)
records the training loss, token accuracy and learning rate of every step (``--log-every``) and each
validation, for ``plot training``; ``--trace-every N`` traces every Nth step (``nt.trace``), prints
its health checks and logs its gradient norms by layer, for ``plot gradients``.

A resumed run keeps every setting of the original (the configuration, --eval-every, --log-every,
--trace-every, the log: --resume A continues A's log; --resume A --save B is another run, with
B's own log). An existing --save checkpoint or log is another run's: refused unless --force (or
--resume of that run); a log that is a symbolic link is refused always. Ctrl-C,
SIGTERM and SIGHUP at any moment after the first step (the final evaluation and save included)
finish the current step and save a checkpoint (without --save to TASK-interrupted.npz, or TASK-
interrupted-2.npz, ... if that exists); status 128 + the signal's number (Ctrl-C: 130). A nan/inf
loss stops the run with one error line (status 1), saving nothing over the last checkpoint; so
does a failed save (a full disk). A log that cannot be written (a full disk) stops the run with
one error line after saving a checkpoint of the step done (status 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from .. import oracle
from ..models.gpt_config import NORMS
from ..optim import OPTIMIZERS
from ..training.checkpoint import check_save_path
from ..training.interrupts import exit_status, interrupt_signals
from ..training.kinds import KINDS, TEXT_TASK
from ..training.runlog import LOG_ELSEWHERE, check_log_path, default_log_path, resolve_stored_log
from ..training.trainer import SCHEDULES, TrainConfig, Trainer
from . import train_use
from .train_config import apply_config, check_config_path
from .train_run import RUN_DEFAULTS, TrainRun, pause_for_tests

_D = TrainConfig()      # the defaults, for the help texts


def _or(names):
    """``a, b or c``."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _choices(attr):
    """The help text of a choice the model kinds share in part (``activations``, ``positions``), from the
    kinds' own vocabularies: ``relu, gelu or silu; gpt also swiglu``."""
    common = [c for c in getattr(KINDS["seq2seq"], attr) if all(c in getattr(k, attr) for k in KINDS.values())]
    extras = [f"{k.name} also {', '.join(c for c in getattr(k, attr) if c not in common)}" for k in KINDS.values()
              if any(c not in common for c in getattr(k, attr))]
    return "; ".join([_or(common)] + extras)


def add_config_options(p):
    """Every TrainConfig field as an option defaulting to None (= the config default, or the checkpoint's)."""
    g = p.add_argument_group("task")
    g.add_argument("--model", choices=list(KINDS), help=f"encoder (one output per input position), seq2seq "
                   f"(encoder-decoder, generated targets) or gpt (decoder-only language model, generated "
                   f"answers) (default {_D.model})")
    tasks = sorted({t for k in KINDS.values() for t in k.tasks} - {TEXT_TASK})      # text: given by --text
    g.add_argument("--task", choices=tasks, help="synthetic task; encoder: "
                   + ", ".join(KINDS["encoder"].tasks) + f" (default {KINDS['encoder'].default_task}); seq2seq: "
                   + ", ".join(KINDS["seq2seq"].tasks) + f" (default {KINDS['seq2seq'].default_task}); gpt: "
                   + ", ".join(t for t in KINDS["gpt"].tasks if t != TEXT_TASK)
                   + f" (default {KINDS['gpt'].default_task}); --text FILE: your own text")
    g.add_argument("--text", metavar="FILE", help="gpt: train a language model on this text file (task text; "
                   "--seq-len is the block size; --num-train/--num-val are set from the text)")
    g.add_argument("--tokenizer", choices=["char", "byte"], help="--text: one token per character of the file "
                   "(UTF-8 text) or per byte (any file) (default char)")
    g.add_argument("--val-fraction", type=float, help=f"--text: the fraction of the text's end held out "
                   f"(default {_D.val_fraction})")
    g.add_argument("--digits", type=int, help=f"gpt's addition: digits per operand, e.g. 3 for 123+456=579 "
                   f"(default {_D.digits})")
    g.add_argument("--vocab-size", type=int, help=f"vocabulary V incl. PAD=0, EOS=1 (default {_D.vocab_size}; "
                   "gpt: not used, its vocabulary is the 14 addition tokens)")
    g.add_argument("--seq-len", type=int, help=f"sequence length; seq2seq: the longest source (default {_D.seq_len})")
    g.add_argument("--num-train", type=int, help=f"training sequences (default {_D.num_train})")
    g.add_argument("--num-val", type=int, help=f"held-out validation sequences (default {_D.num_val})")
    g = p.add_argument_group("model")
    g.add_argument("--d-model", type=int, help=f"model width D (default {_D.d_model})")
    g.add_argument("--nhead", type=int, help=f"attention heads (default {_D.nhead})")
    g.add_argument("--layers", dest="num_layers", type=int, help=f"encoder layers; seq2seq: encoder and decoder "
                   f"layers each (default {_D.num_layers})")
    g.add_argument("--dim-feedforward", type=int, help=f"feed-forward width (default {_D.dim_feedforward})")
    g.add_argument("--dropout", type=float, help=f"dropout probability (default {_D.dropout})")
    g.add_argument("--activation", help=f"{_choices('activations')} (default {_D.activation})")
    g.add_argument("--norm-first", action="store_const", const=True, help="pre-LN blocks (+ final LayerNorm)")
    g.add_argument("--pos-encoding", help=f"{_choices('positions')} (default {_D.pos_encoding})")
    g.add_argument("--norm", help=f"gpt: {_or(NORMS)} (default {_D.norm})")
    g.add_argument("--num-kv-heads", type=int, help="gpt: key/value heads of grouped-query attention, dividing "
                   "--nhead (1 = multi-query; default: --nhead)")
    g.add_argument("--dtype", help=f"float32 or float64 (default {_D.dtype}; float32 is faster)")
    g.add_argument("--checkpoint-activations", action="store_const", const=True,
                   help="activation checkpointing: keep each layer's input only and recompute its forward in the "
                        "backward (less memory, one more forward per layer, the same run bit for bit; "
                        "may change on --resume)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--optimizer", help=f"one of {', '.join(sorted(OPTIMIZERS))} (default {_D.optimizer})")
    g.add_argument("--lr", type=float, help=f"peak learning rate (default {_D.lr}); with --schedule warmup the "
                   "paper's formula is scaled so that its peak, at step --warmup, equals this")
    g.add_argument("--schedule", help=f"one of {', '.join(SCHEDULES)} (default {_D.schedule})")
    g.add_argument("--warmup", type=int, help=f"warm-up steps (default {_D.warmup})")
    g.add_argument("--betas", type=float, nargs=2, metavar=("B1", "B2"), help=f"Adam betas (default {_D.betas})")
    g.add_argument("--eps", type=float, help=f"Adam eps (default {_D.eps})")
    g.add_argument("--weight-decay", type=float, help=f"weight decay (default {_D.weight_decay})")
    g.add_argument("--momentum", type=float, help=f"SGD momentum (default {_D.momentum})")
    g.add_argument("--clip", type=float, help=f"gradient-norm clipping, 0 = off (default {_D.clip})")
    g.add_argument("--label-smoothing", type=float, help=f"(default {_D.label_smoothing})")
    g.add_argument("--batch-size", type=int, help=f"sequences per step (default {_D.batch_size})")
    g.add_argument("--steps", type=int, help=f"total optimisation steps (default {_D.steps}); "
                   "a resumed run continues up to this total (one at or below its step is refused: nothing to "
                   "train)")
    g.add_argument("--seed", type=int, help=f"seeds data, initialisation, dropout and batch order (default {_D.seed})")


def register(subparsers):
    p = subparsers.add_parser("train", help="train on a synthetic task (shift, copy, reverse, sort; seq2seq: "
                              "reverse, dedup_sort, translate; gpt: addition, or your own --text FILE)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_options(p)
    g = p.add_argument_group("run")
    g.add_argument("--config", metavar="FILE", help="the options in a TOML (.toml) or JSON (.json) file, keyed by "
                   "their names with underscores (d_model, num_layers, lr, eval_every ...; not save, resume, log "
                   "or the switches); a flag given here overrides the file; an unknown key or a wrong type is "
                   "refused. Every run writes its resolved config next to its checkpoint (run.npz -> "
                   "run.config.json; an existing one is another run's: refused unless --force or --resume), "
                   "which --config reads back to repeat the run")
    g.add_argument("--eval-every", type=int, help="validate (and save) every N steps (default 200; 0 = only at "
                   "the end; a resumed run keeps the original's)")
    g.add_argument("--save", metavar="PATH", help="checkpoint path (.npz), written at every validation and at the "
                   "end; an existing file is refused unless --force (or --resume PATH)")
    g.add_argument("--resume", metavar="PATH", help="continue the run saved in PATH exactly, with all its settings "
                   "(saves back to PATH unless --save is given); options that would change the run are refused")
    g.add_argument("--force", action="store_true", help="replace an existing --save checkpoint or log of "
                   "another run (a log that is a symbolic link is refused all the same)")
    g.add_argument("--check-torch", action="store_true",
                   help="train a PyTorch twin in lockstep (same weights, batches, dropout masks; every --model) "
                        "and print the largest difference seen; use --dtype float64 to watch agreement to rounding")
    g.add_argument("--quiet", action="store_true", help="no progress bar or periodic lines, only the final report")
    g.add_argument("--log", metavar="PATH", help="JSON-lines training log (default: next to the checkpoint, "
                   "run.npz -> run.log.jsonl; none without --save/--resume); --resume A appends to A's log, "
                   "--resume A --save B writes B's own; an existing file is refused unless --force, a symbolic "
                   "link always")
    g.add_argument("--no-log", action="store_true", help="write no training log")
    g.add_argument("--log-every", type=int, metavar="N",
                   help="log the training loss/accuracy/lr averaged over every N steps (default 1)")
    g.add_argument("--trace-every", type=int, metavar="N",
                   help="trace every Nth step's forward and backward (nt.trace): print a summary and any "
                        "flagged problem to stderr, and the whole trace to the log (default 0 = never)")
    g.add_argument("--trace-table", action="store_true",
                   help="with --trace-every, print the whole trace table instead of the summary")
    p.set_defaults(func=run_train, config_parser=p)

    train_use.register(subparsers)


def _error(msg):
    print(f"error: {msg}", file=sys.stderr)
    return 2


def given_options(args):
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    out = {k: v for k, v in vars(args).items() if k in names and v is not None}
    if "betas" in out:
        out["betas"] = tuple(out["betas"])
    return out


def _checked_settings(args, stored):
    """--eval-every, --log-every, --trace-every: as given, else the resumed run's (``stored``), else the defaults."""
    settings = {k: (getattr(args, k) if getattr(args, k) is not None else stored.get(k, d))
                for k, d in RUN_DEFAULTS.items()}
    if settings["eval_every"] < 0:
        raise ValueError(f"--eval-every must be >= 0, got {settings['eval_every']} (0 = only at the end)")
    if settings["log_every"] <= 0:
        raise ValueError(f"--log-every must be >= 1, got {settings['log_every']}")
    if settings["trace_every"] < 0:
        raise ValueError(f"--trace-every must be >= 0 (0 = never), got {settings['trace_every']}")
    return settings


def _same_file(a, b):
    return os.path.abspath(os.fspath(a)) == os.path.abspath(os.fspath(b))


def _log_path(args, save, stored):
    """The log's path (None: no log) and whether it is the resumed run's own log (continued, not new).

    Only a run resumed into its own checkpoint (``--resume A``, no other ``--save``) continues its
    log; ``--resume A --save B`` is another run, whose log is B's own (``B.log.jsonl``, or ``--log``),
    never A's. A log stored as outside the checkpoint's directory needs ``--log PATH`` again."""
    if args.no_log:
        return None, False
    kept = stored.get("log", "next-to-checkpoint") if args.resume else "next-to-checkpoint"
    into_itself = bool(args.resume) and _same_file(save, args.resume)
    own = resolve_stored_log(args.resume, kept) if into_itself else None
    if args.log:
        path = args.log
    elif kept is None or not save:
        return None, False                     # --no-log kept by the resumed run; nothing to log next to
    elif not into_itself:
        path = default_log_path(save)          # another run's checkpoint: a log of its own
    elif own == LOG_ELSEWHERE:
        raise ValueError(f"--resume: the log of {args.resume} was written outside its directory, which a "
                         "checkpoint does not record; give --log PATH to continue it (or --no-log)")
    else:
        path = own
    if own == LOG_ELSEWHERE:                   # the user names the log again: theirs to continue
        return path, True
    return path, own is not None and _same_file(path, own)


def _check_resumable(path):
    """--resume (and its --trace-every) continues a run train saved: refuse a folder or a Python checkpoint by name."""
    need = ("--resume continues a run saved by train --save (its training configuration, optimizer and data "
            "state); to train on your own text start one with train --model gpt --text FILE")
    if os.path.isdir(path):
        raise ValueError(f"--resume {path} is a folder (a Hugging Face model?): {need}; a folder's GPT is "
                         "GPT.from_pretrained's, to fine-tune and trace (nt.trace) in Python")
    from ..training.checkpoint import load_checkpoint
    if os.path.isfile(path) and not load_checkpoint(path).config:
        raise ValueError(f"--resume {path} holds no training configuration: it was saved from Python "
                         f"(save_checkpoint), not by train; {need}")


def _check_steps_left(args, trainer):
    """A resumed run must have steps left: ``--steps`` is the total, so one at or below the checkpoint's
    step (or none, for a run that finished) would train nothing; refused, before anything is written."""
    step, total = trainer.step, trainer.config.steps
    if step < total or (step == total and not trainer.run_settings.get("finished")):
        return                                   # steps left, or a run stopped in its final evaluation
    where = (f"--steps {total}: {args.resume} is already at step {step}" if args.steps is not None
             else f"--resume: the run in {args.resume} finished at step {step}, its --steps")
    raise ValueError(f"{where}, so there is nothing to train; pass --steps {step + 1} or more to continue it "
                     "(--steps is the total, not a count of further steps)")


def _start(args):
    """Check every option and path, then build (or resume) the trainer; nothing is written yet."""
    if getattr(args, "config", None):
        apply_config(args, args.config_parser)            # the file fills what the command line leaves unset
    given = given_options(args)
    if "text" in given and not args.resume:
        fixed = [f"--{k.replace('_', '-')}" for k in ("num_train", "num_val") if k in given]
        if fixed:
            raise ValueError(f"{' and '.join(fixed)}: with --text the text decides the training windows and the "
                             "held-out ones; set --val-fraction (and --seq-len) instead")
    _checked_settings(args, {})                          # refuse bad values before any work
    if args.resume:
        _check_resumable(args.resume)
    for flag, path in (("--save", args.save), ("--resume", None if args.save else args.resume)):
        if path:                                         # refuse a path that cannot be written before training
            try:
                check_save_path(path)
            except OSError as exc:
                raise ValueError(f"{flag}: {exc}") from None
    if (args.save and not args.force and os.path.lexists(args.save)
            and not (args.resume and _same_file(args.save, args.resume))):
        raise ValueError(f"--save: {args.save} already exists (another run's checkpoint?); pass --force to "
                         f"replace it, or --resume {args.save} to continue that run")
    if args.resume:
        trainer = Trainer.resume(args.resume, given)
    else:
        trainer = Trainer(TrainConfig(**given))
    stored = trainer.run_settings
    _check_steps_left(args, trainer)
    settings = _checked_settings(args, stored)
    save = args.save or args.resume
    log_path, own_log = _log_path(args, save, stored)
    if log_path is not None:
        check_log_path(log_path, overwrite=args.force or own_log)       # a link or another run's log: refused
    if save:                                   # the run's config next to its checkpoint: the log's rule
        check_config_path(save, overwrite=args.force or bool(args.resume and _same_file(save, args.resume)))
    settings["log"] = log_path                 # stored relative to each checkpoint written (runlog.stored_log)

    lockstep = None
    if args.check_torch:               # the twin starts from the weights and optimizer state now (resumed too)
        lockstep = trainer.add_callback(oracle.load("lockstep", purpose="--check-torch").Lockstep(trainer))
    return TrainRun(args, trainer, settings, save, log_path, append_log=own_log, lockstep=lockstep)


def run_train(args):
    """The ``train`` command. SIGTERM and SIGHUP are handled as Ctrl-C for its whole duration (and
    restored after): from the first step on, every way of stopping leaves a resumable checkpoint."""
    with interrupt_signals():
        try:
            pause_for_tests("startup")
            run = _start(args)
        except KeyboardInterrupt as exc:
            print("interrupted before the first step, nothing saved", file=sys.stderr)
            return exit_status(exc)
        except (ValueError, TypeError, OSError, ImportError) as exc:
            return _error(str(exc))
        return run.run()
