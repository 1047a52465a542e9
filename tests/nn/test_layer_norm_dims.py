"""LayerNorm over several trailing dimensions, as ``torch.nn.LayerNorm((S, D))``: the module (parameters
of shape normalized_shape, state_dict keys), the functional pair (normalized_shape default and
explicit), against torch with a random upstream gradient. The registry's draws also cover several
dims (tests/functional/test_functional_vs_torch.py::test_op_vs_torch, tests/nn/test_modules_vs_torch.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import numpy_transformer.functional as F

torch.set_num_threads(1)


def _torch_ln(x, shape, weight, bias, eps, dout):
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    wt = None if weight is None else torch.from_numpy(weight.copy()).requires_grad_(True)
    bt = None if bias is None else torch.from_numpy(bias.copy()).requires_grad_(True)
    out = torch.nn.functional.layer_norm(xt, shape, wt, bt, eps)
    out.backward(torch.from_numpy(dout.copy()))
    return out, xt.grad, None if wt is None else wt.grad, None if bt is None else bt.grad


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(shape=st.lists(st.integers(2, 4), min_size=2, max_size=3).map(tuple),
       lead=st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple),
       affine=st.sampled_from(["both", "weight", "bias", "none"]), seed=st.integers(0, 2**31))
def test_functional_several_dims_vs_torch(dtype, shape, lead, affine, seed):
    rng = np.random.default_rng(seed)
    x = (2 * rng.standard_normal(lead + shape) + 0.5).astype(dtype)
    w = rng.standard_normal(shape).astype(dtype) if affine in ("both", "weight") else None
    b = rng.standard_normal(shape).astype(dtype) if affine in ("both", "bias") else None
    ns = shape if affine == "none" else None                  # the default: weight's (or bias') shape
    out, cache = F.layer_norm_forward(x, w, b, 1e-5, normalized_shape=ns)
    dout = rng.standard_normal(out.shape).astype(dtype)
    dx, dw, db = F.layer_norm_backward(dout, cache)
    assert out.dtype == dx.dtype == dtype
    ref = _torch_ln(x, shape, w, b, 1e-5, dout)
    pairs = {"out": (out, ref[0]), "dx": (dx, ref[1])}
    if w is not None:
        pairs["dweight"] = (dw, ref[2])
    if b is not None:
        pairs["dbias"] = (db, ref[3])
    assert (dw is None) == (w is None) and (db is None) == (b is None)
    assert_close(pairs, dtype=dtype)


def test_functional_one_dim_is_the_default():
    """No weight, no bias, no normalized_shape: the last axis, as before."""
    x = np.random.default_rng(0).standard_normal((2, 3, 5))
    out, _ = F.layer_norm_forward(x)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x), (5,))
    assert_close({"out": (out, ref)})
    out2, _ = F.layer_norm_forward(x, normalized_shape=5)
    np.testing.assert_array_equal(out2, out)


@pytest.mark.parametrize("normalized_shape", [(3, 4), [2, 3, 4], (5,), 5])
@pytest.mark.parametrize("bias", [True, False])
def test_module_several_dims_vs_torch(normalized_shape, bias):
    tnn = torch.nn.LayerNorm(normalized_shape, eps=1e-6, bias=bias, dtype=torch.float64)
    with torch.no_grad():
        for p in tnn.parameters():
            p.add_(0.3 * torch.randn(p.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))
    ours = nt.LayerNorm(normalized_shape, eps=1e-6, bias=bias, dtype=np.float64)
    ns = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    assert ours.normalized_shape == tnn.normalized_shape == ns
    sd_t = tnn.state_dict()
    assert [(k, v.shape) for k, v in ours.state_dict().items()] == [(k, tuple(v.shape)) for k, v in sd_t.items()]
    ours.load_state_dict({k: v.numpy() for k, v in sd_t.items()})
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2,) + ns)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    y, yt = ours(x), tnn(xt)
    g = rng.standard_normal(y.shape)
    dx = ours.backward(g)
    yt.backward(torch.from_numpy(g))
    pairs = {"out": (y, yt), "dx": (dx, xt.grad), "grad.weight": (ours.weight.grad, tnn.weight.grad)}
    if bias:
        pairs["grad.bias"] = (ours.bias.grad, tnn.bias.grad)
    assert_close(pairs)
    assert repr(ours).startswith(f"LayerNorm({ns}, eps=1e-06")


def test_module_refuses_a_wrong_trailing_shape_and_stays_usable():
    ln = nt.LayerNorm((3, 4), dtype=np.float64)
    with pytest.raises(ValueError, match=r"trailing dimensions \(3, 4\) \(normalized_shape\).*got shape \(2, 4, 3\)"):
        ln(np.zeros((2, 4, 3)))
    with pytest.raises(ValueError, match="trailing dimensions"):
        ln(np.zeros(4))
    y = ln(np.arange(24.0).reshape(2, 3, 4))
    assert y.shape == (2, 3, 4)
    ln.backward(np.ones_like(y))


@pytest.mark.parametrize("bad", [(), (3, 0), (2, -1), (2.0, 3), (True, 3)])
def test_module_refuses_bad_normalized_shape(bad):
    with pytest.raises(ValueError, match="normalized_shape must be a positive int or a non-empty tuple"):
        nt.LayerNorm(bad)
