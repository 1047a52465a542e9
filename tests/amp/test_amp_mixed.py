"""``nt.amp.MixedPrecision``: a float16 working copy of a float32 model; one mixed step equals the
float32 step within float16's precision, tiny gradients need the scaler, float16 is refused elsewhere
with a message naming the option."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import numpy_transformer.functional as F
from numpy_transformer.amp import Float32Norm, GradScaler, MixedPrecision

# float16's unit roundoff is 2**-11 = 4.9e-4. The logits carry a few dozen roundings: measured <= 2e-3
# of their largest value, held to 2e-2. A gradient carries the forward's and the backward's roundings:
# measured ~5e-3 of the largest gradient of the step, held to 2e-2 of it; and each tensor within 0.3
# of its own norm, which a lost, doubled or unscaled gradient is not. The models use GELU: a ReLU
# input that rounds across 0 switches a path on or off, and then a post-LN encoder's linear1 gradient
# differs by up to 6% of the top gradient (measured) -- float16 being float16, not a bug to test for.
F16_TOL = 2e-2
F16_GRAD_TOL = 2e-2


def _rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def _encoder(seed, **kw):
    cfg = dict(d_model=16, nhead=2, dim_feedforward=32, num_layers=2, dropout=0.0)
    cfg.update(kw)
    return nt.TransformerModel(11, seed=seed, **cfg)


MODELS = {
    "post-LN encoder, gelu": lambda seed: _encoder(seed, activation="gelu"),
    "pre-LN encoder, gelu": lambda seed: _encoder(seed, norm_first=True, activation="gelu"),
    "gpt (learned positions, gelu)": lambda seed: nt.GPT(nt.GPTConfig(11, block_size=8, n_layer=2, n_head=2,
                                                                       n_embd=16), seed=seed),
    "gpt llama block (rmsnorm, rope, swiglu, gqa)": lambda seed: nt.GPT(nt.GPTConfig(
        11, block_size=8, n_layer=1, n_head=4, n_embd=16, norm="rmsnorm", positions="rope", ffn="swiglu",
        num_kv_heads=2, bias=False), seed=seed),
}


def _step(model, forward, backward, ids, tgt, scaler=None):
    crit = nt.CrossEntropyLoss()
    opt = nt.optim.Adam(model.parameters(), lr=1e-3)
    logits = forward(ids)
    loss = crit(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    dlogits = crit.backward().reshape(logits.shape)
    backward(dlogits if scaler is None else scaler.scale(dlogits))
    if scaler is None:
        opt.step()
    else:
        scaler.step(opt)                                   # unscales the gradients in place first
        scaler.update()
    grads = {n: p.grad.copy() for n, p in model.named_parameters()}
    return logits, loss, grads, {n: p.data.copy() for n, p in model.named_parameters()}


@pytest.mark.parametrize("name", list(MODELS))
@given(seed=st.integers(0, 2 ** 16), b=st.integers(1, 3), s=st.integers(2, 8))
def test_mixed_step_matches_the_float32_step_within_float16_precision(name, seed, b, s):
    rng = np.random.default_rng(seed)
    ids, tgt = rng.integers(0, 11, (b, s)), rng.integers(0, 11, (b, s))
    ref = MODELS[name](seed)
    mixed = MODELS[name](seed)
    mp = MixedPrecision(mixed)
    l32, loss32, g32, p32 = _step(ref, ref, ref.backward, ids, tgt)
    scaler = GradScaler(init_scale=2.0 ** 10)     # 2**16 overflows these few-token batches' gradients
    l16, loss16, g16, p16 = _step(mixed, mp, mp.backward, ids, tgt, scaler)
    assert l16.dtype == np.float32 and scaler.get_scale() == 2.0 ** 10   # a clean step: no backoff
    assert _rel(l16, l32) < F16_TOL and abs(loss16 - loss32) < F16_TOL * abs(loss32)
    top = max(np.abs(g).max() for g in g32.values())
    for n in g32:
        assert g16[n].dtype == np.float32
        err = np.abs(g16[n] - g32[n]).max()
        assert err <= F16_GRAD_TOL * top, (n, err, top)
        assert np.linalg.norm(g16[n] - g32[n]) <= 0.3 * np.linalg.norm(g32[n]) + 1e-3 * top, n
        # Adam's first step moves each weight by ~lr in the gradient's sign: same move within tolerance
        assert np.abs(p16[n] - p32[n]).max() <= 2e-3 + 1e-6, n
        assert p16[n].dtype == np.float32


def test_norms_stay_float32_and_are_the_masters():
    model = _encoder(0, norm_first=True)
    mp = MixedPrecision(model)
    norms = [m for m in mp.half.modules() if isinstance(m, Float32Norm)]
    assert len(norms) == 5                                 # 2 per layer and the final norm
    master_norms = [m for m in model.modules() if isinstance(m, nt.LayerNorm)]
    assert {id(n.norm) for n in norms} == {id(m) for m in master_norms}
    assert {p.dtype for p in mp.half.parameters()} == {np.dtype(np.float16), np.dtype(np.float32)}
    half_norms = MixedPrecision(model, norm_dtype=np.float16).half
    assert not any(isinstance(m, Float32Norm) for m in half_norms.modules())
    assert {p.dtype for p in half_norms.parameters()} == {np.dtype(np.float16)}


def test_tiny_gradients_flush_to_zero_without_the_scaler_and_survive_with_it():
    model = _encoder(0)
    mp = MixedPrecision(model)
    ids = np.random.default_rng(0).integers(0, 11, (2, 5))
    logits = model(ids)
    dlogits = np.random.default_rng(1).standard_normal(logits.shape).astype(np.float32) * np.float32(1e-8)
    model.backward(dlogits)
    g32 = model.head.weight.grad.copy()
    model.zero_grad()
    mp(ids)
    mp.backward(dlogits)                                   # 1e-8 is below float16's smallest subnormal 6e-8
    assert not np.any(model.head.weight.grad)
    model.zero_grad()
    opt = nt.optim.SGD(model.parameters(), lr=0.0)
    scaler = GradScaler()
    mp(ids)
    mp.backward(scaler.scale(dlogits))
    scaler.unscale_(opt)
    assert _rel(model.head.weight.grad, g32) < F16_TOL


def test_overflowing_scale_skips_the_step_and_backs_off():
    model = _encoder(0)
    mp = MixedPrecision(model)
    opt = nt.optim.Adam(model.parameters(), lr=1e-3)
    scaler = GradScaler(init_scale=2.0 ** 40)                # 2**40 times the gradient overflows float16
    ids = np.random.default_rng(0).integers(0, 11, (2, 5))
    before = {n: p.data.copy() for n, p in model.named_parameters()}
    logits = mp(ids)
    mp.backward(scaler.scale(np.full(logits.shape, 1e-2, np.float32)))
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 39
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(p.data, before[n])


def test_softmax_of_float16_runs_in_float32():
    x = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float16) * np.float16(8)
    y, cache = F.softmax_forward(x)
    y32, c32 = F.softmax_forward(x.astype(np.float32))
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, y32.astype(np.float16))
    dy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float16)
    dx = F.softmax_backward(dy, cache)
    assert dx.dtype == np.float16
    assert _rel(dx.astype(np.float32), F.softmax_backward(dy.astype(np.float32), c32)) < 2e-3


FLOAT16_OPTION = "numpy_transformer.amp.MixedPrecision"


@pytest.mark.parametrize("call, exc, match", [
    (lambda: nt.Linear(3, 4, dtype=np.float16), TypeError, "dtype=float16 is not supported.*" + FLOAT16_OPTION),
    (lambda: nt.LayerNorm(4)(np.ones((2, 4), np.float16)), TypeError, "float16, which is not supported.*"
     + FLOAT16_OPTION),
    (lambda: nt.CrossEntropyLoss()(np.ones((2, 3), np.float16), np.zeros(2, int)), TypeError,
     "float16 is not supported.*" + FLOAT16_OPTION),
    (lambda: nt.optim.SGD([nt.Parameter(np.ones(2, np.float16))], lr=1.0), TypeError,
     "float16.*" + FLOAT16_OPTION),
    (lambda: MixedPrecision(_encoder(0, dtype=np.float64)), TypeError, "model must have float32 parameters"),
    (lambda: MixedPrecision(_encoder(0), norm_dtype=np.float64), TypeError, "norm_dtype must be"),
    (lambda: MixedPrecision("model"), TypeError, "model must be an nt Module"),
    (lambda: MixedPrecision(nt.LayerNorm(4)), TypeError, "model is itself a norm"),
])
def test_float16_refusals_name_the_option(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_float16_is_refused_again_after_a_mixed_pass_even_one_that_raised():
    mp = MixedPrecision(_encoder(0))
    with pytest.raises(IndexError):
        mp(np.full((1, 3), 99))                            # an id out of range, raised inside the float16 copy
    mp(np.zeros((1, 3), int))
    with pytest.raises(TypeError, match=FLOAT16_OPTION):
        nt.Linear(3, 4, dtype=np.float16)


def test_unscaling_float16_gradients_is_refused():
    p = nt.Parameter(np.ones(2, np.float32))
    opt = nt.optim.SGD([p], lr=1.0)
    scaler = GradScaler()
    p.grad = scaler.scale(np.ones(2, np.float16))
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.unscale_(opt)
