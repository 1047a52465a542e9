"""Every way a ``train`` run can stop leaves what it says: signals (SIGINT, SIGTERM, SIGHUP) sent to a
real process at start-up, mid-run, during the final evaluation and during the final save; a diverged
run; a full disk; and no other run's files replaced. The test-only hook ``NT_TEST_PAUSE=<phase>``
(``cli.train_run.pause_for_tests``) holds the process at a phase for 5 s so that a signal lands there."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from numpy_transformer.cli import main
from numpy_transformer.training import runlog
from numpy_transformer.training import trainer as training
from numpy_transformer.training.checkpoint import load_checkpoint
from numpy_transformer.training.runlog import read_log
from numpy_transformer.training.trainer import TrainConfig, Trainer

TINY = dict(task="reverse", vocab_size=10, seq_len=6, num_train=300, num_val=40, d_model=16, nhead=2, num_layers=1,
            dim_feedforward=32, batch_size=8, warmup=5)
ARGS = ["--task", "reverse", "--vocab-size", "10", "--seq-len", "6", "--num-train", "300", "--num-val", "40",
        "--d-model", "16", "--nhead", "2", "--layers", "1", "--dim-feedforward", "32", "--batch-size", "8",
        "--warmup", "5", "--quiet"]


def _spawn(tmp_path, *argv, pause=None):
    env = dict(os.environ)
    env.pop("NT_TEST_PAUSE", None)
    if pause:
        env["NT_TEST_PAUSE"] = pause
    return subprocess.Popen([sys.executable, "-m", "numpy_transformer", "train", *ARGS, *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)


def _signal_when_paused(proc, phase, signum):
    """Wait for ``paused at PHASE`` on the process's stderr, send ``signum``; returns (status, stderr)."""
    try:
        line = proc.stderr.readline()                        # the hook's line comes first (--quiet)
        assert line == f"paused at {phase}\n", line + proc.communicate(timeout=120)[1]
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


def _fresh_weights(steps):
    t = Trainer(TrainConfig(**TINY, steps=steps))
    t.train()
    return t.model.state_dict()


def _assert_checkpoint_is_run(path, steps):
    saved = load_checkpoint(path)
    assert saved.extra_json["step"] == steps
    for name, v in _fresh_weights(steps).items():
        assert np.array_equal(saved.model_state[name], v), name


@pytest.mark.parametrize("phase,signum", [("final-eval", signal.SIGINT), ("final-save", signal.SIGINT),
                                          ("final-eval", signal.SIGTERM), ("final-save", signal.SIGHUP)])
def test_a_signal_during_the_final_evaluation_or_save_leaves_the_final_checkpoint(tmp_path, phase, signum):
    proc = _spawn(tmp_path, "--steps", "6", "--eval-every", "4", "--save", "run.npz", pause=phase)
    status, err = _signal_when_paused(proc, phase, signum)
    by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
    assert status == 128 + signum, err
    assert err.endswith(f"interrupted{by} at step 6; checkpoint saved to run.npz "
                        "(continue with --resume run.npz)\n"), err
    _assert_checkpoint_is_run(tmp_path / "run.npz", 6)
    assert [e["kind"] for e in read_log(tmp_path / "run.log.jsonl")][-1] == "interrupted"
    assert main(["train", "--resume", str(tmp_path / "run.npz"), "--quiet"]) == 0          # and it resumes
    _assert_checkpoint_is_run(tmp_path / "run.npz", 6)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_mid_run_save_a_checkpoint_that_resumes_exactly(tmp_path, signum):
    path = tmp_path / "run.npz"
    proc = _spawn(tmp_path, "--steps", "1000000", "--eval-every", "1", "--save", str(path))
    try:
        deadline = time.monotonic() + 60
        while not path.exists():                                 # saved after step 1: the loop is running
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.02)
        time.sleep(0.2)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err
    m = re.search(rf"interrupted by {name} at step (\d+); checkpoint saved to (\S+) \(continue with --resume", err)
    assert m and m.group(2) == str(path), err
    k = int(m.group(1))
    assert main(["train", "--resume", str(path), "--steps", str(k + 3), "--quiet"]) == 0
    _assert_checkpoint_is_run(path, k + 3)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_at_start_up_is_one_clean_line(tmp_path, signum):
    proc = _spawn(tmp_path, "--steps", "5", "--save", "run.npz", pause="startup")
    status, err = _signal_when_paused(proc, "startup", signum)
    assert status == 128 + signum and err == "interrupted before the first step, nothing saved\n", err
    assert os.listdir(tmp_path) == []


def test_the_signal_handlers_are_restored_after_the_run(tmp_path):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    assert main(["train", *ARGS, "--steps", "1"]) == 0
    assert {s: signal.getsignal(s) for s in before} == before


# ------------------------------------------------------------------------------------------------
# a diverged run, a full disk
# ------------------------------------------------------------------------------------------------

def test_a_diverged_run_stops_at_the_first_nonfinite_loss_and_keeps_the_last_good_checkpoint(tmp_path, capsys,
                                                                                              monkeypatch):
    original = Trainer.train_step

    def poisoned(self, trace=False):          # the weights blow up in step 3: step 4's loss is nan
        r = original(self, trace)
        if self.step == 3:
            self.model.head.weight.data[...] = np.inf
        return r
    monkeypatch.setattr(Trainer, "train_step", poisoned)
    path = tmp_path / "run.npz"
    assert main(["train", *ARGS, "--steps", "10", "--eval-every", "2", "--save", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "finished" not in out
    assert err == (f"error: training diverged: the loss of step 4 is nan; stopped without saving, so {path} keeps "
                   "step 2 (the last finite state); try a smaller --lr (this run's is 0.001)\n"), err
    saved = load_checkpoint(path)
    assert saved.extra_json["step"] == 2 and all(np.isfinite(v).all() for v in saved.model_state.values())
    assert [(e["kind"], e["step"]) for e in read_log(tmp_path / "run.log.jsonl")][-1] == ("diverged", 4)
    monkeypatch.setattr(Trainer, "train_step", original)
    assert Trainer.resume(path).step == 2


def test_lr_1e300_diverges_with_one_error_line(tmp_path, capsys):
    for extra in (["--clip", "0"], []):               # the loss goes nan; with clipping the weights first
        assert main(["train", *ARGS, "--steps", "50", "--lr", "1e300", "--schedule", "constant", "--eval-every", "1",
                     "--save", str(tmp_path / "d.npz"), "--force", *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: training diverged: ") and err.count("\n") == 1, err
        assert "stopped without saving;" in err and not (tmp_path / "d.npz").exists()


@pytest.mark.parametrize("failing_save", [2, 3])             # a mid-run save, the final save
def test_a_full_disk_during_a_save_is_one_error_line(tmp_path, capsys, monkeypatch, failing_save):
    real, calls = training.save_checkpoint, []

    def disk_full(*a, **k):
        calls.append(1)
        if len(calls) == failing_save:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*a, **k)
    monkeypatch.setattr(training, "save_checkpoint", disk_full)
    path = tmp_path / "run.npz"
    assert main(["train", *ARGS, "--steps", "6", "--eval-every", "2", "--save", str(path)]) == 1
    err = capsys.readouterr().err
    step = 2 * failing_save
    assert err == (f"error: cannot save the checkpoint {path} at step {step}: no space left on the device; "
                   f"training stopped; the previous checkpoint, {path} (step {step - 2}), is intact\n"), err
    assert Trainer.resume(path).step == step - 2


def test_a_full_disk_inside_the_atomic_write_is_said_once(tmp_path, capsys, monkeypatch):
    """The real path of a full disk: atomic_write's fsync fails (CheckpointWriteError); the message names
    the checkpoint and the cause once, exactly as docs/errors.md quotes it."""
    real, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 3:                                  # the second save's file (the first: file, directory)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    path = tmp_path / "run.npz"
    assert main(["train", *ARGS, "--steps", "6", "--eval-every", "2", "--save", str(path), "--no-log"]) == 1
    assert capsys.readouterr().err == (f"error: cannot save the checkpoint {path} at step 4: no space left on the "
                                       f"device; training stopped; the previous checkpoint, {path} (step 2), is "
                                       f"intact\n")


# ------------------------------------------------------------------------------------------------
# another run's files
# ------------------------------------------------------------------------------------------------

def test_an_earlier_runs_checkpoint_and_log_are_not_replaced_without_force(tmp_path, capsys):
    path, log = tmp_path / "run.npz", tmp_path / "run.log.jsonl"
    assert main(["train", *ARGS, "--steps", "2", "--save", str(path)]) == 0
    before = path.read_bytes(), log.read_bytes()
    capsys.readouterr()
    assert main(["train", *ARGS, "--steps", "3", "--save", str(path)]) == 2
    assert capsys.readouterr().err == (f"error: --save: {path} already exists (another run's checkpoint?); pass "
                                       f"--force to replace it, or --resume {path} to continue that run\n")
    assert (path.read_bytes(), log.read_bytes()) == before
    path.unlink()                                            # the log alone is another run's too
    assert main(["train", *ARGS, "--steps", "3", "--save", str(path)]) == 2
    assert "error: the log " + str(log) + " already exists" in capsys.readouterr().err
    assert not path.exists() and log.read_bytes() == before[1]
    assert main(["train", *ARGS, "--steps", "3", "--save", str(path), "--force"]) == 0
    assert load_checkpoint(path).extra_json["step"] == 3
    assert main(["train", "--resume", str(path), "--steps", "4", "--quiet"]) == 0          # its own files: fine
    assert [e["kind"] for e in read_log(log)].count("start") == 1


def test_a_log_that_is_a_symlink_is_never_followed(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.symlink(victim, tmp_path / "run.log.jsonl")
    for extra in ([], ["--force"]):
        assert main(["train", *ARGS, "--steps", "2", "--save", str(tmp_path / "run.npz"), *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: the log {tmp_path / 'run.log.jsonl'} is a symbolic link") and \
            err.count("\n") == 1, err
    os.symlink(victim, tmp_path / "x.jsonl")
    assert main(["train", *ARGS, "--steps", "2", "--log", str(tmp_path / "x.jsonl")]) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious\n" and not (tmp_path / "run.npz").exists()


def test_ctrl_c_without_save_never_overwrites_an_earlier_interrupted_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reverse-interrupted.npz").write_bytes(b"an earlier run")

    def interrupted(self, *a, **k):
        self.train_step()
        raise KeyboardInterrupt
    monkeypatch.setattr(Trainer, "train", interrupted)
    assert main(["train", *ARGS, "--steps", "5"]) == 130
    assert capsys.readouterr().err == ("interrupted at step 1; checkpoint saved to reverse-interrupted-2.npz "
                                       "(continue with --resume reverse-interrupted-2.npz)\n")
    assert (tmp_path / "reverse-interrupted.npz").read_bytes() == b"an earlier run"
    assert main(["train", *ARGS, "--steps", "5"]) == 130
    assert "saved to reverse-interrupted-3.npz" in capsys.readouterr().err
    assert Trainer.resume(tmp_path / "reverse-interrupted-2.npz").step == 1


# ------------------------------------------------------------------------------------------------
# a resumed run keeps every setting of the original
# ------------------------------------------------------------------------------------------------

def test_a_resumed_run_keeps_every_setting_of_the_original(tmp_path, monkeypatch):
    """Saved at step 3 of a run with --eval-every 2, --log-every 2, --trace-every 2, a custom --log and a
    non-default schedule, clipping, optimizer and lr, then resumed with --steps 8 only: it validates and
    saves at 4, 6, 8, logs every 2 steps to the same log, traces 4, 6, 8, and ends with the weights of
    the uninterrupted 8-step run."""
    options = dict(schedule="constant", clip=0.5, optimizer="sgd", lr=0.03, momentum=0.8, label_smoothing=0.1,
                   dropout=0.2)
    flags = ["--schedule", "constant", "--clip", "0.5", "--optimizer", "sgd", "--lr", "0.03", "--momentum", "0.8",
             "--label-smoothing", "0.1", "--dropout", "0.2"]
    path, log = tmp_path / "part.npz", tmp_path / "custom.jsonl"
    assert main(["train", *ARGS, *flags, "--steps", "3", "--eval-every", "2", "--log-every", "2", "--trace-every",
                 "2", "--log", str(log), "--save", str(path)]) == 0
    saved, real = [], training.save_checkpoint

    def spy(p, *a, **k):
        saved.append(k["extra_json"]["step"])
        return real(p, *a, **k)
    monkeypatch.setattr(training, "save_checkpoint", spy)
    assert main(["train", "--resume", str(path), "--steps", "8", "--quiet"]) == 0
    assert saved == [4, 6, 8]
    assert not (tmp_path / "part.log.jsonl").exists()
    entries = read_log(log)
    after = entries[[e["kind"] for e in entries].index("resume") + 1:]
    assert [e["step"] for e in after if e["kind"] == "val"] == [4, 6, 8]
    assert [e["step"] for e in after if e["kind"] == "train"] == [4, 6, 8]
    assert [e["step"] for e in after if e["kind"] == "trace"] == [4, 6, 8]
    full = Trainer(TrainConfig(**dict(TINY, **options), steps=8))
    full.train()
    ck = load_checkpoint(path)
    assert ck.extra_json["run"] == {"eval_every": 2, "log_every": 2, "trace_every": 2, "log": "custom.jsonl",
                                    "finished": True}
    for name, v in full.model.state_dict().items():
        assert np.array_equal(ck.model_state[name], v), name


def test_resuming_into_another_save_path_does_not_take_over_an_existing_log(tmp_path, capsys):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["train", *ARGS, "--steps", "2", "--save", str(a)]) == 0
    (tmp_path / "b.log.jsonl").write_text("another run's log\n")
    capsys.readouterr()
    assert main(["train", "--resume", str(a), "--save", str(b), "--steps", "3", "--quiet"]) == 2
    assert "error: the log " + str(tmp_path / "b.log.jsonl") + " already exists" in capsys.readouterr().err
    assert (tmp_path / "b.log.jsonl").read_text() == "another run's log\n" and not b.exists()
    (tmp_path / "b.log.jsonl").unlink()
    assert main(["train", "--resume", str(a), "--save", str(b), "--steps", "3", "--quiet"]) == 0
    assert load_checkpoint(b).extra_json["step"] == 3 and load_checkpoint(a).extra_json["step"] == 2


# ------------------------------------------------------------------------------------------------
# a log that cannot be written; whose log a resumed run writes
# ------------------------------------------------------------------------------------------------

class _FullDiskFile:
    """A log file whose flush fails with ENOSPC from the ``fail_at``-th line on (a disk filling up)."""

    def __init__(self, real, fail_at):
        self.real, self.lines, self.fail_at = real, 0, fail_at

    def write(self, text):
        self.lines += 1
        return self.real.write(text)

    def flush(self):
        if self.lines >= self.fail_at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.real.flush()

    @property
    def closed(self):
        return self.real.closed

    def close(self):
        self.real.close()


@pytest.mark.parametrize("fail_at", [1, 6])                  # the "start" line; a "train" line mid-run
def test_a_full_disk_during_a_log_write_saves_the_step_and_says_one_line(tmp_path, capsys, monkeypatch, fail_at):
    real_open = runlog.RunLog._open
    monkeypatch.setattr(runlog.RunLog, "_open", lambda self, mode: _FullDiskFile(real_open(self, mode), fail_at))
    path, log = tmp_path / "run.npz", tmp_path / "run.log.jsonl"
    assert main(["train", *ARGS, "--steps", "8", "--eval-every", "2", "--save", str(path)]) == 1
    err = capsys.readouterr().err
    if fail_at == 1:
        assert err == (f"error: cannot write the log {log}: no space left on the device; training stopped before "
                       f"the first step, nothing saved\n"), err
        assert not path.exists() and not log.exists()             # its own empty log is not left behind
        return
    # lines: start, train 1, train 2, val 2, train 3, train 4 (the 6th: fails after step 4's update)
    assert err == (f"error: cannot write the log {log}: no space left on the device; training stopped at step 4; "
                   f"checkpoint saved to {path} (continue with --resume {path})\n"), err
    _assert_checkpoint_is_run(path, 4)
    monkeypatch.undo()
    assert main(["train", "--resume", str(path), "--quiet"]) == 0          # and the run goes on, log and all
    _assert_checkpoint_is_run(path, 8)
    assert [e["step"] for e in read_log(log) if e["kind"] == "train"] == list(range(1, 9))


def test_a_full_disk_for_the_log_and_the_checkpoint_keeps_the_previous_checkpoint(tmp_path, capsys, monkeypatch):
    real_open, real_save = runlog.RunLog._open, training.save_checkpoint
    monkeypatch.setattr(runlog.RunLog, "_open", lambda self, mode: _FullDiskFile(real_open(self, mode), 6))
    calls = []

    def save(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(*a, **k)
    monkeypatch.setattr(training, "save_checkpoint", save)
    path, log = tmp_path / "run.npz", tmp_path / "run.log.jsonl"
    assert main(["train", *ARGS, "--steps", "8", "--eval-every", "2", "--save", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"error: cannot write the log {log}: no space left on the device; training stopped at step 4; no checkpoint "
        f"saved (no space left on the device); the previous checkpoint, {path} (step 2), is intact\n")
    assert Trainer.resume(path).step == 2


def test_resuming_into_another_checkpoint_never_writes_the_originals_log(tmp_path, capsys):
    """--resume A --save B is another run: B's own log (B.log.jsonl), A's custom log untouched; a later
    --resume A continues A's log from A's step, as before."""
    a, b, custom = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "custom.jsonl"
    assert main(["train", *ARGS, "--steps", "3", "--save", str(a), "--log", str(custom)]) == 0
    before = custom.read_bytes()
    assert main(["train", "--resume", str(a), "--save", str(b), "--steps", "6", "--quiet"]) == 0
    assert custom.read_bytes() == before
    b_log = read_log(tmp_path / "b.log.jsonl")
    assert [e["step"] for e in b_log if e["kind"] == "train"] == [4, 5, 6] and b_log[0]["kind"] == "start"
    assert load_checkpoint(b).extra_json["run"]["log"] == "next-to-checkpoint"
    assert main(["train", "--resume", str(a), "--steps", "5", "--quiet"]) == 0
    assert [e["step"] for e in read_log(custom) if e["kind"] == "train"] == [1, 2, 3, 4, 5]
    assert [e["step"] for e in read_log(tmp_path / "b.log.jsonl") if e["kind"] == "train"] == [4, 5, 6]
    capsys.readouterr()
    assert main(["train", "--resume", str(a), "--save", str(b), "--steps", "7", "--force", "--log", str(custom),
                 "--quiet"]) == 0
    assert [e["kind"] for e in read_log(custom)][0] == "start"               # --force: replaced, not continued


def test_a_log_outside_the_checkpoints_directory_is_named_again_on_resume(tmp_path, capsys):
    (tmp_path / "ck").mkdir()
    (tmp_path / "logs").mkdir()
    path, log = tmp_path / "ck" / "run.npz", tmp_path / "logs" / "run.jsonl"
    assert main(["train", *ARGS, "--steps", "2", "--save", str(path), "--log", str(log)]) == 0
    assert load_checkpoint(path).extra_json["run"]["log"] == "elsewhere"
    capsys.readouterr()
    assert main(["train", "--resume", str(path), "--steps", "3", "--quiet"]) == 2
    assert capsys.readouterr().err == (f"error: --resume: the log of {path} was written outside its directory, "
                                       "which a checkpoint does not record; give --log PATH to continue it (or "
                                       "--no-log)\n")
    assert main(["train", "--resume", str(path), "--steps", "3", "--quiet", "--log", str(log)]) == 0
    assert [e["step"] for e in read_log(log) if e["kind"] == "train"] == [1, 2, 3]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_resumed_logs_trim_keeps_the_umask_permissions_and_removes_a_killed_trims_temp_file(tmp_path, umask):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()                                             # a process id no longer alive
    path, log = tmp_path / "run.npz", tmp_path / "run.log.jsonl"
    old = os.umask(umask)
    try:
        assert main(["train", *ARGS, "--steps", "2", "--save", str(path)]) == 0
        stale = tmp_path / f".tmp-run.log.jsonl-{dead.pid}-abc123"
        stale.write_text("half a log")
        assert main(["train", "--resume", str(path), "--steps", "3", "--quiet"]) == 0
    finally:
        os.umask(old)
    assert os.stat(log).st_mode & 0o777 == 0o666 & ~umask
    assert not stale.exists()
    assert [e["step"] for e in read_log(log) if e["kind"] == "train"] == [1, 2, 3]


# ------------------------------------------------------------------------------------------------
# Ctrl-C while python -m numpy_transformer starts
# ------------------------------------------------------------------------------------------------

STARTUP_LINES = ("interrupted while starting up, nothing done", "interrupted before the first step, nothing saved")


@pytest.mark.parametrize("delay", [0.05, 0.1, 0.2, 0.3, 0.5])
def test_ctrl_c_while_python_m_starts_is_one_documented_line(tmp_path, delay):
    """From the package's first line on, a Ctrl-C is one documented line, never a traceback. Before
    that runs the interpreter's own start-up (site and the installed packages' .pth files: 0.05 s or
    more on a loaded machine) and runpy's search for the package, where CPython itself prints the
    KeyboardInterrupt with frames of its own only (a failed ``init_import_site``, or ``<frozen runpy>``)
    and no frame of ours; and CPython's importlib can swallow one in a module lock's weakref callback
    ("Exception ignored in: <function _get_module_lock...>"), in which case the run just goes on; and a
    signal that lands before the interpreter installs its own SIGINT handler kills it silently (the OS's
    default action: return code -SIGINT, nothing printed), also before any of our code."""
    proc = _spawn(tmp_path, "--steps", "300", "--save", "x.npz")
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    if "Traceback" in err and "numpy_transformer/" not in err.replace("__editable___numpy_transformer", ""):
        return            # before any of our code: site (init_import_site) or runpy finding the package
    if "Exception ignored in: <function _get_module_lock" in err and proc.returncode == 0:
        return                                              # CPython lost the signal; the run finished
    if not err.strip() and proc.returncode == -signal.SIGINT:
        return            # before CPython installed its SIGINT handler: the OS's default action killed it
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last in STARTUP_LINES or re.fullmatch(r"interrupted at step \d+; checkpoint saved to x\.npz .*", last), err


def test_the_package_imports_nothing_before_the_clis_ctrl_c_handling():
    """``import numpy_transformer`` loads no NumPy and no subpackage (``nt.gradcheck`` on first use, and it
    stays the function after its subpackage ``numpy_transformer.study.gradchecking`` is imported)."""
    code = ("import sys; before = set(sys.modules); import numpy_transformer as nt; "
            "new = set(sys.modules) - before - {'numpy_transformer'}; assert not new, sorted(new); "
            "import numpy_transformer.study.gradchecking.hygiene; "
            "from numpy_transformer.study.gradchecking import gradcheck; assert nt.gradcheck is gradcheck")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ctrl_c_in_main_while_the_command_loads_says_starting_up(monkeypatch, capsys):
    from numpy_transformer import cli

    def interrupted(argv):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["train"]) == 130
    assert capsys.readouterr().err == "interrupted while starting up, nothing done\n"
