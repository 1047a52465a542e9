"""``train``, ``predict`` and ``evaluate``: train the NumPy Transformer on a synthetic task, and use it.

``python -m numpy_transformer train --task reverse --steps 1000 --save reverse.npz`` trains with a
progress bar (loss, token accuracy, tokens/s), validates on held-out sequences every ``--eval-every``
steps, prints a final report and writes a checkpoint (state_dict, optimizer state, configuration)
that ``train --resume`` continues exactly and ``predict``/``evaluate`` load. ``--check-torch`` trains
a PyTorch twin in lockstep (same weights, batches and dropout masks) and reports the largest
difference seen. A JSON-lines log (``--log``, by default ``reverse.log.jsonl`` next to the checkpoint)
records the training loss, token accuracy and learning rate of every step (``--log-every``) and each
validation, for ``plot training``; ``--trace-every N`` traces every Nth step (``nt.trace``), prints
its health checks and logs its gradient norms by layer, for ``plot gradients``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from .. import oracle
from .._text import WIDTH, fit
from ..checkpoint import check_save_path, load_checkpoint
from ..data import EOS, FIRST_TOKEN, PAD
from ..kinds import KINDS
from . import parse_tokens
from ..optim import OPTIMIZERS
from ..runlog import RunLog, default_log_path
from ..training import SCHEDULES, TrainConfig, Trainer, checkpoint_config

_D = TrainConfig()      # the defaults, for the help texts


def _add_config_options(p):
    """Every TrainConfig field as an option defaulting to None (= the config default, or the checkpoint's)."""
    g = p.add_argument_group("task")
    g.add_argument("--model", choices=list(KINDS), help=f"encoder (one output per input position), seq2seq "
                   f"(encoder-decoder, generated targets) or gpt (decoder-only language model, generated "
                   f"answers) (default {_D.model})")
    tasks = sorted({t for k in KINDS.values() for t in k.tasks})
    g.add_argument("--task", choices=tasks, help="synthetic task; encoder: "
                   + ", ".join(KINDS["encoder"].tasks) + f" (default {KINDS['encoder'].default_task}); seq2seq: "
                   + ", ".join(KINDS["seq2seq"].tasks) + f" (default {KINDS['seq2seq'].default_task}); gpt: "
                   + ", ".join(KINDS["gpt"].tasks) + f" (default {KINDS['gpt'].default_task})")
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
    g.add_argument("--activation", help=f"relu, gelu or silu; gpt also swiglu (default {_D.activation})")
    g.add_argument("--norm-first", action="store_const", const=True, help="pre-LN blocks (+ final LayerNorm)")
    g.add_argument("--pos-encoding", help=f"sinusoidal or learned; encoder also relative, alibi, none; gpt also "
                   f"rope, alibi, relative, none (default {_D.pos_encoding})")
    g.add_argument("--norm", help=f"gpt: layernorm or rmsnorm (default {_D.norm})")
    g.add_argument("--num-kv-heads", type=int, help="gpt: key/value heads of grouped-query attention, dividing "
                   "--nhead (1 = multi-query; default: --nhead)")
    g.add_argument("--dtype", help=f"float32 or float64 (default {_D.dtype}; float32 is faster)")
    g.add_argument("--checkpoint-activations", action="store_const", const=True,
                   help="activation checkpointing: keep each layer's input only and recompute its forward in the "
                        "backward (less memory, one more forward per layer, the same run bit for bit; may change on --resume)")
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
                   "a resumed run continues up to this total")
    g.add_argument("--seed", type=int, help=f"seeds data, initialisation, dropout and batch order (default {_D.seed})")


def register(subparsers):
    p = subparsers.add_parser("train", help="train on a synthetic task (shift, copy, reverse, sort; seq2seq: "
                              "reverse, dedup_sort, translate; gpt: addition)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_config_options(p)
    g = p.add_argument_group("run")
    g.add_argument("--eval-every", type=int, default=200, help="validate every N steps (default 200; 0 = only at the end)")
    g.add_argument("--save", metavar="PATH", help="checkpoint path (.npz), written at every validation and at the end")
    g.add_argument("--resume", metavar="PATH", help="continue the run saved in PATH exactly (saves back to "
                   "PATH unless --save is given); options that would change the run are refused")
    g.add_argument("--check-torch", action="store_true",
                   help="train a PyTorch twin in lockstep (same weights, batches, dropout masks; every --model) and print the "
                        "largest difference seen; use --dtype float64 to watch agreement to rounding")
    g.add_argument("--quiet", action="store_true", help="no progress bar or periodic lines, only the final report")
    g.add_argument("--log", metavar="PATH", help="JSON-lines training log (default: next to the checkpoint, "
                   "run.npz -> run.log.jsonl; none without --save/--resume); a resumed run appends to it")
    g.add_argument("--no-log", action="store_true", help="write no training log")
    g.add_argument("--log-every", type=int, default=1, metavar="N",
                   help="log the training loss/accuracy/lr averaged over every N steps (default 1)")
    g.add_argument("--trace-every", type=int, default=0, metavar="N",
                   help="trace every Nth step's forward and backward (nt.trace): print a summary and any "
                        "flagged problem to stderr, and the whole trace to the log (default 0 = never)")
    g.add_argument("--trace-table", action="store_true",
                   help="with --trace-every, print the whole trace table instead of the summary")
    p.set_defaults(func=run_train)

    p = subparsers.add_parser("predict", help="run a trained checkpoint on token sequences")
    p.add_argument("checkpoint", help="a .npz written by train --save")
    p.add_argument("--tokens", action="append", metavar="IDS",
                   help='a source sequence of the length the model was trained on, e.g. --tokens "5 9 3 7 ..." '
                        '(seq2seq: 1 to --seq-len content ids; gpt: an addition such as "123+456"); repeatable; '
                        'default: --random 5')
    p.add_argument("--random", type=int, metavar="N", help="show N held-out validation examples")
    p.set_defaults(func=run_predict)

    p = subparsers.add_parser("evaluate", help="loss and accuracy of a checkpoint on its task")
    p.add_argument("checkpoint", help="a .npz written by train --save")
    p.add_argument("--split", choices=["val", "train"], default="val", help="held-out (default) or training set")
    p.add_argument("--num", type=int, help="evaluate only the first N examples")
    p.set_defaults(func=run_evaluate)


def _error(msg):
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _given(args):
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    out = {k: v for k, v in vars(args).items() if k in names and v is not None}
    if "betas" in out:
        out["betas"] = tuple(out["betas"])
    return out


def _fmt_tokens(ids):
    return " ".join(str(int(i)) for i in ids)


def _progress(total, initial, quiet):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    disable = quiet or not sys.stderr.isatty()
    return tqdm(total=total, initial=initial, file=sys.stderr, disable=disable, unit="step", dynamic_ncols=True,
                leave=False)


def run_train(args):
    try:
        given = _given(args)
        if args.eval_every < 0:
            raise ValueError(f"--eval-every must be >= 0, got {args.eval_every}")
        if args.log_every <= 0:
            raise ValueError(f"--log-every must be >= 1, got {args.log_every}")
        if args.trace_every < 0:
            raise ValueError(f"--trace-every must be >= 0 (0 = never), got {args.trace_every}")
        for flag, path in (("--save", args.save), ("--resume", None if args.save else args.resume)):
            if path:                              # refuse a path that cannot be written before training
                try:
                    check_save_path(path)
                except OSError as exc:
                    raise ValueError(f"{flag}: {exc}") from None
        if args.resume:
            trainer = Trainer.resume(args.resume, given)
        else:
            trainer = Trainer(TrainConfig(**given))
        lockstep = None
        if args.check_torch:           # the twin starts from the weights and optimizer state now (resumed too)
            lockstep = trainer.add_callback(oracle.load("lockstep", purpose="--check-torch").Lockstep(trainer))
    except (ValueError, TypeError, OSError, ImportError) as exc:
        return _error(str(exc))
    c = trainer.config
    save = args.save or args.resume
    log_path = None if args.no_log else (args.log or (default_log_path(save) if save else None))
    try:
        log = RunLog(log_path, resume_step=trainer.step if args.resume else None) if log_path else None
    except OSError as exc:
        return _error(f"cannot write the log {log_path}: {exc}")
    if log is not None:
        if args.resume:
            log.write("resume", trainer.step, time=log.now(), steps=c.steps)
        else:
            log.write("start", 0, time=log.now(), config=c.to_dict(), log_every=args.log_every)
    out = (lambda *a, **k: None) if args.quiet else print
    n_par = trainer.model.num_parameters()
    if c.model == "gpt":
        d = trainer.data
        out(fit(f"task {c.task}: {c.digits}-digit + {c.digits}-digit, answer reversed (least-significant digit "
                f"first), vocab {d.vocab_size}, {d.seq_len} tokens per sequence, {c.num_train} training / "
                f"{c.num_val} held-out additions (model gpt; loss on the {d.answer_len} answer tokens)"))
        layers, ln = f"{c.num_layers} causal decoder block" + ("" if c.num_layers == 1 else "s"), "pre"
    else:
        out(fit(f"task {c.task}: vocab {c.vocab_size}, length {c.seq_len}, {c.num_train} training / {c.num_val} "
                f"held-out sequences" + ("" if c.model == "encoder" else f" (model {c.model})")))
        layers = f"{c.num_layers} layers" if c.model == "encoder" else f"{c.num_layers} encoder + {c.num_layers} decoder layers"
        ln = "pre" if c.norm_first else "post"
    heads = f"{c.nhead} heads" + ("" if c.num_kv_heads in (None, c.nhead) else f" ({c.num_kv_heads} key/value)")
    norm = "RMSNorm" if c.norm == "rmsnorm" else "LN"
    out(fit(f"model: d_model {c.d_model}, {heads}, {layers}, ff {c.dim_feedforward}, dropout "
        f"{c.dropout}, {c.activation}, {ln}-{norm}, {c.pos_encoding} positions, "
        f"{c.dtype}; {n_par:,} parameters"))
    out(fit(f"optimizer {c.optimizer} (peak lr {c.lr:g}, {c.schedule} schedule"
            + (f", warmup {c.warmup}" if c.schedule == "warmup" else "") + f"), clip {c.clip:g}, batch "
            f"{c.batch_size}, {c.steps} steps" + (f" (resuming at step {trainer.step})" if args.resume else "")))
    if args.check_torch:
        out(fit("check-torch: a PyTorch twin trains in lockstep (same weights, batches and dropout masks)"
                + ("" if c.dtype == "float64" else "; float32 rounding makes the runs drift apart: use --dtype float64")))

    bar = _progress(c.steps, trainer.step, args.quiet)
    write = (bar.write if bar is not None and not bar.disable else print)
    t_start = time.perf_counter()
    tokens_seen, train_seconds = 0, 0.0
    recent = []                                  # (tokens, seconds) of the last steps, for tokens/s
    smooth_loss = smooth_acc = None
    last_eval = None
    window = []                                  # StepResults since the last "train" log line

    def say(text):                               # diagnostics to stderr, above the progress bar
        if bar is not None and not bar.disable:
            bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def log_window():
        if log is not None and window:
            n = len(window)
            log.write("train", window[-1].step, loss=sum(w.loss for w in window) / n,
                      accuracy=sum(w.accuracy for w in window) / n, lr=window[-1].lr,
                      grad_norm=window[-1].grad_norm, tokens=sum(w.tokens for w in window), steps=n)
        window.clear()

    def log_eval(step, ev, final=False):
        if log is not None:
            log.write("val", step, loss=ev.loss, token_accuracy=ev.token_accuracy,
                      sequence_accuracy=ev.sequence_accuracy, examples=ev.examples, final=final,
                      **({} if ev.bleu is None else {"bleu": ev.bleu}))

    def report_trace(r):
        t = r.trace
        if not args.quiet:
            say(f"trace of step {r.step}:\n{t.table()}\n{t.summary()}" if args.trace_table
                else f"trace of step {r.step}: {t.report()}")
        if log is not None:
            log.write("trace", r.step, summary=t.summary(), first_nonfinite=t.first_nonfinite(),
                      problems=[f"{p.name} ({p.phase}): {p.flag}" for p in t.problems()],
                      grad_norms=t.layer_grad_norms(), param_grad_norms=t.layer_param_grad_norms(),
                      records=t.to_dicts())

    def report_eval(step):
        nonlocal last_eval
        ev = trainer.evaluate()
        last_eval = ev
        log_eval(step, ev)
        line = (f"step {step:>6}/{c.steps}  train loss {smooth_loss:.4f} acc {100 * smooth_acc:.2f}%  "
                f"| held-out {ev.brief()}")
        if lockstep is not None:
            _, rel = lockstep.check_weights()
            s = lockstep.stats
            line += f"  | torch: max loss diff {s.max_loss_rel:.1e} rel, weights {rel:.1e} rel"
        if not args.quiet:
            write(fit(line))
        if save:
            trainer.save(save)

    def on_step(r):
        nonlocal tokens_seen, train_seconds, smooth_loss, smooth_acc
        tokens_seen += r.tokens
        train_seconds += r.seconds
        recent.append((r.tokens, r.seconds))
        del recent[:-50]
        smooth_loss = r.loss if smooth_loss is None else 0.95 * smooth_loss + 0.05 * r.loss
        smooth_acc = r.accuracy if smooth_acc is None else 0.95 * smooth_acc + 0.05 * r.accuracy
        if bar is not None:
            tps = sum(t for t, _ in recent) / max(sum(s for _, s in recent), 1e-9)
            post = dict(loss=f"{smooth_loss:.4f}", acc=f"{100 * smooth_acc:.1f}%", tok_s=f"{tps:,.0f}", lr=f"{r.lr:.2e}")
            if lockstep is not None:
                post["torch_diff"] = f"{lockstep.stats.max_loss_rel:.1e}"
            bar.set_postfix(post, refresh=False)
            bar.update(1)
        window.append(r)
        if r.step % args.log_every == 0:
            log_window()
        if r.trace is not None:
            report_trace(r)
        if args.eval_every and r.step % args.eval_every == 0 and r.step < c.steps:
            report_eval(r.step)

    try:
        trainer.train(callback=on_step, trace_every=args.trace_every)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        log_window()
        if log is not None:
            log.write("interrupted", trainer.step, time=log.now())
            log.close()
        msg = f"interrupted at step {trainer.step}"
        target = save or f"{c.task}-interrupted.npz"          # an interrupted run is never lost
        try:
            trainer.save(target)
            msg += f"; checkpoint saved to {target} (continue with --resume {target})"
        except (OSError, RuntimeError) as exc:
            msg += f"; no checkpoint saved: {exc}"
        print(msg, file=sys.stderr)
        return 130
    if bar is not None:
        bar.close()
    log_window()
    wall = time.perf_counter() - t_start
    ev = trainer.evaluate()
    log_eval(trainer.step, ev, final=True)
    train_ev = trainer.evaluate("train", max_examples=c.num_val)
    print(f"finished {c.task} at step {trainer.step} in {wall:.1f}s"
          + (f" ({tokens_seen / train_seconds:,.0f} training tokens/s)" if train_seconds else ""))
    print(fit(f"  held-out  {ev}"))
    print(fit(f"  training  {train_ev}"))
    if lockstep is not None:
        abs_err, rel = lockstep.check_weights()
        s = lockstep.stats
        print(fit(f"  torch twin: {s.steps} lockstep steps; largest loss difference {s.max_loss_rel:.2e} "
                  f"(relative); final weights max abs diff {abs_err:.2e}, max relative {rel:.2e}"))
    if save:
        trainer.save(save)
        print(f"  checkpoint: {save}")
    if log is not None:
        log.write("end", trainer.step, wall_seconds=wall, time=log.now())
        log.close()
        print(f"  log: {log.path}")
    return 0


def _load(path):
    ckpt = load_checkpoint(path)
    config = checkpoint_config(ckpt)
    return ckpt, config, ckpt.build_model()


def run_predict(args):
    try:
        ckpt, c, model = _load(args.checkpoint)
        if c.model == "seq2seq":
            return _predict_seq2seq(args, c, model)
        if c.model == "gpt":
            return _predict_gpt(args, c, model)
        from ..data import make_targets, make_task
        if args.tokens:
            src = np.array([parse_tokens(text, c.seq_len, c.vocab_size) for text in args.tokens], dtype=np.int64)
        else:
            if args.random is not None and args.random <= 0:
                raise ValueError(f"--random must be a positive number of examples, got {args.random}")
            n = args.random or 5
            src = make_task(c.task, c.vocab_size, c.seq_len, c.num_train, c.num_val, seed=c.seed).val_src[:n]
    except (ValueError, TypeError, FileNotFoundError) as exc:
        return _error(str(exc))
    model.eval()
    pred = model(src).argmax(-1)
    tgt = make_targets(c.task, src)
    print(fit(f"task {c.task}, {c.seq_len} tokens per sequence; ids: {PAD} = PAD, {EOS} = EOS (end of sequence), "
              f"{FIRST_TOKEN}..{c.vocab_size - 1} content"
              + ("; shift's last target is EOS (nothing follows the last token)" if c.task == "shift" else "")))
    width = 1 + len(str(c.vocab_size - 1))
    per_line = max(1, (WIDTH - 13) // width)                  # long sequences: blocks of positions, 100 columns
    fmt = lambda ids: "".join(f"{int(i):>{width}}" for i in ids)          # noqa: E731
    for n, (s, p, t) in enumerate(zip(src, pred, tgt), 1):
        wrong = p != t
        print(f"\nexample {n}: " + (f"{int(wrong.sum())} of {len(t)} tokens wrong (marked ^)" if wrong.any()
                                     else "correct"))
        for a in range(0, len(t), per_line):
            b = min(a + per_line, len(t))
            if len(t) > per_line:
                print(f"  positions {a}-{b - 1}")
            print(f"  source     {fmt(s[a:b])}")
            print(f"  predicted  {fmt(p[a:b])}")
            if wrong.any():
                print(f"  expected   {fmt(t[a:b])}")
                marks = "".join(f"{m:>{width}}" for m in np.where(wrong[a:b], "^", " "))
                if marks.strip():
                    print(f"             {marks}")
    return 0


def _parse_source(text, seq_len, vocab_size):
    """A seq2seq ``--tokens`` value: 1..seq_len content ids (>= FIRST_TOKEN), padded to seq_len."""
    from ..tasks_seq2seq import FIRST_TOKEN as FIRST, PAD as PAD_ID
    try:
        ids = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"--tokens must be integers separated by spaces, got {text!r}") from None
    if not 1 <= len(ids) <= seq_len:
        raise ValueError(f"--tokens: the model reads sources of 1 to {seq_len} tokens; got {len(ids)} in {text!r}")
    bad = [i for i in ids if not FIRST <= i < vocab_size]
    if bad:
        raise ValueError(f"--tokens: source ids must lie in [{FIRST}, {vocab_size}) (0, 1, 2 are PAD, EOS, BOS), "
                         f"got {bad[0]}")
    return ids + [PAD_ID] * (seq_len - len(ids))


def _predict_seq2seq(args, c, model):
    from ..kinds import get_kind
    from ..tasks_seq2seq import BOS as BOS_ID, strip_target, target_for
    kind = get_kind(c.model)
    try:
        data = kind.make_data(c)
        if args.tokens:
            src = np.array([_parse_source(text, c.seq_len, c.vocab_size) for text in args.tokens], dtype=np.int64)
        else:
            if args.random is not None and args.random <= 0:
                raise ValueError(f"--random must be a positive number of examples, got {args.random}")
            src = data.val_src[:args.random or 5]
    except (ValueError, TypeError) as exc:
        return _error(str(exc))
    model.eval()
    gen = kind.predict(model, src, data)                                     # (N, tgt_len)
    print(fit(f"task {c.task} (seq2seq, greedy decoding): sources of 1..{c.seq_len} tokens; ids: {PAD} = PAD, "
              f"{EOS} = EOS, {BOS_ID} = BOS (the decoder's first input), {BOS_ID + 1}.. content"))
    fmt = lambda ids: " ".join(str(int(i)) for i in ids) or "(empty)"     # noqa: E731
    for n, (s, g) in enumerate(zip(src, gen), 1):
        want = target_for(c.task, s, c.vocab_size)
        got = strip_target(g)
        ended = bool((g == EOS).any())
        verdict = ("not a sentence of the task's grammar: no expected answer" if want is None
                   else "correct" if got == want and ended else "wrong")
        print(f"\nexample {n}: {verdict}")
        print(f"  source     {fmt(s[s != PAD])}")
        print(f"  generated  {fmt(got)}" + ("" if ended else f"  (no EOS within {len(g)} tokens)"))
        if want is not None and verdict != "correct":
            print(f"  expected   {fmt(want)}")
    return 0


def _predict_gpt(args, c, model):
    from ..kinds import get_kind
    from .. import tasks_lm as lm
    kind = get_kind(c.model)
    try:
        data = kind.make_data(c)
        if args.tokens:
            ab = np.array([lm.parse_expression(text, c.digits) for text in args.tokens], dtype=np.int64)
        else:
            if args.random is not None and args.random <= 0:
                raise ValueError(f"--random must be a positive number of examples, got {args.random}")
            ab = data.val_ab[:args.random or 5]
    except (ValueError, TypeError) as exc:
        return _error(str(exc))
    model.eval()
    prompts = lm.encode_prompt(ab[:, 0], ab[:, 1], c.digits)
    gen = kind.predict(model, prompts, data)                                 # (N, digits + 2)
    print(fit(f"task {c.task} (gpt, greedy decoding through the KV cache): the answer is generated "
              f"least-significant digit first and read back reversed; $ = EOS"))
    for n, ((a, b), p, g) in enumerate(zip(ab.tolist(), prompts, gen), 1):
        want = a + b
        got = lm.decode_answer(g)
        print(f"\nexample {n}: " + ("correct" if got == want else "wrong"))
        print(f"  prompt     {lm.to_text(p)}")
        print(f"  generated  {lm.to_text(g).rstrip('_')}  (reads {'nothing: not digits then EOS' if got is None else got})")
        print(f"  expected   {lm.to_text(lm.encode_answer(want, c.digits)[0])}  ({want})")
    return 0


def run_evaluate(args):
    try:
        ckpt, c, model = _load(args.checkpoint)
        from ..kinds import get_kind
        kind = get_kind(c.model)
        data = kind.make_data(c)
        if args.num is not None and args.num <= 0:
            raise ValueError(f"--num must be positive, got {args.num}")
    except (ValueError, TypeError, FileNotFoundError) as exc:
        return _error(str(exc))
    step = ckpt.extra_json.get("step", "?")
    ev = kind.evaluate(model, *data.split(args.split), max_examples=args.num)
    print(fit(f"{args.checkpoint}: task {c.task}, step {step}, {args.split} split: {ev}"))
    return 0
