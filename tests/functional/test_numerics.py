"""Numerical robustness, each case against torch where torch defines the answer.

* softmax, log-softmax and cross-entropy with logits of magnitude 1e4 .. the dtype's max, with -inf
  entries, in float32 and float64;
* LayerNorm on constant rows and with a tiny eps;
* GELU (exact and tanh) at large |x|;
* attention rows whose keys are all masked: zero output and zero gradient (torch's
  ``scaled_dot_product_attention``), never NaN in other rows or in parameter gradients;
* NaN/inf inputs propagate like torch's, and ``nt.trace`` names the layer where they first appear.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import numpy_transformer.functional as F
from numpy_transformer.nn.loss import log_softmax

torch = pytest.importorskip("torch")
TF = torch.nn.functional
torch.set_num_threads(1)

DTYPES = [np.float32, np.float64]
TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
EPS = {np.dtype(np.float32): float(np.finfo(np.float32).eps), np.dtype(np.float64): float(np.finfo(np.float64).eps)}
seeds = st.integers(0, 2**31 - 1)


def t64(a):
    """The float64 torch tensor of ``a``: the exact reference for a float32 computation."""
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


# ------------------------------------------------------------------------------------------------
# softmax, log-softmax, cross-entropy at huge magnitudes and with -inf
# ------------------------------------------------------------------------------------------------

def huge_logits(rng, dtype, n, v, magnitude, neginf):
    """(n, v) logits spread over +-magnitude (the dtype's max included), some entries -inf, never a whole row."""
    z = (rng.uniform(-1, 1, (n, v)) * magnitude).astype(dtype)
    z[0, 0] = np.finfo(dtype).max if magnitude >= np.finfo(dtype).max / 2 else magnitude
    if neginf and v > 1:
        drop = rng.random((n, v)) < 0.3
        drop[np.arange(n), rng.integers(0, v, n)] = False             # every row keeps one finite logit
        z[drop] = -np.inf
    return z


magnitudes = st.sampled_from([1e4, 1e6, 1e15, 1e30, 1e38, np.inf])    # inf: the dtype's max


@pytest.mark.parametrize("dtype", DTYPES)
@given(n=st.integers(1, 6), v=st.integers(1, 9), magnitude=magnitudes, neginf=st.booleans(), seed=seeds)
def test_softmax_and_log_softmax_exact_at_huge_magnitudes(dtype, n, v, magnitude, neginf, seed):
    dtype = np.dtype(dtype)
    magnitude = min(magnitude, float(np.finfo(dtype).max))
    z = huge_logits(np.random.default_rng(seed), dtype, n, v, magnitude, neginf)
    with np.errstate(over="ignore"):               # z - max may overflow to -inf: exp gives the right 0
        p, cache = F.softmax_forward(z.copy())
        logp = log_softmax(z)
    assert p.dtype == dtype and logp.dtype == dtype
    # exact (float64) references rounded to the dtype: a log-probability beyond the dtype's range is -inf
    with np.errstate(over="ignore"):
        ref_p = torch.softmax(t64(z), -1).numpy().astype(dtype)
        ref_logp = torch.log_softmax(t64(z), -1).numpy().astype(dtype)
    assert np.isfinite(p).all() and not np.isnan(logp).any()
    np.testing.assert_allclose(p, ref_p, rtol=0, atol=8 * EPS[dtype])
    np.testing.assert_array_equal(np.isneginf(logp), np.isneginf(ref_logp))
    fin = np.isfinite(ref_logp)
    np.testing.assert_allclose(logp[fin], ref_logp[fin], rtol=4 * EPS[dtype], atol=8 * EPS[dtype])
    # the backward stays finite too (masked entries get exactly 0)
    g = np.random.default_rng(seed + 1).standard_normal(z.shape).astype(dtype)
    dz = F.softmax_backward(g, cache)
    assert np.isfinite(dz).all() and np.all(dz[np.isneginf(z)] == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@given(n=st.integers(1, 6), v=st.integers(2, 9), magnitude=magnitudes, neginf=st.booleans(),
       smoothing=st.sampled_from([0.0, 0.1]), reduction=st.sampled_from(["mean", "sum", "none"]), seed=seeds)
def test_cross_entropy_exact_at_huge_magnitudes(dtype, n, v, magnitude, neginf, smoothing, reduction, seed):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    # up to max/1e3: a loss summed over rows (or over classes, with smoothing) then stays in range, so
    # "exact" has one meaning (near the max, the sum itself overflows, in torch as here)
    magnitude = min(magnitude, float(np.finfo(dtype).max) / 1e3)
    z = huge_logits(rng, dtype, n, v, magnitude, neginf)
    # targets on finite logits (a target whose logit is -inf costs inf, on both sides, see below)
    targets = np.array([rng.choice(np.flatnonzero(np.isfinite(row))) for row in z])
    crit = nt.CrossEntropyLoss(reduction=reduction, label_smoothing=smoothing)
    with np.errstate(over="ignore"):
        loss = crit(z, targets)
        grad = crit.backward(None if reduction != "none" else np.ones(n, dtype))
    assert loss.dtype == dtype and grad.dtype == dtype
    zt = t64(z).requires_grad_(True)
    ref = TF.cross_entropy(zt, torch.from_numpy(targets), reduction=reduction, label_smoothing=smoothing)
    ref.backward(torch.ones_like(ref))
    with np.errstate(over="ignore"):       # rounded to the dtype: a loss beyond its range is inf
        ref_loss, ref_grad = ref.detach().numpy().astype(dtype), zt.grad.numpy().astype(dtype)
    np.testing.assert_array_equal(np.isinf(loss), np.isinf(ref_loss))     # smoothing over a -inf logit: inf
    fin = np.isfinite(ref_loss)
    np.testing.assert_allclose(np.asarray(loss)[fin] if np.ndim(loss) else (loss if fin else 0),
                               ref_loss[fin] if np.ndim(ref_loss) else (ref_loss if fin else 0),
                               rtol=16 * EPS[dtype], atol=16 * EPS[dtype])
    assert np.isfinite(grad).all()
    np.testing.assert_allclose(grad, ref_grad, rtol=0, atol=16 * EPS[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_on_a_neginf_target_is_inf_like_torch(dtype):
    z = np.array([[0.0, -np.inf, 1.0], [2.0, 1.0, -np.inf]], dtype=dtype)
    t = np.array([1, 0])
    crit = nt.CrossEntropyLoss(reduction="none")
    loss, grad = crit(z, t), crit.backward()
    zt = torch.tensor(z, requires_grad=True)
    ref = TF.cross_entropy(zt, torch.from_numpy(t), reduction="none")
    ref.backward(torch.ones_like(ref))
    np.testing.assert_array_equal(loss, ref.detach().numpy())               # [inf, finite]
    np.testing.assert_allclose(grad, zt.grad.numpy(), atol=4 * EPS[np.dtype(dtype)])


# ------------------------------------------------------------------------------------------------
# LayerNorm
# ------------------------------------------------------------------------------------------------

def _layer_norm_vs_torch(x, w, b, eps, g, exact=False):
    """Ours and torch's (y, dx, dw, db); ``exact``: torch in float64 on the same values."""
    y, cache = F.layer_norm_forward(x, w, b, eps)
    dx, dw, db = F.layer_norm_backward(g, cache)
    conv = (lambda a: torch.from_numpy(a.astype(np.float64))) if exact else (lambda a: torch.from_numpy(a.copy()))
    xt, wt, bt = (conv(a).requires_grad_(True) for a in (x, w, b))
    yt = TF.layer_norm(xt, (x.shape[-1],), wt, bt, eps)
    yt.backward(conv(g))
    return (y, dx, dw, db), (yt.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("eps", [1e-5, 1e-12])
def test_layer_norm_constant_rows_exact(dtype, eps):
    """A constant row has xhat = 0 exactly (the forward centres twice), so y = bias as torch gives.

    The gradients are then known exactly: dw = sum(dout * xhat) = 0, db = sum(dout), and
    dx = (dxhat - mean(dxhat)) / sqrt(eps) with dxhat = dout * w. Torch is not the oracle for dw and dx
    here: its variance of a constant row carries rounding noise that 1/sqrt(eps) amplifies (float32,
    eps=1e-12: its dw is 0.12 where the exact value is 0, its dx off by 1000x), so ours is compared with
    the exact values and torch only where it is exact (y, db).
    """
    rng = np.random.default_rng(0)
    d = 7
    x = np.stack([np.full(d, c) for c in (0.1, 1 / 3, -3.3, 1e4, 0.0, 2.5e-3)]).astype(dtype)   # (6, D) constant
    w = rng.uniform(0.5, 1.5, d).astype(dtype)
    b = rng.standard_normal(d).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    (y, dx, dw, db), (yt, _, _, dbt) = _layer_norm_vs_torch(x, w, b, eps, g)
    np.testing.assert_array_equal(y, np.broadcast_to(b, x.shape))               # xhat = 0: output = bias
    np.testing.assert_array_equal(yt, np.broadcast_to(b, x.shape))
    assert np.all(dw == 0), "dw must be exactly 0 on constant rows (xhat = 0)"
    dxhat = g.astype(np.float64) * w.astype(np.float64)
    exact_dx = (dxhat - dxhat.mean(axis=-1, keepdims=True)) / np.sqrt(np.float64(eps))
    assert_close({"dx": (dx, exact_dx), "db": (db, dbt)}, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_constant_rows_stay_finite(dtype):
    """What holds already: no NaN/inf on constant rows, even with eps = 1e-30 (1/sqrt(eps) = 1e15)."""
    for eps in (1e-5, 1e-12, 1e-30):
        x = np.full((3, 5), 0.1, dtype=dtype)
        ln = nt.LayerNorm(5, eps=eps, dtype=dtype)
        y = ln(x)
        dx = ln.backward(np.random.default_rng(0).standard_normal(x.shape).astype(dtype))
        assert np.isfinite(y).all() and np.isfinite(dx).all()
        assert np.isfinite(ln.weight.grad).all() and np.isfinite(ln.bias.grad).all()


@pytest.mark.parametrize("dtype", DTYPES)
@given(n=st.integers(1, 5), d=st.integers(3, 16), log_scale=st.integers(-3, 4),
       log_eps=st.sampled_from([-12, -20, -30]), seed=seeds)
def test_layer_norm_tiny_eps_matches_torch(dtype, n, d, log_scale, log_eps, seed):
    rng = np.random.default_rng(seed)
    x = ((rng.standard_normal((n, d)) + rng.standard_normal((n, 1))) * 10.0 ** log_scale).astype(dtype)
    w = rng.uniform(0.5, 1.5, d).astype(dtype)
    b = rng.standard_normal(d).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    eps = 10.0 ** log_eps
    ours, ref = _layer_norm_vs_torch(x, w, b, eps, g, exact=True)
    assert all(np.isfinite(a).all() for a in ours)
    # Each result against the exact (float64) one, relative to the size of the terms that form it:
    # dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) cancels, so its scale is rstd max|dxhat|.
    rstd = 1 / np.sqrt(x.astype(np.float64).var(axis=-1) + eps)
    scales = {"y": np.abs(ref[0]).max(), "dx": (rstd[:, None] * np.abs(g * w)).max(),
              "dw": np.abs(g).sum(axis=0).max(), "db": np.abs(g).sum(axis=0).max()}
    k = 64 if dtype == np.float32 else 1e5                       # float64: the suite's 1e-10 level
    for name, a, r in zip(("y", "dx", "dw", "db"), ours, ref):
        err = np.abs(a.astype(np.float64) - r).max()
        assert err <= k * EPS[np.dtype(dtype)] * scales[name], f"{name}: error {err:.3e}, scale {scales[name]:.3e}"


# ------------------------------------------------------------------------------------------------
# GELU at large |x|
# ------------------------------------------------------------------------------------------------

def _gelu(x, approximate):
    with np.errstate(over="ignore", invalid="ignore"):
        y, cache = F.gelu_forward(x, approximate)
        return y, F.gelu_backward(np.ones_like(x), cache)


def _exact_gelu_reference(x, dtype):
    """x Phi(x) and Phi(x) + x phi(x) from Python's correctly rounded-ish math.erfc, in float64, rounded
    to ``dtype``. (torch's exact GELU flushes x Phi(x) to -0 below x ~ -5.6 in float32 and ~ -8.3 in
    float64, where the true value is still a normal number, so it is not the reference there.)"""
    import math
    y = [xi * 0.5 * math.erfc(-xi / math.sqrt(2)) for xi in x.astype(np.float64)]
    d = [0.5 * math.erfc(-xi / math.sqrt(2)) + xi * math.exp(-xi * xi / 2) / math.sqrt(2 * math.pi)
         for xi in x.astype(np.float64)]
    return np.array(y).astype(dtype), np.array(d).astype(dtype)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_large_inputs_match_torch(dtype, approximate):
    big = np.array([10.0, 30.0, 1e2, 1e4, 1e6, 1e10], dtype=dtype)
    x = np.concatenate([big, -big, [0.0]]).astype(dtype)
    y, dx = _gelu(x, approximate)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    yt = TF.gelu(xt, approximate=approximate)
    yt.backward(torch.ones_like(yt))
    if approximate == "none":
        ref_y, ref_dx = _exact_gelu_reference(x, dtype)
        torch_defined = x >= -5                                  # where torch's erf has not flushed to 0
        np.testing.assert_allclose(y[torch_defined], yt.detach().numpy()[torch_defined], rtol=4 * EPS[np.dtype(dtype)])
    else:
        ref_y, ref_dx = yt.detach().numpy(), xt.grad.numpy()
    assert np.isfinite(y).all() and np.isfinite(dx).all()
    tiny = float(np.finfo(dtype).smallest_subnormal)
    # (the float64 reference of the negative tail, -1e-23 at x = -10, is itself only good to ~1e-13:
    # erfc(-x/sqrt(2)) is that sensitive to the rounding of its argument)
    rtol = np.where(x < 0, max(16 * EPS[np.dtype(dtype)], 1e-12), 16 * EPS[np.dtype(dtype)])
    assert np.all(np.abs(y - ref_y) <= rtol * np.abs(ref_y) + tiny), (y, ref_y)
    assert np.all(np.abs(dx - ref_dx) <= rtol * np.abs(ref_dx) + tiny), (dx, ref_dx)
    # the limits: gelu(x) -> x, gelu'(x) -> 1 for x -> +inf; -> 0 and 0 for x -> -inf
    np.testing.assert_array_equal(y[2:6], x[2:6])
    np.testing.assert_array_equal(dx[2:6], 1.0)
    np.testing.assert_array_equal(y[8:12], 0.0)
    np.testing.assert_array_equal(dx[8:12], 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_gelu_limits_up_to_the_largest_float(dtype):
    """Up to the dtype's max, exact GELU is x (slope 1) above and 0 (slope 0) below; torch overflows to
    inf at the float32 max, so the limits themselves are the reference here."""
    fmax = float(np.finfo(dtype).max)
    big = np.array([1e15, 1e30, fmax / 2, fmax], dtype=dtype)
    y, dx = _gelu(np.concatenate([big, -big]).astype(dtype), "none")
    np.testing.assert_array_equal(y[:4], big)
    np.testing.assert_array_equal(dx[:4], 1.0)
    np.testing.assert_array_equal(y[4:], 0.0)
    np.testing.assert_array_equal(dx[4:], 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tanh_gelu_limits_up_to_the_largest_float(dtype):
    fmax = float(np.finfo(dtype).max)
    big = np.array([1e20, 1e30, fmax / 2, fmax] + ([1e200] if dtype == np.float64 else []), dtype=dtype)
    y, dx = _gelu(np.concatenate([big, -big]).astype(dtype), "tanh")
    k = len(big)
    np.testing.assert_array_equal(y[:k], big)
    np.testing.assert_array_equal(dx[:k], 1.0)
    np.testing.assert_array_equal(y[k:], 0.0)
    np.testing.assert_array_equal(dx[k:], 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_huge_finite_inputs_raise_no_warnings(dtype):
    fmax = np.finfo(dtype).max
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.softmax_forward(np.array([[fmax, -fmax, 0.0]], dtype=dtype))
        nt.CrossEntropyLoss()(np.array([[fmax, -fmax, 0.0]], dtype=dtype), np.array([0]))
        _, cache = F.gelu_forward(np.array([fmax, -fmax, 1e30, -1e30], dtype=dtype))
        F.gelu_backward(np.ones(4, dtype), cache)


# ------------------------------------------------------------------------------------------------
# attention rows with every key masked
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["standard", "tiled"])
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_fully_masked_rows_zero_output_and_gradient_like_torch_sdpa(dtype, path, mask_kind):
    """The documented behaviour: a query row whose keys are all masked outputs zeros and gets zero
    gradient (torch.nn.functional.scaled_dot_product_attention gives exactly that, not NaN, in 2.13)."""
    rng = np.random.default_rng(1)
    b, h, s, t, dh = 2, 2, 5, 6, 4
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in ((b, h, s, dh), (b, h, t, dh), (b, h, t, dh)))
    masked = rng.random((b, h, s, t)) < 0.3
    masked[0, 0, 1] = True                                      # one row with every key masked
    masked[1, :, 4] = True                                      # and the last query of batch 1, every head
    # torch's function convention: a bool mask is True where the query takes part
    mask = ~masked if mask_kind == "bool" else np.where(masked, -np.inf, 0.0).astype(dtype)
    g = rng.standard_normal((b, h, s, dh)).astype(dtype)
    if path == "standard":
        out, cache = F.scaled_dot_product_attention_forward(q, k, v, attn_mask=mask)
        dq, dk, dv = F.scaled_dot_product_attention_backward(g, cache)
    else:
        out, cache = F.flash_attention_forward(q, k, v, attn_mask=mask, block_q=2, block_k=4)
        dq, dk, dv = F.flash_attention_backward(g, cache)
    qt, kt, vt = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v))
    tmask = torch.from_numpy(mask)                                          # the same mask, unchanged
    ref = TF.scaled_dot_product_attention(qt, kt, vt, attn_mask=tmask)
    ref.backward(torch.from_numpy(g))
    dead = masked.all(axis=-1)                                              # (B, H, S)
    assert dead.sum() == 3
    np.testing.assert_array_equal(out[dead], 0.0)
    np.testing.assert_array_equal(dq[dead], 0.0)
    for a in (out, dq, dk, dv):
        assert np.isfinite(a).all()
    assert_close({"out": (out, ref), "dq": (dq, qt.grad), "dk": (dk, kt.grad), "dv": (dv, vt.grad)}, dtype=dtype)


@pytest.mark.parametrize("attention", ["standard", "tiled"])
def test_fully_masked_rows_vs_torch_multihead_attention(attention):
    """On a fully masked row torch.nn.MultiheadAttention returns NaN when it forms the weights
    (need_weights=True, or eval mode) and the output projection's bias when it goes through
    scaled_dot_product_attention (need_weights=False in training). Ours always returns the bias (zero
    attention output): equal to torch's SDPA path everywhere, gradients included, never NaN."""
    rng = np.random.default_rng(2)
    d, h, b, s = 8, 2, 2, 5
    tm = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=torch.float64)
    ours = nt.MultiheadAttention(d, h, dtype=np.float64, attention=attention, block_size=2)
    ours.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    with torch.no_grad():
        tm.out_proj.bias.normal_()
    ours.out_proj.bias.data[...] = tm.out_proj.bias.detach().numpy()
    x = rng.standard_normal((b, s, d))
    attn_mask = np.zeros((s, s), bool)
    attn_mask[2] = True                                          # query 2 may attend to nothing
    out, _ = ours(x, x, x, attn_mask=attn_mask, need_weights=False)
    g = rng.standard_normal(out.shape)
    dq, dk, dv = ours.backward(g)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    nan_ref, _ = tm(xt, xt, xt, attn_mask=torch.from_numpy(attn_mask), need_weights=True)
    assert np.isnan(nan_ref[:, 2].detach().numpy()).all()               # torch's weights path: NaN
    assert not np.isnan(np.delete(nan_ref.detach().numpy(), 2, axis=1)).any()
    ref, _ = tm(xt, xt, xt, attn_mask=torch.from_numpy(attn_mask), need_weights=False)
    ref.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(out[:, 2], np.broadcast_to(ours.out_proj.bias.data, (b, d)))
    pairs = {"out": (out, ref), "dx": (dq + dk + dv, xt.grad)}
    pairs.update({f"grad.{n}": (p.grad, dict(tm.named_parameters())[n].grad) for n, p in ours.named_parameters()})
    assert_close(pairs)
    for name, p in ours.named_parameters():
        assert np.isfinite(p.grad).all(), name


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("attention", ["standard", "tiled"])
def test_fully_padded_sequence_never_leaks_into_other_rows_or_gradients(dtype, attention):
    """A batch whose first sequence is all padding: the other sequences get exactly the outputs and
    gradients they get on their own, and every parameter gradient stays finite."""
    def model():
        return nt.TransformerModel(13, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, dropout=0.0,
                                   max_len=6, activation="gelu", dtype=dtype, seed=3)
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 13, (3, 6))
    pad = np.zeros((3, 6), bool)
    pad[0] = True                                                 # sequence 0: nothing to attend to
    pad[2, 4:] = True
    m = model()
    for layer in m.encoder.layers:
        layer.self_attn.attention = attention
        layer.self_attn.block_size = 4
    logits = m(ids, src_key_padding_mask=pad)
    g = rng.standard_normal(logits.shape).astype(dtype)
    g[0] = 0                                                      # the padded sequence sends no gradient
    m.backward(g)
    alone = model()
    for layer in alone.encoder.layers:
        layer.self_attn.attention = attention
        layer.self_attn.block_size = 4
    ref = alone(ids[1:], src_key_padding_mask=pad[1:])
    alone.backward(g[1:])
    assert np.isfinite(logits).all()
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(logits[1:], ref, rtol=tol, atol=tol)
    for (name, p), (_, p_ref) in zip(m.named_parameters(), alone.named_parameters()):
        assert np.isfinite(p.grad).all(), name
        np.testing.assert_allclose(p.grad, p_ref.grad, rtol=tol, atol=tol, err_msg=name)


# ------------------------------------------------------------------------------------------------
# NaN / inf inputs propagate like torch, and the trace names the layer
# ------------------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # NaN in, NaN out: expected
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_input_propagates_like_torch(norm_first, bad):
    rng = np.random.default_rng(5)
    tl = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first,
                                          dtype=torch.float64)
    ours = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first, dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    x = rng.standard_normal((3, 4, 8))
    x[1, 2, 5] = bad                                              # one bad entry in sequence 1
    y = ours(x)
    g = rng.standard_normal(y.shape)
    dx = ours.backward(g)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    yt = tl(xt)
    yt.backward(torch.from_numpy(g))
    # the same entries are NaN/inf; the finite ones agree (assert_close compares NaN positions exactly)
    assert_close({"y": (y, yt), "dx": (dx, xt.grad)})
    np.testing.assert_array_equal(np.isinf(y), np.isinf(yt.detach().numpy()))
    assert np.isfinite(y[[0, 2]]).all(), "a NaN in sequence 1 leaked into sequences 0 and 2"


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_trace_names_the_layer_where_nonfinite_values_first_appear():
    m = nt.TransformerModel(11, d_model=8, nhead=2, num_layers=2, dim_feedforward=16, dropout=0.0, max_len=5,
                            dtype=np.float64, seed=0)
    ids = np.random.default_rng(0).integers(0, 11, (2, 5))
    with nt.trace(m) as t:
        m(ids)
    assert t.first_nonfinite() is None
    m.encoder.layers[1].linear2.weight.data[3, 4] = np.inf          # a corrupted weight deep inside
    with nt.trace(m) as t:
        logits = m(ids)
        m.backward(np.ones_like(logits))
    assert np.isnan(logits).all()
    assert t.first_nonfinite() == "encoder.layers.1.linear2 (forward)"
    assert "encoder.layers.1.linear2" in t.summary()
    earlier = [r for r in t.records if r.phase == "forward"][:5]
    assert all("NaN/inf" not in r.flag for r in earlier)

    layer = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=np.float64, seed=0)
    x = np.random.default_rng(1).standard_normal((1, 3, 8))
    x[0, 1, 0] = np.nan                                           # a NaN in the input itself
    with nt.trace(layer) as t:
        layer(x)
    assert t.first_nonfinite().startswith("self_attn")            # the first sub-layer that sees it
