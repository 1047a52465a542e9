"""LayerNorm and RMSNorm of blocks whose squares overflow (|x| above ~1.8e19 in float32, ~1.3e154 in
float64): the normalised output is still ~±1, and the backward is the exact one.

Normalisation does not change when a block is multiplied by a power of two ``2**-k`` (exactly, as long
as nothing underflows), except that eps becomes ``eps * 4**-k``: so the reference is torch in float64 on
``x * 2**-k`` with ``eps * 4**-k``, a block of size ~1 whose squares cannot overflow, and the gradient
with respect to x is the one with respect to ``x * 2**-k`` times ``2**-k``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _compare import assert_close

import numpy_transformer as nt
import numpy_transformer.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [np.float32, np.float64]


def _huge_rows(dtype, rng, d=6):
    """(5, D): rows around ±1e20 .. the dtype's max, and one ordinary row (unchanged by the fix)."""
    top = float(np.finfo(dtype).max)
    mags = [1e20, 1e30, top / 8, 1e160 if dtype == np.float64 else 1e35, 1.0]
    rows = [m * (rng.uniform(0.2, 1.0, d) * rng.choice([-1, 1], d)) for m in mags]
    rows[0] = rows[0] + 3e20                                     # a large mean too
    return np.stack(rows).astype(dtype), mags


def _reference(kind, x, w, b, eps, g, mags):
    """torch float64 on each row scaled by a power of two near 1/|row|: (y, dx, dw, db) per row summed."""
    outs = []
    for i, m in enumerate(mags):
        k = int(np.floor(np.log2(m)))
        xs = torch.from_numpy(np.ldexp(x[i:i + 1].astype(np.float64), -k)).requires_grad_(True)
        wt = torch.from_numpy(w.astype(np.float64)).requires_grad_(True)
        bt = None if b is None else torch.from_numpy(b.astype(np.float64)).requires_grad_(True)
        e = eps * 4.0 ** -k
        y = (TF.layer_norm(xs, (x.shape[-1],), wt, bt, e) if kind == "layer" else
             TF.rms_norm(xs, (x.shape[-1],), wt, e))
        y.backward(torch.from_numpy(g[i:i + 1].astype(np.float64)))
        outs.append((y.detach().numpy(), np.ldexp(xs.grad.numpy(), -k), wt.grad.numpy(),
                     None if bt is None else bt.grad.numpy()))
    y, dx = np.concatenate([o[0] for o in outs]), np.concatenate([o[1] for o in outs])
    dw = sum(o[2] for o in outs)
    db = None if b is None else sum(o[3] for o in outs)
    return y, dx, dw, db


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_of_rows_whose_squares_overflow(dtype):
    rng = np.random.default_rng(0)
    x, mags = _huge_rows(dtype, rng)
    d = x.shape[-1]
    w, b = rng.uniform(0.5, 1.5, d).astype(dtype), rng.standard_normal(d).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    eps = 1e-5
    with np.errstate(over="raise", invalid="raise", divide="raise"):      # no visible overflow
        y, cache = F.layer_norm_forward(x, w, b, eps)
        dx, dw, db = F.layer_norm_backward(g, cache)
    ry, rdx, rdw, rdb = _reference("layer", x, w, b, eps, g, mags)
    assert np.abs(cache.xhat).max() > 0.5 and np.isfinite(cache.xhat).all()   # was 0 (rstd = 1/inf)
    assert_close({"y": (y, ry), "dx": (dx, rdx), "dw": (dw, rdw), "db": (db, rdb)}, dtype=dtype)
    # the ordinary row is exactly what it is alone
    alone, _ = F.layer_norm_forward(x[-1:], w, b, eps)
    np.testing.assert_array_equal(y[-1:], alone)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_of_rows_whose_squares_overflow(dtype):
    rng = np.random.default_rng(1)
    x, mags = _huge_rows(dtype, rng)
    d = x.shape[-1]
    w = rng.uniform(0.5, 1.5, d).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    eps = 1e-6
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y, cache = F.rms_norm_forward(x, w, eps)
        dx, dw = F.rms_norm_backward(g, cache)
    ry, rdx, rdw, _ = _reference("rms", x, w, None, eps, g, mags)
    assert np.abs(cache.xhat).max() > 0.5 and np.isfinite(cache.xhat).all()
    assert_close({"y": (y, ry), "dx": (dx, rdx), "dw": (dw, rdw)}, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_module_on_a_row_around_1e30(dtype):
    """The issue's case: a float32 row around ±1e30 normalises to about ±1 (it gave 0)."""
    ln = nt.LayerNorm(4, dtype=dtype)
    y = ln(np.array([[1e30, -1e30, 1e30, -1e30]], dtype=dtype))
    np.testing.assert_allclose(y, [[1, -1, 1, -1]], rtol=1e-6)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_a_row_holding_inf_or_nan_still_gives_nan(kind):
    """The rescaling is for finite blocks only: an inf or NaN input propagates as NaN, as torch."""
    x = np.array([[1.0, np.inf, 2.0], [np.nan, 1.0, 1.0], [1e30, -1e30, 0.0]], dtype=np.float32)
    with np.errstate(invalid="ignore"):
        y = (F.layer_norm_forward(x)[0] if kind == "layer" else F.rms_norm_forward(x)[0])
    assert np.isnan(y[0]).any() and np.isnan(y[1]).all() and np.isfinite(y[2]).all()


def test_float16_norms_keep_the_overflow_the_mixed_precision_study_measures():
    """float16 is left as float16 arithmetic gives it (docs/mixed-precision.md's cliff at |x - mean|
    > 256), so the study still shows why mixed precision keeps the norms in float32."""
    from numpy_transformer.utils.checks import allow_float16
    x = np.array([[300.0, -300.0, 0.0, 1.0]], dtype=np.float16)
    with allow_float16(), np.errstate(over="ignore", invalid="ignore"):
        assert np.all(F.layer_norm_forward(x)[0] == 0)
