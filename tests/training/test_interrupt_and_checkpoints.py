"""Nothing lost on disk: atomic saves (also when interrupted), loading that validates everything before it
touches a model and never unpickles, and Ctrl-C during training that saves a checkpoint which resumes to
exactly the losses and weights of the uninterrupted run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import zipfile

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.cli import main
from numpy_transformer.training import checkpoint as ckpt_mod
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from numpy_transformer.training.trainer import TrainConfig, Trainer

TINY = dict(task="reverse", vocab_size=10, seq_len=6, num_train=300, num_val=40, d_model=16, nhead=2, num_layers=2,
            dim_feedforward=32, batch_size=8, warmup=5, dropout=0.2)
STEPS = 14


def _state(trainer):
    opt = trainer.optimizer.state_dict()["state"]
    return ({k: v.copy() for k, v in trainer.model.state_dict().items()},
            {(i, k): np.array(v, copy=True) for i, s in opt.items() for k, v in s.items()})


def _assert_same_state(a, b):
    (wa, oa), (wb, ob) = a, b
    assert wa.keys() == wb.keys() and oa.keys() == ob.keys()
    for k in wa:
        assert np.array_equal(wa[k], wb[k]), f"weight {k} differs"
    for k in oa:
        assert np.array_equal(oa[k], ob[k]), f"optimizer state {k} differs"


@pytest.fixture(scope="module")
def uninterrupted():
    t = Trainer(TrainConfig(**TINY, steps=STEPS))
    losses = []
    t.train(callback=lambda r: losses.append(r.loss))
    return losses, _state(t)


def _interrupt_at(trainer, where, step):
    """Make the next training step ``step`` raise KeyboardInterrupt at ``where``."""
    def boom(original):
        def wrapper(*a, **k):
            if trainer.step == step or (where == "batcher" and trainer.step == step - 1):
                raise KeyboardInterrupt
            return original(*a, **k)
        return wrapper
    if where == "batcher":
        trainer.batcher.next = boom(trainer.batcher.next)
    elif where == "forward":                                     # deep inside: the second layer's attention
        attn = trainer.model.encoder.layers[1].self_attn
        object.__setattr__(attn, "forward", boom(attn.forward))
    elif where == "backward":
        lin = trainer.model.encoder.layers[0].linear1
        object.__setattr__(lin, "backward", boom(lin.backward))
    elif where == "loss":
        trainer.criterion.backward = boom(trainer.criterion.backward)
    else:
        raise AssertionError(where)


@pytest.mark.parametrize("where", ["batcher", "forward", "backward", "loss", "callback"])
def test_interrupted_step_is_undone_and_resume_is_bit_for_bit(tmp_path, uninterrupted, where):
    full_losses, full_state = uninterrupted
    k = 6
    t = Trainer(TrainConfig(**TINY, steps=STEPS))
    losses = []

    def callback(r):
        losses.append(r.loss)
        if where == "callback" and r.step == k:
            raise KeyboardInterrupt
    if where != "callback":
        _interrupt_at(t, where, k)
    with pytest.raises(KeyboardInterrupt):
        t.train(callback=callback)
    done = k if where == "callback" else k - 1                    # a step cut short is undone
    assert t.step == done and len(losses) == done
    path = tmp_path / "interrupted.npz"
    t.save(path)
    resumed = Trainer.resume(path)
    assert resumed.step == done
    resumed.train(callback=lambda r: losses.append(r.loss))
    assert losses == full_losses, "the resumed run's losses differ from the uninterrupted run's"
    _assert_same_state(_state(resumed), full_state)
    # the interrupted trainer itself also continues exactly (the undo restored its generators)
    t2 = Trainer.resume(path)
    t2.train()
    _assert_same_state(_state(t2), full_state)


def test_interrupt_inside_the_optimizer_update_refuses_to_save(tmp_path):
    t = Trainer(TrainConfig(**TINY, steps=STEPS))
    t.train(steps=3)
    t.save(tmp_path / "good.npz")
    original = t.optimizer._update
    calls = []

    def half_update(*a):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt                              # some parameters updated, others not
        return original(*a)
    t.optimizer._update = half_update
    with pytest.raises(KeyboardInterrupt):
        t.train()
    with pytest.raises(RuntimeError, match=r"step 4 was interrupted inside the optimizer update.*previous checkpoint"):
        t.save(tmp_path / "bad.npz")
    assert not (tmp_path / "bad.npz").exists() and Trainer.resume(tmp_path / "good.npz").step == 3


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_during_a_step_stops_after_it(monkeypatch, uninterrupted, tmp_path):
    """A real SIGINT in the middle of step k: training stops after step k (nothing half done) with a
    KeyboardInterrupt; a second Ctrl-C would stop at once. The checkpoint resumes exactly."""
    full_losses, full_state = uninterrupted
    monkeypatch.setattr(signal, "getsignal", lambda s: signal.default_int_handler)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        t = Trainer(TrainConfig(**TINY, steps=STEPS))
        attn = t.model.encoder.layers[0].self_attn
        original = attn.forward

        def forward(*a, **k):
            if t.step == 5:
                os.kill(os.getpid(), signal.SIGINT)              # Ctrl-C arrives mid-forward
                time.sleep(0.01)
            return original(*a, **k)
        object.__setattr__(attn, "forward", forward)
        losses = []
        with pytest.raises(KeyboardInterrupt, match="interrupted after step 5"):
            t.train(callback=lambda r: losses.append(r.loss))
        assert t.step == 5 and len(losses) == 5
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    t.save(tmp_path / "c.npz")
    resumed = Trainer.resume(tmp_path / "c.npz")
    resumed.train(callback=lambda r: losses.append(r.loss))
    assert losses == full_losses
    _assert_same_state(_state(resumed), full_state)


def test_ctrl_c_on_the_train_command_saves_a_checkpoint_that_resumes_exactly(tmp_path):
    """The real thing: SIGINT to a `train` process; its checkpoint, resumed to K + 8 steps, equals an
    uninterrupted K + 8-step run bit for bit."""
    args = ["--task", "reverse", "--vocab-size", "10", "--seq-len", "6", "--num-train", "300", "--num-val", "40",
            "--d-model", "16", "--nhead", "2", "--layers", "1", "--dim-feedforward", "32", "--batch-size", "8",
            "--warmup", "5", "--eval-every", "1", "--quiet"]
    path = tmp_path / "run.npz"
    proc = subprocess.Popen([sys.executable, "-m", "numpy_transformer", "train", *args, "--steps", "1000000",
                             "--save", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not path.exists():                                 # saved after step 1: the loop is running
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.02)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    m = re.search(r"interrupted at step (\d+); checkpoint saved to (\S+) \(continue with --resume", err)
    assert m and m.group(2) == str(path), err
    k = int(m.group(1))
    assert k > 0 and load_checkpoint(path).extra_json["step"] == k
    assert main(["train", "--resume", str(path), "--steps", str(k + 8), "--quiet"]) == 0
    fresh = Trainer(TrainConfig(**dict(TINY, num_layers=1, dropout=0.1), steps=k + 8))
    fresh.train()
    saved = load_checkpoint(path)
    assert saved.extra_json["step"] == k + 8
    for name, v in fresh.model.state_dict().items():
        assert np.array_equal(saved.model_state[name], v), name


def test_ctrl_c_without_save_still_writes_a_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def interrupted(self, *a, **k):
        self.train_step()
        raise KeyboardInterrupt
    monkeypatch.setattr(Trainer, "train", interrupted)
    argv = ["train", "--task", "copy", "--vocab-size", "8", "--seq-len", "4", "--num-train", "50", "--num-val", "10",
            "--d-model", "8", "--nhead", "2", "--layers", "1", "--dim-feedforward", "8", "--batch-size", "4", "--quiet"]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert ("interrupted at step 1; checkpoint saved to copy-interrupted.npz "
            "(continue with --resume copy-interrupted.npz)") in err
    assert Trainer.resume(tmp_path / "copy-interrupted.npz").step == 1


# ------------------------------------------------------------------------------------------------
# saving: atomic, refused up front when the path cannot be written
# ------------------------------------------------------------------------------------------------

def _model(**kw):
    return nt.TransformerModel(12, d_model=8, nhead=2, dim_feedforward=16, max_len=7, seed=0, **kw)


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError, MemoryError])
def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch, error):
    model = _model()
    path = tmp_path / "m.npz"
    save_checkpoint(path, model, nt.optim.Adam(model.parameters()))
    original = path.read_bytes()

    def dies_halfway(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise error("interrupted")
    monkeypatch.setattr(ckpt_mod.np, "savez", dies_halfway)
    model.head.bias.data[...] = 1
    with pytest.raises(error):
        save_checkpoint(path, model)
    assert path.read_bytes() == original
    assert os.listdir(tmp_path) == ["m.npz"], "a temporary file was left behind"
    assert np.array_equal(load_checkpoint(path).model_state["head.bias"], _model().head.bias.data)


def test_save_refuses_unwritable_paths_and_non_models(tmp_path, capsys):
    model = _model()
    with pytest.raises(FileNotFoundError, match=r"directory .*nowhere does not exist"):
        save_checkpoint(tmp_path / "nowhere" / "m.npz", model)
    with pytest.raises(IsADirectoryError, match=r"is a directory; give a file name"):
        save_checkpoint(tmp_path, model)
    (tmp_path / "afile").write_text("")
    with pytest.raises(NotADirectoryError, match=r"afile is a file, not a directory"):
        save_checkpoint(tmp_path / "afile" / "m.npz", model)
    (tmp_path / "afile").unlink()
    with pytest.raises(TypeError, match=r"save_checkpoint needs a TransformerModel .* got Linear"):
        save_checkpoint(tmp_path / "l.npz", nt.Linear(2, 2))
    with pytest.raises(TypeError, match=r"plain arrays .*extra/obj"):
        save_checkpoint(tmp_path / "o.npz", model, extra_arrays={"obj": np.array([{"a": 1}], dtype=object)})
    assert os.listdir(tmp_path) == []
    # the train command refuses such a path before it trains
    t0 = time.perf_counter()
    assert main(["train", "--save", str(tmp_path / "nowhere" / "run.npz"), "--steps", "100000"]) == 2
    assert "the directory" in capsys.readouterr().err and time.perf_counter() - t0 < 30


# ------------------------------------------------------------------------------------------------
# loading: validated before anything is touched, never unpickled
# ------------------------------------------------------------------------------------------------

class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))                       # would create the marker file when unpickled


def test_loading_never_unpickles(tmp_path):
    model = _model()
    path = tmp_path / "m.npz"
    save_checkpoint(path, model)
    arrays = dict(np.load(path))
    marker = tmp_path / "pwned"
    arrays["model/head.bias"] = np.array([_Payload(str(marker))], dtype=object)
    np.savez(tmp_path / "evil.npz", **arrays)                   # np.savez pickles object arrays
    with pytest.raises(CheckpointError, match=r"holds pickled Python objects; .* never unpickled"):
        load_checkpoint(tmp_path / "evil.npz")
    assert not marker.exists()
    arrays["__format__"] = np.array([_Payload(str(marker))], dtype=object)
    np.savez(tmp_path / "evil2.npz", **arrays)
    with pytest.raises(CheckpointError, match="pickled"):
        load_checkpoint(tmp_path / "evil2.npz")
    assert not marker.exists()


def _saved(tmp_path, **kw):
    model = _model(**kw)
    opt = nt.optim.Adam(model.parameters())
    for p in model.parameters():
        p.grad = np.ones_like(p.data)
    opt.step()
    path = tmp_path / "m.npz"
    save_checkpoint(path, model, opt)
    return path, dict(np.load(path))


@pytest.mark.parametrize("change,message", [
    (lambda a: a.pop("model/head.bias"), r"state_dict keys differ: missing \['head.bias'\], unexpected \[\]"),
    (lambda a: a.update({"model/extra.weight": np.zeros(3, np.float32)}), r"unexpected \['extra.weight'\]"),
    (lambda a: a.update({"model/head.weight": np.zeros((12, 9), np.float32)}),
     r"head.weight is float32\[12, 9\], the model has float32\[12, 8\]"),
    (lambda a: a.update({"model/head.weight": np.zeros((12, 8))}),
     r"head.weight is float64\[12, 8\], the model has float32\[12, 8\]"),
    (lambda a: a.update({"model/head.weight": np.zeros((12, 8), np.int32)}), r"head.weight is int32\[12, 8\]"),
    (lambda a: a.update({"model_config": np.array('{"vocab_size": 12, "d_model": 16}')}),
     r"another model configuration: .*d_model: checkpoint 16, model 8"),
])
def test_loading_validates_before_touching_the_model(tmp_path, change, message):
    path, arrays = _saved(tmp_path)
    change(arrays)
    np.savez(tmp_path / "bad.npz", **arrays)
    target = _model()
    target.head.bias.data[...] = 5
    before = {k: v.copy() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tmp_path / "bad.npz").load_model(target)
    assert all(np.array_equal(before[k], v) for k, v in target.state_dict().items()), "the model was touched"


def test_optimizer_state_is_validated_before_it_is_applied(tmp_path):
    path, arrays = _saved(tmp_path)
    model = _model()
    opt = nt.optim.Adam(model.parameters(), lr=0.5)
    key = next(k for k in arrays if k.startswith("optim/state/0/exp_avg"))
    for bad, message in [(arrays[key].astype(np.float64), r"optimizer state 'exp_avg\w*' of parameter 0 is float64"),
                         (arrays[key][:1], r"optimizer state 'exp_avg\w*' of parameter 0 is float32\[1")]:
        damaged = dict(arrays, **{key: bad})
        np.savez(tmp_path / "bad.npz", **damaged)
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(tmp_path / "bad.npz").load_optimizer(opt)
        assert opt.state == {} and opt.lr == 0.5
    damaged = dict(arrays, **{"optim/param_groups": np.array('[{"lr": "fast", "params": [0]}]')})
    np.savez(tmp_path / "bad.npz", **damaged)
    with pytest.raises(CheckpointError, match=r"optimizer state does not fit"):
        load_checkpoint(tmp_path / "bad.npz").load_optimizer(opt)
    assert opt.state == {} and opt.lr == 0.5
    with pytest.raises(CheckpointError, match="holds Adam state, not SGD"):
        load_checkpoint(path).load_optimizer(nt.optim.SGD(model.parameters(), lr=0.1))


def test_damaged_and_foreign_files_are_refused_with_a_reason(tmp_path):
    path, arrays = _saved(tmp_path)
    data = path.read_bytes()
    (tmp_path / "truncated.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cannot be read as an .npz archive"):
        load_checkpoint(tmp_path / "truncated.npz")
    # flip bytes inside a stored member: the zip's CRC check catches it when the array is read
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("model/head.weight.npy")
    offset = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    corrupt = bytearray(data)
    corrupt[offset:offset + 8] = b"\xff" * 8
    (tmp_path / "corrupt.npz").write_bytes(bytes(corrupt))
    with pytest.raises(CheckpointError, match=r"is damaged: BadZipFile"):
        load_checkpoint(tmp_path / "corrupt.npz")
    for name, change, message in [
        ("v2.npz", {"__version__": np.array(2)}, "format version 2; this code reads version 1"),
        ("noversion.npz", {"__version__": np.array("one")}, "no readable format version"),
        ("json.npz", {"model_config": np.array("{not json")}, "damaged configuration entries"),
        ("list.npz", {"config": np.array("[1, 2]")}, r"damaged configuration entries \(not JSON objects\)"),
        ("foreign.npz", {"__format__": np.array("something else")}, "not a numpy-transformer checkpoint"),
    ]:
        np.savez(tmp_path / name, **dict(arrays, **change))
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(tmp_path / name)
    np.save(tmp_path / "single.npy", np.ones(3))
    with pytest.raises(CheckpointError, match="holds a single array"):
        load_checkpoint(tmp_path / "single.npy")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.npz")
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_checkpoint(tmp_path)
    cfg = dict(arrays, model_config=np.array('{"vocab_size": 12, "d_model": 8, "nhead": 3}'))
    np.savez(tmp_path / "cfg.npz", **cfg)
    with pytest.raises(CheckpointError,
                       match=r"model_config .* does not fit TransformerModel: d_model must be divisible"):
        load_checkpoint(tmp_path / "cfg.npz").build_model()


def _rewrite(path, edit):
    """Rewrite checkpoint ``path`` with ``edit(arrays, extra_json, param_groups)`` applied."""
    import json
    arrays = dict(np.load(path))
    extra, groups = json.loads(str(arrays["extra_json"])), json.loads(str(arrays["optim/param_groups"]))
    edit(arrays, extra, groups)
    arrays["extra_json"], arrays["optim/param_groups"] = np.array(json.dumps(extra)), np.array(json.dumps(groups))
    np.savez(path, **arrays)


def test_scheduler_state_resumes_and_old_checkpoints_without_it_too(tmp_path, uninterrupted):
    """The checkpoint holds the LambdaLR's state_dict; a checkpoint written before the trainer had a
    scheduler (no scheduler entry; groups without initial_lr, holding the last step's lr) resumes to the
    same run; a scheduler state that disagrees with the step is refused."""
    full_losses, full_state = uninterrupted
    t = Trainer(TrainConfig(**TINY, steps=STEPS))
    t.train(steps=5)
    t.save(tmp_path / "new.npz")
    assert load_checkpoint(tmp_path / "new.npz").extra_json["scheduler"]["last_epoch"] == 5
    t.save(tmp_path / "old.npz")
    schedule = TrainConfig(**TINY).make_schedule()

    def make_old(arrays, extra, groups):
        del extra["scheduler"]
        for g in groups:
            for k in ("initial_lr", "amsgrad", "maximize", "foreach", "capturable", "differentiable", "fused",
                      "decoupled_weight_decay"):
                g.pop(k)
            g["lr"] = schedule(5)
    _rewrite(tmp_path / "old.npz", make_old)
    for name in ("new.npz", "old.npz"):
        resumed = Trainer.resume(tmp_path / name)
        losses = []
        resumed.train(callback=lambda r: losses.append(r.loss))
        assert losses == full_losses[5:], name
        _assert_same_state(_state(resumed), full_state)
    _rewrite(tmp_path / "new.npz", lambda a, extra, g: extra["scheduler"].update(last_epoch=3))
    with pytest.raises(CheckpointError, match="scheduler is at epoch 3, the training at step 5"):
        Trainer.resume(tmp_path / "new.npz")
    _rewrite(tmp_path / "new.npz", lambda a, extra, g: extra["scheduler"].update(T_max=3))
    with pytest.raises(CheckpointError, match=r"scheduler state does not fit: .*unknown entries \['T_max'\]"):
        Trainer.resume(tmp_path / "new.npz")
