"""One ``train`` run from its first step to its end: progress, log, validations, checkpoints, and
every way it can stop (``cli.train`` checks the options and builds the :class:`TrainRun`).

How a run stops, and what it leaves:

* it finishes: the final report, the checkpoint (``--save``) and the log's ``end`` line; status 0.
* Ctrl-C, SIGTERM or SIGHUP (``interrupts``) at any moment from the first step on, the final
  evaluation and the final save included: the current step finishes, a checkpoint is written (to
  ``--save``, or to a fresh ``TASK-interrupted[-N].npz``, never over an existing file) and its path
  printed; status 128 + the signal's number (Ctrl-C: 130). A checkpoint save, once started, finishes
  first. Before the first step: ``interrupted before the first step, nothing saved``.
* the loss (or the clipped gradient norm) turns non-finite: ``error: training diverged ...``, nothing
  saved over the last checkpoint (whose weights are the last good ones); status 1.
* a checkpoint cannot be written (a full disk): ``error: cannot save the checkpoint run.npz at step 400:
  no space left on the device; training stopped; the previous checkpoint, run.npz (step 200), is
  intact`` (saves are atomic); status 1.
* the log cannot be written (a full disk): the run stops after the step it was in, saves a checkpoint
  of that step (to ``--save``; its log line is what failed, so the log ends before it) and says
  ``error: cannot write the log run.log.jsonl: no space left on the device; training stopped at step
  57; checkpoint saved to run.npz (continue with --resume run.npz)`` (or why none could be saved);
  status 1 (without ``--save``: to a fresh ``TASK-interrupted[-N].npz``). Before the first step:
  ``...; training stopped before the first step, nothing saved``.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from ..training.checkpoint import CheckpointError
from ..training.checkpoint_files import NO_SPACE
from ..training.interrupts import exit_status, signal_name, signals_blocked, signum_of
from ..training.runlog import NEXT_TO_CHECKPOINT, LogWriteError, RunLog, stored_log
from ..training.trainer import TrainingDiverged
from ..utils.text import fit
from .train_config import resolved_config, write_config

__all__ = ["TrainRun", "RUN_DEFAULTS", "NEXT_TO_CHECKPOINT", "pause_for_tests", "claim_fresh_path"]

# the command's own settings, stored in each checkpoint and kept by a resumed run unless given again
RUN_DEFAULTS = {"eval_every": 200, "log_every": 1, "trace_every": 0}


def pause_for_tests(phase: str) -> None:
    """Test-only hook: with the environment variable ``NT_TEST_PAUSE`` equal to ``phase`` (``startup``,
    ``final-eval`` or ``final-save``), write ``paused at PHASE`` to stderr and sleep 5 s there, so that
    a test can signal a real ``train`` process at exactly that moment. Unset, it does nothing."""
    if os.environ.get("NT_TEST_PAUSE") == phase:
        print(f"paused at {phase}", file=sys.stderr, flush=True)
        time.sleep(5)


def claim_fresh_path(stem: str, ext: str = ".npz") -> str:
    """The first of ``stem.npz``, ``stem-2.npz``, ``stem-3.npz``, ... that does not exist, created empty
    (``O_EXCL``: no other process can take it meanwhile) for a save to replace."""
    n = 1
    while True:
        path = f"{stem}{ext}" if n == 1 else f"{stem}-{n}{ext}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return path
        except FileExistsError:
            n += 1


def _cause(exc) -> str:
    """The reason a save failed, once: "no space left on the device" for ENOSPC, whether ``exc`` is the
    OSError itself or the CheckpointWriteError made of it (whose own message names the path already)."""
    if isinstance(exc, OSError):
        inner = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
        return NO_SPACE.get(inner.errno) or inner.strerror or str(inner)
    return str(exc)


class SaveFailed(Exception):
    """A checkpoint could not be written (``cause``: why, in a few words)."""

    def __init__(self, path, step, cause):
        super().__init__(f"cannot save the checkpoint {path} at step {step}: {cause}")
        self.path, self.step, self.cause = path, step, cause


def _progress(total, initial, quiet):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    disable = quiet or not sys.stderr.isatty()
    return tqdm(total=total, initial=initial, file=sys.stderr, disable=disable, unit="step", dynamic_ncols=True,
                leave=False)


class TrainRun:
    """A checked ``train`` run: ``run()`` trains, reports and returns the exit status.

    Parameters
    ----------
    args : argparse.Namespace
    trainer : Trainer
    settings : dict
        ``RUN_DEFAULTS``' keys and ``log`` (the log's path, None for none), stored in every checkpoint
        it writes (the log as ``runlog.stored_log`` of that checkpoint).
    save : str or None
        The checkpoint path (``--save``, else ``--resume``).
    log_path : str or None
    append_log : bool
        Continue the log (a resumed run) rather than start it.
    lockstep : object, optional
        ``--check-torch``'s twin (``reference_torch.lockstep.Lockstep``).
    """

    def __init__(self, args, trainer, settings, save, log_path, append_log, lockstep=None):
        self.args, self.trainer, self.settings, self.save = args, trainer, settings, save
        self.log_path, self.append_log, self.lockstep = log_path, append_log, lockstep
        self.c = trainer.config
        self.start_step = trainer.step
        self.last_checkpoint = (args.resume, trainer.step) if args.resume else None      # (path, step) on disk
        self.finished_saved = False                  # the last checkpoint is the final one (marked finished)
        self.log = self.bar = None
        self.new_log = False
        self.out = (lambda *a, **k: None) if args.quiet else print
        self.tokens_seen, self.train_seconds = 0, 0.0
        self.recent = []                             # (tokens, seconds) of the last steps, for tokens/s
        self.smooth_loss = self.smooth_acc = None
        self.window = []                             # StepResults since the last "train" log line

    # -- the run --------------------------------------------------------------------------------------
    def run(self) -> int:
        """Train, report, save; the exit status (0, 1 for an error, 128 + signal number when interrupted)."""
        try:
            self._open_log()
            self._header()
            self.bar = _progress(self.c.steps, self.trainer.step, self.args.quiet)
            self.t_start = time.perf_counter()
            with np.errstate(over="ignore", invalid="ignore"):      # a nan/inf stops the run, loudly
                self.trainer.train(callback=self._on_step, trace_every=self.settings["trace_every"])
            return self._finish()
        except KeyboardInterrupt as exc:
            return self._stopped(self._interrupted, exc)
        except TrainingDiverged as exc:
            return self._stopped(self._diverged, exc)
        except SaveFailed as exc:
            return self._stopped(self._save_failed, exc)
        except LogWriteError as exc:
            return self._stopped(self._log_failed, exc)

    def _open_log(self):
        if self.log_path is None:
            return
        c, step = self.c, self.trainer.step
        if self.append_log:
            self.log = RunLog(self.log_path, resume_step=step)
            self.log.write("resume", step, time=self.log.now(), steps=c.steps)
        else:
            self.log = RunLog(self.log_path, overwrite=self.args.force)
            self.new_log = True
            self.log.write("start", 0, time=self.log.now(), config=c.to_dict(), log_every=self.settings["log_every"])

    def _header(self):
        c, out, trainer = self.c, self.out, self.trainer
        n_par = trainer.model.num_parameters()
        if c.task == "text":
            d = trainer.data
            out(fit(f"text {c.text}: {d.num_tokens:,} tokens ({c.tokenizer} tokenizer, vocab {d.vocab_size}); "
                    f"{d.num_train_tokens:,} training tokens, the last {d.num_tokens - d.num_train_tokens:,} held out "
                    f"(--val-fraction {c.val_fraction:g}); windows of {d.block_size} + 1 tokens (model gpt)"))
            layers, ln = f"{c.num_layers} causal decoder block" + ("" if c.num_layers == 1 else "s"), "pre"
        elif c.model == "gpt":
            d = trainer.data
            out(fit(f"task {c.task}: {c.digits}-digit + {c.digits}-digit, answer reversed (least-significant digit "
                    f"first), vocab {d.vocab_size}, {d.seq_len} tokens per sequence, {c.num_train} training / "
                    f"{c.num_val} held-out additions (model gpt; loss on the {d.answer_len} answer tokens)"))
            layers, ln = f"{c.num_layers} causal decoder block" + ("" if c.num_layers == 1 else "s"), "pre"
        else:
            out(fit(f"task {c.task}: vocab {c.vocab_size}, length {c.seq_len}, {c.num_train} training / {c.num_val} "
                    f"held-out sequences" + ("" if c.model == "encoder" else f" (model {c.model})")))
            layers = (f"{c.num_layers} layers" if c.model == "encoder"
                      else f"{c.num_layers} encoder + {c.num_layers} decoder layers")
            ln = "pre" if c.norm_first else "post"
        heads = f"{c.nhead} heads" + ("" if c.num_kv_heads in (None, c.nhead) else f" ({c.num_kv_heads} key/value)")
        norm = "RMSNorm" if c.norm == "rmsnorm" else "LN"
        out(fit(f"model: d_model {c.d_model}, {heads}, {layers}, ff {c.dim_feedforward}, dropout "
                f"{c.dropout}, {c.activation}, {ln}-{norm}, {c.pos_encoding} positions, "
                f"{c.dtype}; {n_par:,} parameters"))
        out(fit(f"optimizer {c.optimizer} (peak lr {c.lr:g}, {c.schedule} schedule"
                + (f", warmup {c.warmup}" if c.schedule == "warmup" else "") + f"), clip {c.clip:g}, batch "
                f"{c.batch_size}, {c.steps} steps"
                + (f" (resuming at step {trainer.step})" if self.args.resume else "")))
        if self.lockstep is not None:
            out(fit("check-torch: a PyTorch twin trains in lockstep (same weights, batches and dropout masks)"
                    + ("" if c.dtype == "float64"
                       else "; float32 rounding makes the runs drift apart: use --dtype float64")))

    def _finish(self):
        c, trainer = self.c, self.trainer
        self._close_bar()
        self._log_window()
        wall = time.perf_counter() - self.t_start
        pause_for_tests("final-eval")
        ev = trainer.evaluate()
        self._log_eval(trainer.step, ev, final=True)
        train_ev = trainer.evaluate("train", max_examples=c.num_val)
        print(f"finished {c.task} at step {trainer.step} in {wall:.1f}s"
              + (f" ({self.tokens_seen / self.train_seconds:,.0f} training tokens/s)" if self.train_seconds else ""))
        print(fit(f"  held-out  {ev}"))
        print(fit(f"  training  {train_ev}"))
        if c.task == "text":
            h = trainer.data.entropy
            print(fit(f"  held-out loss {ev.loss:.4f} nats/token = perplexity {np.exp(ev.loss):.2f}; the training "
                      f"text's unigram entropy is {h:.4f} nats (perplexity {np.exp(h):.2f}): what a model knowing "
                      f"only the {c.tokenizer} frequencies would reach"))
        if self.lockstep is not None:
            abs_err, rel = self.lockstep.check_weights()
            s = self.lockstep.stats
            print(fit(f"  torch twin: {s.steps} lockstep steps; largest loss difference {s.max_loss_rel:.2e} "
                      f"(relative); final weights max abs diff {abs_err:.2e}, max relative {rel:.2e}"))
        if self.save:
            self._save(self.save, pause="final-save", finished=True)
            print(f"  checkpoint: {self.save}")
        if self.log is not None:
            self.log.write("end", trainer.step, wall_seconds=wall, time=self.log.now())
            self.log.close()
            print(f"  log: {self.log.path}")
        return 0

    # -- each step ------------------------------------------------------------------------------------
    def _on_step(self, r):
        self.tokens_seen += r.tokens
        self.train_seconds += r.seconds
        self.recent.append((r.tokens, r.seconds))
        del self.recent[:-50]
        self.smooth_loss = r.loss if self.smooth_loss is None else 0.95 * self.smooth_loss + 0.05 * r.loss
        self.smooth_acc = r.accuracy if self.smooth_acc is None else 0.95 * self.smooth_acc + 0.05 * r.accuracy
        if self.bar is not None:
            tps = sum(t for t, _ in self.recent) / max(sum(s for _, s in self.recent), 1e-9)
            post = dict(loss=f"{self.smooth_loss:.4f}", acc=f"{100 * self.smooth_acc:.1f}%", tok_s=f"{tps:,.0f}",
                        lr=f"{r.lr:.2e}")
            if self.lockstep is not None:
                post["torch_diff"] = f"{self.lockstep.stats.max_loss_rel:.1e}"
            self.bar.set_postfix(post, refresh=False)
            self.bar.update(1)
        self.window.append(r)
        if r.step % self.settings["log_every"] == 0:
            self._log_window()
        if r.trace is not None:
            self._report_trace(r)
        every = self.settings["eval_every"]
        if every and r.step % every == 0 and r.step < self.c.steps:
            self._report_eval(r.step)

    def _say(self, text):                            # diagnostics to stderr, above the progress bar
        if self.bar is not None and not self.bar.disable:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def _log_window(self):
        w = self.window
        if self.log is not None and w:
            n = len(w)
            self.log.write("train", w[-1].step, loss=sum(x.loss for x in w) / n,
                           accuracy=sum(x.accuracy for x in w) / n, lr=w[-1].lr,
                           grad_norm=w[-1].grad_norm, tokens=sum(x.tokens for x in w), steps=n)
        w.clear()

    def _log_eval(self, step, ev, final=False):
        if self.log is not None:
            self.log.write("val", step, loss=ev.loss, token_accuracy=ev.token_accuracy,
                           sequence_accuracy=ev.sequence_accuracy, examples=ev.examples, final=final,
                           **({} if ev.bleu is None else {"bleu": ev.bleu}))

    def _report_trace(self, r):
        t = r.trace
        if not self.args.quiet:
            self._say(f"trace of step {r.step}:\n{t.table()}\n{t.summary()}" if self.args.trace_table
                      else f"trace of step {r.step}: {t.report()}")
        if self.log is not None:
            self.log.write("trace", r.step, summary=t.summary(), first_nonfinite=t.first_nonfinite(),
                           problems=[f"{p.name} ({p.phase}): {p.flag}" for p in t.problems()],
                           grad_norms=t.layer_grad_norms(), param_grad_norms=t.layer_param_grad_norms(),
                           records=t.to_dicts())

    def _report_eval(self, step):
        ev = self.trainer.evaluate()
        self._log_eval(step, ev)
        line = (f"step {step:>6}/{self.c.steps}  train loss {self.smooth_loss:.4f} acc {100 * self.smooth_acc:.2f}%  "
                f"| held-out {ev.brief()}")
        if self.lockstep is not None:
            _, rel = self.lockstep.check_weights()
            s = self.lockstep.stats
            line += f"  | torch: max loss diff {s.max_loss_rel:.1e} rel, weights {rel:.1e} rel"
        if not self.args.quiet:
            (self.bar.write if self.bar is not None and not self.bar.disable else print)(fit(line))
        if self.save:
            self._save(self.save)

    def _save(self, path, pause=None, finished=False):
        """Write the checkpoint with the signals held back (a save is never cut short by them);
        ``finished``: the final one, after the final evaluation (a resume then needs a larger --steps)."""
        with signals_blocked():
            if pause:
                pause_for_tests(pause)
            try:
                self.trainer.save(path, run=dict(self.settings, log=stored_log(self.log_path, path), finished=finished))
                write_config(path, resolved_config(self.c, self.settings), fresh=path != self.save)
            except (OSError, CheckpointError) as exc:        # a full disk: the previous checkpoint is intact
                raise SaveFailed(path, self.trainer.step, _cause(exc)) from exc
            self.last_checkpoint = (path, self.trainer.step)
            self.finished_saved = finished

    # -- how a run stops early --------------------------------------------------------------------------
    def _stopped(self, handler, exc):
        """Run ``handler(exc)`` with the signals held back (a second Ctrl-C waits until it is done, then
        changes nothing more); the log is closed whatever happens."""
        status = 1
        try:
            with signals_blocked():
                self._close_bar()
                if handler != self._log_failed:
                    self._log_quietly(self._log_window)
                status = handler(exc)
        except KeyboardInterrupt:           # a signal that waited: everything is saved and said already
            pass
        finally:
            if self.log is not None:
                self.log.close()
        return status

    def _log_quietly(self, write, *args, **fields):
        """A last log line of a run that stops: a log that cannot take it (a full disk) is left as it is,
        since the error that stops the run is the one to report."""
        if self.log is None:
            return
        try:
            write(*args, **fields)
        except LogWriteError:
            pass

    def _close_bar(self):
        if self.bar is not None:
            self.bar.close()

    def _interrupted(self, exc):
        trainer, signum = self.trainer, signum_of(exc)
        by = "" if signal_name(signum) == "SIGINT" else f" by {signal_name(signum)}"
        step = trainer.step
        if step == self.start_step:
            if self.new_log:                         # a log with no step in it: not another run's file
                self.log.close()
                os.unlink(self.log.path)
                self.log = None
            unchanged = f" ({self.args.resume} is unchanged)" if self.args.resume else ""
            print(f"interrupted{by} before the first step, nothing saved{unchanged}", file=sys.stderr)
            return exit_status(exc)
        if self.log is not None:
            self._log_quietly(self.log.write, "interrupted", step, time=self.log.now(), signal=signal_name(signum))
        msg = f"interrupted{by} at step {step}"
        if self.last_checkpoint is not None and self.last_checkpoint[1] == step and not self.finished_saved and \
                (self.save is None or self.last_checkpoint[0] == self.save):
            target = self.last_checkpoint[0]           # already written at this step
        else:             # saved now; after the final save too, marked finished while the run did not end
            claimed = self.save is None
            target = self.save or claim_fresh_path(f"{self.c.task}-interrupted")   # never over another file
            try:
                self._save(target)
            except (SaveFailed, RuntimeError, TrainingDiverged) as failed:
                if claimed:
                    os.unlink(target)
                cause = failed.cause if isinstance(failed, SaveFailed) else failed
                print(f"{msg}; no checkpoint saved: {cause}", file=sys.stderr)
                return exit_status(exc)
        print(f"{msg}; checkpoint saved to {target} (continue with --resume {target})", file=sys.stderr)
        return exit_status(exc)

    def _diverged(self, exc):
        if self.log is not None:
            self._log_quietly(self.log.write, "diverged", exc.step, loss=exc.loss, time=self.log.now())
        kept = ("" if self.last_checkpoint is None else
                f", so {self.last_checkpoint[0]} keeps step {self.last_checkpoint[1]} (the last finite state)")
        print(f"error: {exc}; stopped without saving{kept}; try a smaller --lr (this run's is {self.c.lr:g})",
              file=sys.stderr)
        return 1

    def _save_failed(self, exc):
        if self.log is not None:
            self._log_quietly(self.log.write, "error", exc.step, message=str(exc), time=self.log.now())
        print(f"error: {exc}; training stopped; {self._kept()}", file=sys.stderr)
        return 1

    def _kept(self):
        return ("nothing was saved" if self.last_checkpoint is None else
                "the previous checkpoint, {} (step {}), is intact".format(*self.last_checkpoint))

    def _log_failed(self, exc):
        """The log cannot be written: stop, and save the step just done (the log ends before it), to
        ``--save`` or, without it, to a fresh ``TASK-interrupted[-N].npz`` as an interrupted run does."""
        if self.log is not None:
            self.log.close()
            self.log = None
        step = self.trainer.step
        if step == self.start_step:
            if self.new_log and os.path.exists(self.log_path):    # this run's own empty log: not left behind
                os.unlink(self.log_path)
            print(f"error: {exc}; training stopped before the first step, nothing saved", file=sys.stderr)
            return 1
        target = self.save
        if self.last_checkpoint != (self.save, step):
            target = self.save or claim_fresh_path(f"{self.c.task}-interrupted")   # never over another file
            try:
                self._save(target)
            except (SaveFailed, RuntimeError) as failed:
                if not self.save:
                    os.unlink(target)
                cause = failed.cause if isinstance(failed, SaveFailed) else failed
                print(f"error: {exc}; training stopped at step {step}; no checkpoint saved ({cause}); "
                      f"{self._kept()}", file=sys.stderr)
                return 1
        print(f"error: {exc}; training stopped at step {step}; checkpoint saved to {target} (continue with "
              f"--resume {target})", file=sys.stderr)
        return 1
