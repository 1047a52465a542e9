"""float32 stays float32 through every intermediate of a traced run; float16 is refused everywhere with
a message that says so (NumPy would otherwise upcast silently, or lose the precision softmax and
LayerNorm need)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import numpy_transformer as nt
import numpy_transformer.functional as F
from numpy_transformer.nn.activations import ACTIVATION_NAMES
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from numpy_transformer.training.trainer import TrainConfig, Trainer


def _walk(obj, path, found):
    """Every floating array or NumPy float scalar inside ``obj`` (tuples, NamedTuple caches, dicts)."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f":
            found.append((path, obj.dtype))
    elif isinstance(obj, np.floating):
        found.append((path, obj.dtype))
    elif isinstance(obj, tuple):
        names = getattr(obj, "_fields", None) or range(len(obj))
        for name, item in zip(names, obj):
            _walk(item, f"{path}.{name}", found)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            _walk(item, f"{path}[{key!r}]", found)


@pytest.fixture
def functional_spy(monkeypatch):
    """Wrap every functional op (forward, backward, mask helpers): calls made by the modules *and*
    by functional ops calling each other go through the module's globals, so all are seen."""
    seen = []
    # The ops live in the submodules of the functional package and call each other through those
    # submodules' globals: patch each name everywhere it is bound (the package and every submodule).
    roots = (F.__name__, "numpy_transformer.kernels")
    spaces = [F] + [m for name, m in sorted(sys.modules.items())
                    if name.startswith(tuple(r + "." for r in roots)) and m is not None]
    wrappers = {}
    for space in spaces:
        for name in dir(space):
            fn = getattr(space, name)
            if callable(fn) and not isinstance(fn, type) and (getattr(fn, "__module__", None) or "").startswith(roots) \
                    and name.endswith(("_forward", "_backward", "_mask", "_masks", "additive_mask", "_rows", "_chunk")):
                if id(fn) not in wrappers:
                    def wrapped(*args, __fn=fn, __name=name, **kwargs):
                        result = __fn(*args, **kwargs)
                        _walk(result, __name, seen)
                        for i, a in enumerate(args):           # in-place helpers write into their arguments
                            _walk(a, f"{__name}(arg {i})", seen)
                        return result
                    wrappers[id(fn)] = wrapped
                monkeypatch.setattr(space, name, wrappers[id(fn)])
    return seen


def _assert_all_float32(found, what):
    assert found, f"{what}: nothing was recorded"
    bad = sorted({f"{path}: {dt}" for path, dt in found if dt != np.float32})
    assert not bad, f"{what}: float32 run produced non-float32 values:\n  " + "\n  ".join(bad[:20])


def _model(activation, norm_first, pos, attention):
    m = nt.TransformerModel(17, d_model=16, nhead=4, num_layers=2, dim_feedforward=32, dropout=0.1, max_len=7,
                            activation=activation, norm_first=norm_first, pos_encoding=pos, dtype=np.float32, seed=0)
    for layer in m.encoder.layers:
        layer.self_attn.attention = attention
        layer.self_attn.block_size = 3
    return m


@pytest.mark.parametrize("activation,norm_first,pos,attention", [
    ("relu", False, "sinusoidal", "standard"),
    ("gelu", True, "learned", "standard"),
    ("gelu", False, "sinusoidal", "tiled"),
    ("relu", True, "learned", "tiled"),
    ("silu", False, "learned", "standard"),
])
def test_float32_model_never_upcasts(functional_spy, activation, norm_first, pos, attention):
    m = _model(activation, norm_first, pos, attention)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 17, (3, 7))
    pad = np.zeros((3, 7), bool)
    pad[1, 5:] = True
    crit = nt.CrossEntropyLoss(label_smoothing=0.1)
    opt = nt.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
    with nt.trace(m) as t:
        logits = m(ids, src_key_padding_mask=pad, is_causal=True)
        loss = crit(logits.reshape(-1, 17), ids.reshape(-1))              # torch's (N, C) rows
        m.backward(crit.backward().reshape(logits.shape))
    norm = nt.clip_grad_norm_(m.parameters(), 0.5)
    opt.step()
    found = list(functional_spy)
    found += [(f"trace {r.name} ({r.phase})", np.dtype(r.dtype)) for r in t.records]
    found += [("logits", logits.dtype), ("loss", loss.dtype), ("clip norm", norm.dtype)]
    found += [(f"{n}.grad", p.grad.dtype) for n, p in m.named_parameters()]
    found += [(f"{n} after the step", p.data.dtype) for n, p in m.named_parameters()]
    found += [(f"optimizer state {i}.{k}", v.dtype) for i, s in opt.state_dict()["state"].items()
              for k, v in s.items() if isinstance(v, np.ndarray)]
    _assert_all_float32(found, f"TransformerModel({activation}, norm_first={norm_first}, {pos}, {attention})")
    assert len([r for r in t.records if r.phase == "backward"]) > 10


@pytest.mark.parametrize("activation", ACTIVATION_NAMES)
@pytest.mark.parametrize("attention", ["standard", "tiled"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_float32_encoder_layer_never_upcasts(functional_spy, activation, attention, norm_first):
    layer = nt.TransformerEncoderLayer(12, 3, 24, dropout=0.2, activation=activation, norm_first=norm_first,
                                       attention=attention, block_size=2, dtype=np.float32, seed=1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 12)).astype(np.float32)
    float_mask = np.where(F.causal_mask(5), -np.inf, 0.0).astype(np.float32)
    with nt.trace(layer) as t:
        y = layer(x, src_mask=float_mask, src_key_padding_mask=np.array([[0, 0, 0, 1, 1], [0] * 5], bool))
        dx = layer.backward(rng.standard_normal(y.shape).astype(np.float32))
    found = list(functional_spy) + [(f"trace {r.name}", np.dtype(r.dtype)) for r in t.records]
    found += [("y", y.dtype), ("dx", dx.dtype)] + [(n, p.grad.dtype) for n, p in layer.named_parameters()]
    _assert_all_float32(found, f"TransformerEncoderLayer({activation}, {attention}, norm_first={norm_first})")


@pytest.mark.parametrize("bias", [False, True])
def test_float32_swiglu_never_upcasts(functional_spy, bias):
    m = nt.SwiGLU(6, 10, bias=bias, dtype=np.float32, seed=3)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 4, 6)) * 40).astype(np.float32)           # the sigmoid's far tails too
    with nt.trace(m) as t:
        y = m(x)
        dx = m.backward(rng.standard_normal(y.shape).astype(np.float32))
    found = list(functional_spy) + [(f"trace {r.name}", np.dtype(r.dtype)) for r in t.records]
    found += [("y", y.dtype), ("dx", dx.dtype)] + [(n, p.grad.dtype) for n, p in m.named_parameters()]
    _assert_all_float32(found, f"SwiGLU(bias={bias})")
    assert {r.name for r in t.records} >= {"gate_proj", "up_proj", "down_proj", "act_fn"}


def test_float32_cross_attention_with_separate_projections_never_upcasts(functional_spy):
    mha = nt.MultiheadAttention(8, 2, kdim=5, vdim=3, dropout=0.1, dtype=np.float32, seed=2)
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, 6, 5)).astype(np.float32)
    v = rng.standard_normal((2, 6, 3)).astype(np.float32)
    out, w = mha(q, k, v, attn_mask=rng.random((4, 6)) < 0.3)
    grads = mha.backward(rng.standard_normal(out.shape).astype(np.float32))
    found = list(functional_spy) + [("out", out.dtype), ("weights", w.dtype)]
    found += [(f"d{n}", g.dtype) for n, g in zip("qkv", grads)] + [(n, p.grad.dtype) for n, p in mha.named_parameters()]
    _assert_all_float32(found, "MultiheadAttention(kdim, vdim)")


@pytest.mark.parametrize("normalized_shape,affine,eps", [(6, True, None), ((5, 6), True, 1e-5), ((5, 6), False, None)])
def test_float32_rms_norm_never_upcasts(functional_spy, normalized_shape, affine, eps):
    m = nt.RMSNorm(normalized_shape, eps=eps, elementwise_affine=affine, dtype=np.float32)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    y = m(x)
    dx = m.backward(rng.standard_normal(y.shape).astype(np.float32))
    found = list(functional_spy) + [("y", y.dtype), ("dx", dx.dtype)]
    found += [(n, p.grad.dtype) for n, p in m.named_parameters()]
    _assert_all_float32(found, f"RMSNorm({normalized_shape}, elementwise_affine={affine}, eps={eps})")


def test_float32_training_steps_never_upcast(functional_spy):
    t = Trainer(TrainConfig(task="copy", vocab_size=9, seq_len=5, num_train=64, num_val=16, d_model=8, nhead=2,
                            num_layers=1, dim_feedforward=16, batch_size=4, steps=3, dtype="float32",
                            optimizer="adam", label_smoothing=0.1))
    t.train()
    found = list(functional_spy) + [(n, p.data.dtype) for n, p in t.model.named_parameters()]
    found += [(f"state {i}.{k}", v.dtype) for i, s in t.optimizer.state_dict()["state"].items() for k, v in s.items()
              if isinstance(v, np.ndarray)]
    _assert_all_float32(found, "Trainer float32")


# ------------------------------------------------------------------------------------------------
# float16: refused, with a message that names it
# ------------------------------------------------------------------------------------------------

H = np.float16


@pytest.mark.parametrize("build", [
    lambda: nt.Linear(4, 3, dtype=H),
    lambda: nt.Embedding(5, 4, dtype=H),
    lambda: nt.LayerNorm(4, dtype=H),
    lambda: nt.RMSNorm(4, dtype=H),
    lambda: nt.MultiheadAttention(4, 2, dtype=H),
    lambda: nt.TransformerEncoderLayer(4, 2, 8, dtype=H),
    lambda: nt.TokenEmbedding(5, 4, dtype=H),
    lambda: nt.PositionalEncoding(4, dtype=H),
    lambda: nt.TransformerModel(5, d_model=4, nhead=2, dim_feedforward=8, dtype=H),
    lambda: nt.TransformerModel(5, d_model=4, nhead=2, dim_feedforward=8, dtype="float16"),
])
def test_float16_modules_are_refused(build):
    with pytest.raises(TypeError, match=r"dtype=float16 is not supported.*use np.float32 or np.float64"):
        build()


@pytest.mark.parametrize("call", [
    lambda x: nt.Linear(4, 3)(x),
    lambda x: nt.LayerNorm(4)(x),
    lambda x: nt.RMSNorm(4)(x),
    lambda x: nt.RMSNorm((3, 4), elementwise_affine=False)(x),
    lambda x: nt.ReLU()(x),
    lambda x: nt.GELU()(x),
    lambda x: nt.Dropout(0.1)(x),
    lambda x: nt.PositionalEncoding(4)(x),
    lambda x: nt.MultiheadAttention(4, 2)(x, x, x),
    lambda x: nt.TransformerEncoderLayer(4, 2, 8)(x),
    lambda x: nt.TransformerEncoder(nt.TransformerEncoderLayer(4, 2, 8), 1)(x),
])
def test_float16_inputs_are_refused(call):
    x = np.ones((2, 3, 4), dtype=H)
    with pytest.raises(TypeError, match=r"float16, which is not supported; convert it with .*astype\(np.float32\)"):
        call(x)


def test_float16_elsewhere_is_refused(tmp_path):
    with pytest.raises(TypeError,
                       match=r"input must be float32 or float64 logits, got dtype float16 \(float16 is not supported"):
        nt.CrossEntropyLoss()(np.zeros((2, 3), H), np.zeros(2, int))
    with pytest.raises(TypeError, match=r"key_padding_mask must be a bool array .* got dtype float16"):
        x = np.ones((2, 3, 4), np.float32)
        nt.MultiheadAttention(4, 2)(x, x, x, key_padding_mask=np.zeros((2, 3), H))
    with pytest.raises(TypeError, match=r"dout must have dtype float32 like the forward output, got float16"):
        lin = nt.Linear(4, 3)
        lin(np.ones((2, 4), np.float32))
        lin.backward(np.ones((2, 3), H))
    with pytest.raises(TypeError, match=r"optimizer params must be float32 or float64 arrays, got .* float16"):
        nt.optim.SGD([nt.Parameter(np.zeros(3, H))], lr=0.1)
    with pytest.raises(ValueError, match=r"dtype must be 'float32' or 'float64', got 'float16'"):
        TrainConfig(dtype="float16")
    # a checkpoint holding float16 weights is refused before the model is touched
    m = nt.TransformerModel(5, d_model=4, nhead=2, dim_feedforward=8, max_len=3, seed=0)
    path = tmp_path / "m.npz"
    save_checkpoint(path, m)
    arrays = dict(np.load(path))
    arrays["model/head.weight"] = arrays["model/head.weight"].astype(H)
    np.savez(tmp_path / "half.npz", **arrays)
    with pytest.raises(CheckpointError, match=r"head.weight is float16\[5, 4\], the model has float32\[5, 4\]"):
        load_checkpoint(tmp_path / "half.npz").load_model(m)
