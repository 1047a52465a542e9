"""Checkpoints under adversity: a full disk, a writer killed mid-save, a power cut after the rename (the
directory fsync), the umask, and well-formed but tampered files, each refused with a CheckpointError
naming the field before anything is read in full or built."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
import tracemalloc
import zipfile

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.cli import main
from numpy_transformer.training import checkpoint_files
from numpy_transformer.training.checkpoint import (
    CheckpointError,
    CheckpointWriteError,
    load_checkpoint,
    save_checkpoint,
)
from numpy_transformer.training.trainer import TrainConfig, Trainer

TINY = dict(task="reverse", vocab_size=10, seq_len=6, num_train=64, num_val=16, d_model=16, nhead=2, num_layers=2,
            dim_feedforward=32, batch_size=8, warmup=5)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A real checkpoint of a short training run (3 steps), its bytes kept to copy from."""
    path = tmp_path_factory.mktemp("trained") / "run.npz"
    t = Trainer(TrainConfig(**TINY, steps=3))
    t.train()
    t.save(path)
    return path.read_bytes()


def _copy(trained, tmp_path, name="run.npz"):
    path = tmp_path / name
    path.write_bytes(trained)
    return path


def _rewrite(path, edit):
    """Rewrite ``path`` with ``edit(arrays, extra_json, config, model_config)`` applied (np.savez, as saved)."""
    with np.load(path) as npz:
        arrays = dict(npz)
    extra, config, model_config = (json.loads(str(arrays[k])) for k in ("extra_json", "config", "model_config"))
    edit(arrays, extra, config, model_config)
    for k, v in (("extra_json", extra), ("config", config), ("model_config", model_config)):
        arrays[k] = np.array(json.dumps(v))
    np.savez(path, **arrays)


# ------------------------------------------------------------------------------------------------
# saving: a full disk, a killed writer, durability, permissions
# ------------------------------------------------------------------------------------------------

def _model():
    return nt.TransformerModel(vocab_size=12, d_model=8, nhead=2, num_layers=1, dim_feedforward=16, max_len=8,
                               seed=0)


def test_a_full_disk_raises_a_clear_error_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "run.npz"
    save_checkpoint(path, _model())
    before = path.read_bytes()

    def savez_until_the_disk_is_full(f, **arrays):
        f.write(b"PK" + b"\0" * 1000)                       # part of the archive reaches the disk
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(np, "savez", savez_until_the_disk_is_full)
    with pytest.raises(CheckpointWriteError) as info:
        save_checkpoint(path, _model())
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert nt.CheckpointWriteError is CheckpointWriteError and nt.CheckpointError is CheckpointError
    message = str(info.value)
    assert message.startswith(f"cannot save checkpoint {path}: no space left on the device")
    assert "previous checkpoint there, if any, is unchanged" in message and "Errno" not in message
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["run.npz"], "the temporary file was left behind"


_KILLED_WRITER = """
import sys, time
import numpy as np
import numpy_transformer as nt
from numpy_transformer.training.checkpoint import save_checkpoint
def slow_savez(f, **arrays):
    f.write(b"PK" + b"\\0" * 100); f.flush()
    print("writing", flush=True)
    time.sleep(60)
np.savez = slow_savez
save_checkpoint(sys.argv[1], nt.TransformerModel(vocab_size=12, d_model=8, nhead=2, num_layers=1,
                                                 dim_feedforward=16, max_len=8, seed=0))
"""


def _killed_save(path):
    """Run a save of ``path`` in a child process and SIGKILL it mid-write; returns its temp file's name."""
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    temps = [n for n in os.listdir(path.parent) if n.startswith(f".tmp-{path.name}-{child.pid}-")]
    assert len(temps) == 1, os.listdir(path.parent)
    return temps[0]


@pytest.mark.parametrize("then", ["load", "save"])
def test_a_writer_killed_mid_save_leaves_a_temp_file_the_next_load_or_save_removes(tmp_path, then):
    path = tmp_path / "run.npz"
    save_checkpoint(path, _model())
    before = path.read_bytes()
    temp = _killed_save(path)
    assert path.read_bytes() == before                    # the previous checkpoint is whole
    if then == "load":
        load_checkpoint(path).build_model()
    else:
        save_checkpoint(path, _model())
    assert temp not in os.listdir(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["run.npz"]


def test_only_stale_temp_files_of_that_checkpoint_are_removed(tmp_path):
    """A live writer's temp file stays, other checkpoints' and other files stay; a dead writer's, an
    hour-old one's and an hour-old one of the previous naming (no pid) go."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {
            f".tmp-run.npz-{dead.pid}-abc_123x": "removed",      # its writer is gone
            f".tmp-run.npz-{live.pid}-k2j4h6g8": "kept",         # a concurrent save in progress
            f".tmp-run.npz-{live.pid}-oldoldol": "removed",      # an hour old: the pid may be reused
            ".tmp-run.npz-q1w2e3r4": "kept",                     # previous naming, recent
            ".tmp-run.npz-zzzzzzzz": "removed",                  # previous naming, an hour old
            f".tmp-run.npz-2-{dead.pid}-abcdefgh": "kept",       # the checkpoint run.npz-2's
            f".tmp-other.npz-{dead.pid}-abcdefgh": "kept",
            f"tmp-run.npz-{dead.pid}-abcdefgh": "kept",
            "run.npz-notes.txt": "kept",
        }
        for name in names:
            (tmp_path / name).write_bytes(b"x")
        old = time.time() - checkpoint_files.STALE_SECONDS - 60
        for name in (f".tmp-run.npz-{live.pid}-oldoldol", ".tmp-run.npz-zzzzzzzz"):
            os.utime(tmp_path / name, (old, old))
        save_checkpoint(tmp_path / "run.npz", _model())
        left = set(os.listdir(tmp_path))
        assert left == {n for n, fate in names.items() if fate == "kept"} | {"run.npz"}
    finally:
        live.kill()
        live.wait()


def test_the_file_is_fsynced_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        return real_fsync(fd)

    def replace(src, dst):
        events.append("rename")
        return real_replace(src, dst)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    save_checkpoint(tmp_path / "run.npz", _model())
    assert events == ["fsync file", "rename", "fsync directory"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_the_saved_file_honours_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        save_checkpoint(tmp_path / "run.npz", _model())
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "run.npz").st_mode) == 0o666 & ~umask


# ------------------------------------------------------------------------------------------------
# loading: tampered but well-formed checkpoints, refused before anything is built
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def nothing_built(monkeypatch):
    """Fail the test if a Trainer, a model or a task's data is built (and measure the allocations)."""
    def refuse(*a, **k):
        raise AssertionError("something was built from the tampered checkpoint")
    for cls in (Trainer, nt.TransformerModel, nt.Seq2SeqModel, nt.GPT):
        monkeypatch.setattr(cls, "__init__", refuse)
    monkeypatch.setattr(nt.data, "make_task", refuse)
    tracemalloc.start()
    yield
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * 2 ** 20, f"{peak} bytes allocated while refusing a small checkpoint"


def _set_perm(value_at_0):
    def edit(arrays, extra, config, model_config):
        arrays["extra/batcher_perm"] = arrays["extra/batcher_perm"].copy()
        arrays["extra/batcher_perm"][0] = value_at_0
    return edit


TAMPERED = [
    ("batcher state missing", lambda a, extra, c, m: extra.pop("batcher"),
     r"the training state is incomplete: \['batcher'\] missing"),
    ("batch permutation missing", lambda a, extra, c, m: a.pop("extra/batcher_perm"),
     r"the training state is incomplete: \['batcher_perm'\] missing"),
    ("batcher rng missing", lambda a, extra, c, m: extra["batcher"].pop("rng"),
     r"the batcher state is missing \['rng'\]"),
    ("permutation out of range", _set_perm(10 ** 6),
     r"the batch permutation is not a permutation of 0\.\.63 \(dtype int64, values in \[\d+, 1000000\]\)"),
    ("permutation repeats a row", _set_perm(1), r"the batch permutation is not a permutation of 0\.\.63"),
    ("permutation of another length", lambda a, extra, c, m: a.update({"extra/batcher_perm": np.arange(10)}),
     r"the batch permutation has shape \[10\], expected \[64\] \(num_train\)"),
    ("negative position", lambda a, extra, c, m: extra["batcher"].update(pos=-8),
     r"the batcher position must be a multiple of batch_size 8 in \[0, 64\], got -8"),
    ("position past the end", lambda a, extra, c, m: extra["batcher"].update(pos=72),
     r"the batcher position must be a multiple of batch_size 8 in \[0, 64\], got 72"),
    ("negative step", lambda a, extra, c, m: extra.update(step=-1), r"step must be an int >= 0, got -1"),
    ("bad dropout generator state", lambda a, extra, c, m: extra["generators"].update(x={"bit_generator": "no"}),
     r"generators\['x'\] is not a NumPy generator state"),
    ("config d_model 10**7", lambda a, extra, c, m: c.update(d_model=10 ** 7),
     r"the training configuration says d_model 10000000, but model_config says d_model 16"),
    ("model_config d_model 10**7", lambda a, extra, c, m: m.update(d_model=10 ** 7),
     r"model_config says d_model 10000000, but the stored model/embed.weight has shape \[10, 16\] \(d_model 16\)"),
    ("model_config num_layers 10**6", lambda a, extra, c, m: m.update(num_layers=10 ** 6),
     r"model_config says num_layers 1000000, but the checkpoint stores 2 layers"),
    ("config num_val 10**12", lambda a, extra, c, m: c.update(num_val=10 ** 12),
     r"the task's data \(num_train \+ num_val rows of seq_len tokens\) would need about .* GiB to build, more "
     r"than this machine's"),
    ("run.trace_every a string", lambda a, extra, c, m: extra["run"].update(trace_every="x"),
     r"run\.trace_every must be an int >= 0, got 'x'"),
    ("run.log_every 0", lambda a, extra, c, m: extra["run"].update(log_every=0), r"run\.log_every must be an int >= 1"),
    ("run.eval_every -1", lambda a, extra, c, m: extra["run"].update(eval_every=-1),
     r"run\.eval_every must be an int >= 0, got -1"),
    ("run.eval_every a float", lambda a, extra, c, m: extra["run"].update(eval_every=2.5),
     r"run\.eval_every must be an int >= 0, got 2\.5"),
    ("run.finished not a bool", lambda a, extra, c, m: extra["run"].update(finished=1),
     r"run\.finished must be true or false, got 1"),
    ("run an unknown setting", lambda a, extra, c, m: extra["run"].update(steps_every=3),
     r"run holds unknown settings \['steps_every'\]"),
    ("run.log an absolute path elsewhere", lambda a, extra, c, m: extra["run"].update(log="/tmp/review22/pwned.jsonl"),
     r"run\.log must be None, 'next-to-checkpoint', 'elsewhere' or the name of a \.jsonl file in the checkpoint's "
     r"directory .*, got '/tmp/review22/pwned\.jsonl'"),
    ("run.log up a directory", lambda a, extra, c, m: extra["run"].update(log="../x.jsonl"),
     r"run\.log must be .*, got '\.\./x\.jsonl'"),
    ("run.log not a .jsonl", lambda a, extra, c, m: extra["run"].update(log="run.npz"),
     r"run\.log must be .*'run\.npz'"),
    ("a NaN weight", lambda a, extra, c, m: a["model/embed.weight"].__setitem__((0, 0), np.nan),
     r"model/embed\.weight holds 1 non-finite value\(s\) \(NaN or inf\) of 160"),
    ("an inf optimizer state", lambda a, extra, c, m: a["optim/state/2/exp_avg"].flat.__setitem__(0, np.inf),
     r"optim/state/2/exp_avg holds 1 non-finite value"),
    ("a negative exp_avg_sq",
     lambda a, extra, c, m: a.update({"optim/state/0/exp_avg_sq": -1 - a["optim/state/0/exp_avg_sq"]}),
     r"optim/state/0/exp_avg_sq \(Adam's second moment, a mean of squares\) holds 160 negative value\(s\)"),
]


@pytest.mark.parametrize("edit,message", [t[1:] for t in TAMPERED], ids=[t[0] for t in TAMPERED])
def test_a_tampered_training_checkpoint_is_refused_before_anything_is_built(trained, tmp_path, edit, message,
                                                                           monkeypatch):
    path = _copy(trained, tmp_path)
    _rewrite(path, edit)
    with pytest.MonkeyPatch.context() as mp:
        for cls in (Trainer, nt.TransformerModel):
            mp.setattr(cls, "__init__", lambda *a, **k: pytest.fail("built from a tampered checkpoint"))
        tracemalloc.start()
        try:
            with pytest.raises(CheckpointError, match=message):
                Trainer.resume(path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 20 * 2 ** 20, f"{peak} bytes allocated while refusing a small checkpoint"
    assert main(["train", "--resume", str(path), "--quiet"]) != 0     # the CLI: one error line, no traceback


def test_the_cli_reports_a_tampered_checkpoint_in_one_line(trained, tmp_path, capsys):
    path = _copy(trained, tmp_path)
    _rewrite(path, lambda a, extra, c, m: extra["batcher"].update(pos=-8))
    assert main(["train", "--resume", str(path), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "the batcher position must be a multiple of batch_size 8" in err


def _with_member_header(path, entry, shape):
    """Rewrite ``path`` so that member ``entry``'s .npy header declares ``shape`` (its data unchanged)."""
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    raw = members[entry + ".npy"]
    f = io.BytesIO(raw)
    np.lib.format.read_magic(f)
    _, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    data = raw[f.tell():]
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                 "fortran_order": fortran, "shape": shape})
    members[entry + ".npy"] = header.getvalue() + data
    with zipfile.ZipFile(path, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return len(data)


@pytest.mark.parametrize("entry", ["model/head.bias", "extra/batcher_perm", "model_config"])
def test_an_array_header_declaring_2_to_the_40_elements_is_refused_before_reading(trained, tmp_path, entry,
                                                                                 nothing_built):
    path = _copy(trained, tmp_path)
    held = _with_member_header(path, entry, (2 ** 40,))
    with pytest.raises(CheckpointError, match=rf"is damaged: entry {entry!r} declares shape \(1099511627776,\) "
                                              rf"of \S+ \(1099511627776 elements, \d+ bytes\) but holds {held} "
                                              rf"bytes of data"):
        load_checkpoint(path)


@pytest.mark.parametrize("kind", ["encoder", "seq2seq", "gpt"])
def test_build_model_refuses_a_model_config_that_disagrees_with_the_weights(tmp_path, kind, nothing_built):
    """A weights-only checkpoint (no training configuration): load_checkpoint reads it, build_model
    refuses before constructing anything."""
    width = {"encoder": "d_model", "seq2seq": "d_model", "gpt": "n_embd"}[kind]
    path = tmp_path / f"{kind}.npz"
    _weights_only(path, kind)
    _rewrite(path, lambda a, extra, c, m: m.update({width: 64}))
    ckpt = load_checkpoint(path)
    with pytest.raises(CheckpointError, match=rf"model_config says {width} 64, but the stored model/\S+ "
                                              rf"has shape \[\d+, 8\] \({width} 8\)"):
        ckpt.build_model()
    _rewrite(path, lambda a, extra, c, m: m.update({width: 10 ** 7}))      # absurd: refused when loading
    with pytest.raises(CheckpointError, match=rf"model_config \(.*{width} 10000000.*\) would need about "
                                              r".* GiB to build, more than this machine's"):
        load_checkpoint(path)


def test_an_absurd_model_size_no_weight_witnesses_is_refused_by_memory(tmp_path, nothing_built):
    """The sinusoidal table's max_len has no stored array: 10**12 rows would not fit in any memory."""
    path = tmp_path / "encoder.npz"
    _weights_only(path, "encoder")
    _rewrite(path, lambda a, extra, c, m: m.update(max_len=10 ** 12))
    with pytest.raises(CheckpointError, match=r"model_config \(.*max_len 1000000000000.*\) would need about "
                                              r".* GiB to build, more than this machine's"):
        load_checkpoint(path)


_BUILT = {}


def _weights_only(path, kind):
    """Save a small model of ``kind`` without training state (built once, before any patching)."""
    with open(_BUILT[kind], "rb") as f:
        path.write_bytes(f.read())


@pytest.fixture(scope="module", autouse=True)
def _small_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("weights")
    models = {"encoder": _model(),
              "seq2seq": nt.Seq2SeqModel(12, 12, d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                         dim_feedforward=16, max_len=8, seed=0),
              "gpt": nt.GPT(vocab_size=12, block_size=8, n_layer=1, n_head=2, n_embd=8, n_inner=16, seed=0)}
    for kind, model in models.items():
        _BUILT[kind] = folder / f"{kind}.npz"
        save_checkpoint(_BUILT[kind], model)
