"""Every op of ``numpy_transformer.functional``, forward and backward, against PyTorch.

Each test draws shapes (and options) with hypothesis, runs our forward/backward pair and the torch op
under autograd with the same *random* upstream gradient, and compares the output and every gradient
with ``_compare.assert_close`` (float64: 1e-10 normwise relative; float32: 1e-4).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer.functional as F
from numpy_transformer import testing as registry
from numpy_transformer.testing import HypothesisChooser
from reference_torch import check, convert, table
from reference_torch.nn import attention as R
from reference_torch.nn import layers as RL

# Tiny tensors: torch's intra-op threads only add synchronisation cost (float64 LayerNorm is ~50x
# slower with 2 threads than with 1), and pytest-xdist already runs one worker per core.
torch.set_num_threads(1)

DTYPES = [np.float64, np.float32]

small = st.integers(1, 4)
lead_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
seeds = st.integers(0, 2**32 - 1)


def t(a, grad=True):
    """ndarray -> leaf tensor of the same dtype (requires_grad for float arrays)."""
    x = torch.from_numpy(np.array(a, copy=True))
    return x.requires_grad_(True) if grad and x.is_floating_point() else x


def randn(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def against_torch(dtype, ours, fn, inputs, dout, consts=None):
    """Compare ``ours`` (``{"out": ..., "d<name>": ...}``, NumPy) with torch under autograd.

    ``fn(**tensors)`` is the torch computation (returning the output, or ``(output, {name: extra
    output compared without gradient})``); ``inputs`` are the differentiable NumPy arrays (None
    allowed), ``consts`` the others (masks, ids; float ones follow the dtype), ``dout`` the random
    upstream gradient. The pair named ``d<name>`` is compared with ``inputs[name]``'s gradient.
    float64: ``assert_close`` at 1e-10. float32: ``assert_close`` at 1e-4 against torch's float32
    result or, for an ill-conditioned entry only, :func:`reference_torch.check.assert_float32_close`
    against torch run in float64 on the same float32 numbers (ours must be within 1e-4 of the exact
    answer or no more than 10x further from it than torch's own float32 result).
    """
    consts = consts or {}

    def run(tdtype):
        ts = {k: None if v is None else torch.from_numpy(np.array(v)).to(tdtype).requires_grad_(True)
              for k, v in inputs.items()}
        cs = {k: None if v is None else (torch.from_numpy(np.array(v)).to(tdtype) if np.asarray(v).dtype.kind == "f"
                                         else torch.from_numpy(np.array(v)))
              for k, v in consts.items()}
        out = fn(**ts, **cs)
        out, extra = out if isinstance(out, tuple) else (out, {})
        out.backward(torch.from_numpy(np.array(dout)).to(tdtype))
        res = {"out": out, **extra}
        res.update({f"d{k}": None if v is None else v.grad for k, v in ts.items()})
        return res

    ref = run(convert.torch_dtype(dtype))
    pairs = {name: (ours[name], ref[name]) for name in ours}
    if np.dtype(dtype) == np.float64:
        return assert_close(pairs, dtype=dtype)
    try:
        return assert_close(pairs, dtype=dtype)
    except AssertionError:
        exact = run(torch.float64)
        check.assert_float32_close(pairs, exact)


def check_dtypes(dtype, **arrays):
    for name, a in arrays.items():
        if a is not None:
            assert a.dtype == np.dtype(dtype), f"{name} has dtype {a.dtype}, expected {np.dtype(dtype)}"


# ------------------------------------------------------------------------------------------------
# linear
# ------------------------------------------------------------------------------------------------

def test_embedding_repeated_ids_many():
    """Every id repeated many times (np.add.at, not fancy-index assignment)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4))
    ids = rng.integers(0, 3, size=(4, 50))
    y, cache = F.embedding_forward(ids, w)
    g = rng.standard_normal(y.shape)
    wt = t(w)
    TF.embedding(torch.from_numpy(ids), wt).backward(t(g, False))
    assert_close({"dW": (F.embedding_backward(g, cache), wt.grad)})


# ------------------------------------------------------------------------------------------------
# layer norm
# ------------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------------
# relu, gelu
# ------------------------------------------------------------------------------------------------

def _gelu_grid():
    return np.concatenate([np.linspace(-40.0, 40.0, 2001),
                           np.random.default_rng(1234).standard_normal(1000) * 3.0])


def _gelu_truth(x):
    """Exact GELU value and slope of each double ``x`` (mpmath, 60 digits), and the slope's scale
    ``|Phi(x)| + |x phi(x)|`` (the slope is a sum of those two terms and has a root near x = -0.75)."""
    mpmath.mp.dps = 60
    val, slope, scale = [], [], []
    r2, r2pi = mpmath.sqrt(2), mpmath.sqrt(2 * mpmath.pi)
    for xi in x:
        xm = mpmath.mpf(float(xi))
        cdf = mpmath.erfc(-xm / r2) / 2
        xpdf = xm * mpmath.exp(-xm * xm / 2) / r2pi
        val.append(float(xm * cdf))
        slope.append(float(cdf + xpdf))
        scale.append(float(abs(cdf) + abs(xpdf)))
    return np.array(val), np.array(slope), np.array(scale)


GELU_ELEMENTWISE_RTOL = 4e-15    # ~1e-15 target: a few units in the last place (2.2e-16 each)


def _elementwise_rel(ours, truth, scale, x):
    """Per-element relative error against ``scale``, in units where ``GELU_ELEMENTWISE_RTOL`` is the bar.

    Results below the smallest normal double carry too few bits for a relative comparison. There
    Phi(x) (or phi(x)) is itself subnormal, exact only to its last bit (2**-1074), and GELU multiplies
    it by x: such an entry passes when it is within (|x| + 1) subnormal units of the truth.
    """
    tiny = np.finfo(np.float64).tiny
    ok = scale >= tiny
    rel = np.zeros_like(truth)
    rel[ok] = np.abs(ours[ok] - truth[ok]) / scale[ok]
    unit = (np.abs(x[~ok]) + 1) * np.nextafter(0.0, 1.0)
    rel[~ok] = np.abs(ours[~ok] - truth[~ok]) / unit * GELU_ELEMENTWISE_RTOL
    return rel


def test_gelu_exact_elementwise_accuracy_moderate_range():
    """Exact GELU, forward and backward, elementwise to a few ulps over [-5, 40] (and torch agrees
    elementwise there where it is itself accurate, x >= -3)."""
    x = _gelu_grid()
    x = x[x >= -5.0]
    val, slope, scale = _gelu_truth(x)
    y, cache = F.gelu_forward(x)
    dy = F.gelu_backward(np.ones_like(x), cache)
    rf = _elementwise_rel(y, val, np.abs(val), x)
    rb = _elementwise_rel(dy, slope, scale, x)
    assert rf.max() <= GELU_ELEMENTWISE_RTOL, f"gelu forward: rel {rf.max():.2e} at x={x[rf.argmax()]!r}"
    assert rb.max() <= GELU_ELEMENTWISE_RTOL, f"gelu backward: rel {rb.max():.2e} at x={x[rb.argmax()]!r}"

    xt = t(x)
    yt = TF.gelu(xt)
    yt.backward(torch.ones_like(yt))
    sel = x >= -3.0      # torch computes 0.5 x (1 + erf(x/sqrt2)): cancels for x << 0 (see below)
    ours_vs_torch = np.abs(y - yt.detach().numpy())[sel] / np.maximum(np.abs(val[sel]), 1e-300)
    assert ours_vs_torch.max() <= 2e-14, f"vs torch forward: {ours_vs_torch.max():.2e}"
    dvt = np.abs(dy - xt.grad.numpy())[sel] / scale[sel]
    assert dvt.max() <= 2e-14, f"vs torch backward: {dvt.max():.2e}"


def test_gelu_exact_elementwise_accuracy_wide_range():
    """Exact GELU, forward and backward, elementwise to ~1e-15 relative over linspace(-40, 40) plus
    random normals, against a 60-digit mpmath evaluation of x Phi(x) and Phi(x) + x phi(x).

    (torch itself cannot serve as the elementwise oracle in the negative tail: its CPU kernel uses
    0.5 x (1 + erf(x / sqrt 2)), which cancels to 0 below x ~ -8.3 and is off by 3% at x = -8.)
    """
    x = _gelu_grid()
    val, slope, scale = _gelu_truth(x)
    y, cache = F.gelu_forward(x)
    dy = F.gelu_backward(np.ones_like(x), cache)
    rf = _elementwise_rel(y, val, np.abs(val), x)
    rb = _elementwise_rel(dy, slope, scale, x)
    i, j = int(rf.argmax()), int(rb.argmax())
    assert rf.max() <= GELU_ELEMENTWISE_RTOL and rb.max() <= GELU_ELEMENTWISE_RTOL, (
        "exact GELU loses relative accuracy in the negative tail: "
        f"forward rel error {rf[i]:.2e} at x={x[i]!r} (ours {y[i]!r}, exact {val[i]!r}), "
        f"backward rel error {rb[j]:.2e} at x={x[j]!r} (ours {dy[j]!r}, exact {slope[j]!r}); "
        f"tolerance {GELU_ELEMENTWISE_RTOL:g}. Cause: the rounding of -x/sqrt(2) before erfc and of "
        "x*x before exp(-x*x/2) is amplified by ~x**2 (relative error ~x**2 ulp)")


def test_gelu_exact_matches_torch_normwise_wide_range():
    """Over the same wide grid, normwise (the suite's metric) ours and torch agree to 1e-10."""
    x = _gelu_grid()
    rng = np.random.default_rng(5)
    g = rng.standard_normal(x.shape)
    y, cache = F.gelu_forward(x)
    dx = F.gelu_backward(g, cache)
    xt = t(x)
    yt = TF.gelu(xt)
    yt.backward(t(g, False))
    assert_close({"out": (y, yt), "dx": (dx, xt.grad)})


# ------------------------------------------------------------------------------------------------
# dropout
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
       p=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), seed=seeds)
def test_dropout_mask_replay(dtype, shape, p, seed):
    rng = np.random.default_rng(seed)
    x = randn(rng, shape, dtype)
    y, cache = F.dropout_forward(x, p, training=True, rng=np.random.default_rng(seed + 1))
    g = randn(rng, shape, dtype)
    dx = F.dropout_backward(g, cache)
    check_dtypes(dtype, y=y, dx=dx)
    if p == 0.0:
        assert cache.mask is None and y is x and dx is g
        return
    assert cache.mask.dtype == np.bool_ and cache.mask.shape == x.shape
    against_torch(dtype, {"out": y, "dx": dx}, lambda x, mask: RL.dropout(x, p, mask), {"x": x}, g,
                  consts={"mask": cache.mask})
    # and the replayed arithmetic is plain torch: x * keep / (1 - p)
    if p < 1.0:
        manual = t(x, False) * torch.from_numpy(cache.mask).to(convert.torch_dtype(dtype)) / (1.0 - p)
        assert_close({"manual": (y, manual)}, dtype=dtype)
    # a given mask is reused as is
    y2, _ = F.dropout_forward(x, p, training=True, mask=cache.mask)
    np.testing.assert_array_equal(y2, y)


def test_dropout_eval_is_identity():
    x = np.random.default_rng(0).standard_normal((3, 4))
    y, cache = F.dropout_forward(x, 0.5, training=False, rng=np.random.default_rng(0))
    assert y is x and cache.mask is None


# ------------------------------------------------------------------------------------------------
# scaled dot-product attention
# ------------------------------------------------------------------------------------------------

@st.composite
def attention_case(draw):
    lead = draw(st.sampled_from([(), (2,), (2, 3), (1, 2)]))
    s, tt, dh, dv = draw(small), draw(st.integers(1, 5)), draw(small), draw(small)
    mask = draw(st.sampled_from(["none", "bool", "bool_full", "float", "float_full", "is_causal",
                                 "fully_masked_rows"]))
    scale = draw(st.sampled_from([None, 0.3]))
    return lead, s, tt, dh, dv, mask, scale


def _sdpa_inputs(rng, lead, s, tt, dh, dv, mask_kind, dtype):
    """q, k, v and the registry's mask of that kind, in torch's function convention (True = takes part)."""
    q, k, v = randn(rng, lead + (s, dh), dtype), randn(rng, lead + (tt, dh), dtype), randn(rng, lead + (tt, dv), dtype)
    mask, is_causal = registry.sdpa_mask(mask_kind, lead, s, tt, dtype, rng)
    return q, k, v, mask, is_causal


@pytest.mark.parametrize("dtype", DTYPES)
@given(case=attention_case(), p=st.sampled_from([0.1, 0.5, 1.0]), seed=seeds)
def test_sdpa_dropout_vs_reference(dtype, case, p, seed):
    """Attention dropout (mask replayed) with every mask kind and is_causal, against the twin's
    ``attention`` (torch's SDPA cannot replay a dropout mask)."""
    lead, s, tt, dh, dv, mask_kind, scale = case
    rng = np.random.default_rng(seed)
    q, k, v, mask, is_causal = _sdpa_inputs(rng, lead, s, tt, dh, dv, mask_kind, dtype)
    out, cache = F.scaled_dot_product_attention_forward(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale,
                                                        dropout_p=p, training=True, rng=np.random.default_rng(seed))
    g = randn(rng, out.shape, dtype)
    dq, dk, dv_ = F.scaled_dot_product_attention_backward(g, cache)
    check_dtypes(dtype, out=out, dq=dq, dk=dk, dv=dv_)

    def reference(q, k, v, m, keep):
        # the twin's masks are the modules' (True = masked out): a bool mask of torch's function inverted
        add = None if m is None else R.additive_mask(~m if m.dtype == torch.bool else m, q.dtype)
        if is_causal:
            add = R.additive_mask(R.causal_mask(s, tt), q.dtype)
        return R.attention(q, k, v, add, dropout_p=p, training=True, dropout_mask=keep, scale=scale)[0]

    against_torch(dtype, {"out": out, "dq": dq, "dk": dk, "dv": dv_}, reference, {"q": q, "k": k, "v": v}, g,
                  consts={"m": mask, "keep": cache.dropout.mask})


def test_sdpa_bool_mask_is_torchs_function_convention():
    """A torch user's lower-triangular bool mask (True = may attend) means the same here: it equals
    is_causal=True on both sides, and its inverse is a different answer."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    tril = np.tril(np.ones((4, 4), bool))
    ours, _ = F.scaled_dot_product_attention_forward(q, k, v, tril)
    causal, _ = F.scaled_dot_product_attention_forward(q, k, v, is_causal=True)
    ref = TF.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), torch.from_numpy(tril))
    np.testing.assert_allclose(ours, causal, rtol=1e-13, atol=1e-15)
    assert_close({"out": (ours, ref)})
    inverted, _ = F.scaled_dot_product_attention_forward(q, k, v, ~tril)
    assert not np.allclose(inverted[:, :-1], ours[:, :-1])
    # the modules' helper turns their convention into this one
    np.testing.assert_array_equal(F.module_to_sdpa_mask(F.causal_mask(4)), tril)


def test_sdpa_arguments_in_torchs_order_and_refusals():
    """Positional order as torch (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
    a mask with is_causal is refused as torch refuses it; head counts as torch's enable_gqa rules."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    a, _ = F.scaled_dot_product_attention_forward(q, k, v, None, 0.0, True, 0.7)
    b, _ = F.scaled_dot_product_attention_forward(q, k, v, is_causal=True, scale=0.7)
    np.testing.assert_array_equal(a, b)
    ref = TF.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)), None, 0.0, True, scale=0.7)
    assert_close({"out": (a, ref)})
    mask = np.ones((3, 3), bool)
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        TF.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)), torch.from_numpy(mask),
                                        is_causal=True)
    for fn in (F.scaled_dot_product_attention_forward, F.flash_attention_forward):
        with pytest.raises(ValueError, match=r"enable_gqa=True needs a heads dimension"):
            fn(q[0], k[0], v[0], enable_gqa=True)
        with pytest.raises(ValueError, match="dropout_p=0.5 needs rng"):
            fn(q, k, v, dropout_p=0.5)
    with pytest.raises(ValueError, match="attn_mask and is_causal=True were both given"):
        F.scaled_dot_product_attention_forward(q, k, v, mask, is_causal=True)
    tq = [torch.from_numpy(x) for x in (q, k, v)]
    int_mask = np.tril(np.ones((3, 3), np.int64))           # 0/1 added to the scores would be a trap
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float"):
        TF.scaled_dot_product_attention(*tq, torch.from_numpy(int_mask))
    for fn in (F.scaled_dot_product_attention_forward, F.flash_attention_forward):
        with pytest.raises(TypeError, match="attn_mask must be bool .* got dtype int64; .*astype.bool"):
            fn(q, k, v, int_mask)
        with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 2, 3, 3\) does not broadcast to .*\(2, 3, 3\)"):
            fn(q, k, v, np.ones((4, 2, 3, 3), bool))
        with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 4\) does not broadcast"):
            fn(q, k, v, np.ones((3, 4), bool))


# ------------------------------------------------------------------------------------------------
# multi-head attention (functional) vs torch.nn.functional.multi_head_attention_forward
# ------------------------------------------------------------------------------------------------

# ------------------------------------------------------------------------------------------------
# every op of the registry against its entry in the torch table
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(registry.OPS))
@given(data=st.data())
def test_op_vs_torch(name, dtype, data):
    """Each op's forward and every gradient, on shapes and options drawn by the registry, against
    torch's implementation in ``reference_torch.table.OPS`` with the same random upstream gradient
    (masks in the convention of torch's function of the same name, handed to torch unchanged).
    Fully masked rows give zeros on both sides."""
    case = registry.OPS[name]
    d = case.draw(HypothesisChooser(data), dtype)
    outs, cache = case.forward(**d.inputs, **d.static)
    rng = np.random.default_rng(data.draw(seeds, label="dout seed"))
    g = randn(rng, outs["out"].shape, dtype)
    grads = case.backward(g, cache)
    wanted = {n for n, a in d.inputs.items() if np.asarray(a).dtype.kind == "f" and n not in case.nondiff}
    assert set(grads) == wanted, f"gradients for {sorted(grads)}, inputs {sorted(wanted)}"
    check_dtypes(dtype, **outs, **grads)
    assert all(np.isfinite(a).all() for a in [*outs.values(), *grads.values()])

    def torch_side(**tensors):
        res = table.OPS[name](**tensors, **{k: v for k, v in static_t.items()})
        return res if isinstance(res, tuple) else (res, {})
    static_t = {k: (torch.from_numpy(np.array(v)) if isinstance(v, np.ndarray) and v.dtype.kind != "f" else v)
                for k, v in d.static.items()}
    float_static = {k: v for k, v in d.static.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
    for k in float_static:
        static_t.pop(k)
    diff = {k: v for k, v in d.inputs.items() if k in wanted}
    consts = {**{k: v for k, v in d.inputs.items() if k not in wanted}, **float_static}
    against_torch(dtype, {**outs, **{f"d{k}": v for k, v in grads.items()}}, torch_side, diff, g, consts=consts)


# ------------------------------------------------------------------------------------------------
# masks
# ------------------------------------------------------------------------------------------------

@given(s=small, tt=small)
def test_causal_mask_matches_torch(s, tt):
    ours = F.causal_mask(s, tt)
    # torch SDPA's is_causal (top-left aligned): allowed = tril(ones(S, T))
    allowed = torch.ones(s, tt, dtype=torch.bool).tril().numpy()
    np.testing.assert_array_equal(ours, ~allowed)
    if s == tt:
        gen = torch.nn.Transformer.generate_square_subsequent_mask(s, dtype=torch.float64).numpy()
        np.testing.assert_array_equal(ours, np.isneginf(gen))


def test_erf_erfc_vs_torch():
    x = np.concatenate([np.linspace(-30, 30, 4001), np.random.default_rng(0).standard_normal(1000)])
    xt = torch.from_numpy(x)
    assert_close({"erf": (F.erf(x), torch.erf(xt)), "erfc": (F.erfc(x), torch.special.erfc(xt))})
    # elementwise: erfc keeps relative accuracy deep in the tail
    ref = torch.special.erfc(xt).numpy()
    ok = ref > np.finfo(np.float64).tiny
    rel = np.abs(F.erfc(x)[ok] - ref[ok]) / ref[ok]
    assert rel.max() < 1e-14, f"erfc rel error {rel.max():.2e}"
    assert math.isclose(float(F.erf(np.array(0.5))), math.erf(0.5), rel_tol=1e-15)
