"""Grouped-query / multi-query attention (``enable_gqa=True``) beyond the registry's torch comparison
(``scaled_dot_product_attention_gqa``, ``flash_attention_gqa`` in ``test_op_vs_torch``): the forward is
attention on ``repeat_interleave``-d key and value, the backward sums each shared head's gradient over its
group, dropout replays, torch's refusals, and broadcast leading dimensions."""

import numpy as np
import pytest
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

from numpy_transformer import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

from reference_torch.nn.attention import attention as torch_attention  # noqa: E402


@st.composite
def gqa_problems(draw):
    b, hkv, g = draw(st.integers(1, 2)), draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 2, 4]))
    s, t = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    dh, dv = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    return b, hkv, g, s, t, dh, dv, draw(st.integers(0, 2**31 - 1))


def _inputs(rng, b, hkv, g, s, t, dh, dv, dtype=np.float64):
    q = rng.standard_normal((b, hkv * g, s, dh)).astype(dtype)
    k = rng.standard_normal((b, hkv, t, dh)).astype(dtype)
    v = rng.standard_normal((b, hkv, t, dv)).astype(dtype)
    return q, k, v


def _group_sum(x, hkv):
    """(B, Hq, T, X) -> (B, Hkv, T, X): each key/value head's gradient summed over its query heads."""
    b, hq, t, d = x.shape
    return x.reshape(b, hkv, hq // hkv, t, d).sum(axis=2)


@given(problem=gqa_problems(), causal=st.booleans(), flash=st.booleans())
def test_forward_is_repeat_interleave_backward_is_group_sum(problem, causal, flash):
    """enable_gqa=True equals plain attention on K, V repeated with ``repeat_interleave`` (query head h
    uses head h // G); its dk, dv are the plain path's, summed over each group (not one member's, not
    the mean)."""
    b, hkv, g, s, t, dh, dv, seed = problem
    rng = np.random.default_rng(seed)
    q, k, v = _inputs(rng, b, hkv, g, s, t, dh, dv)
    fwd, bwd = ((F.flash_attention_forward, F.flash_attention_backward) if flash else
                (F.scaled_dot_product_attention_forward, F.scaled_dot_product_attention_backward))
    tiles = {"block_q": 2, "block_k": 3} if flash else {}
    out, cache = fwd(q, k, v, is_causal=causal, enable_gqa=True, **tiles)
    kr, vr = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)            # numpy's repeat = repeat_interleave
    ref, ref_cache = F.scaled_dot_product_attention_forward(q, kr, vr, is_causal=causal)
    dout = rng.standard_normal(out.shape)
    dq, dk, dv_ = bwd(dout, cache)
    rq, rk, rv = F.scaled_dot_product_attention_backward(dout, ref_cache)
    assert dk.shape == k.shape and dv_.shape == v.shape
    assert_close({"out": (out, ref), "dq": (dq, rq), "dk": (dk, _group_sum(rk, hkv)),
                  "dv": (dv_, _group_sum(rv, hkv))})


@given(problem=gqa_problems(), p=st.sampled_from([0.25, 0.5]))
def test_dropout_replay_against_torch(problem, p):
    """A replayed keep-mask (one per query head, (B, Hq, S, T)) gives torch's twin's output and gradients
    on repeated K, V (torch's own function draws its dropout: it cannot replay one)."""
    b, hkv, g, s, t, dh, dv, seed = problem
    rng = np.random.default_rng(seed)
    q, k, v = _inputs(rng, b, hkv, g, s, t, dh, dv)
    keep = rng.random((b, hkv * g, s, t)) >= p
    out, cache = F.scaled_dot_product_attention_forward(q, k, v, dropout_p=p, enable_gqa=True, dropout_mask=keep)
    dout = rng.standard_normal(out.shape)
    dq, dk, dv_ = F.scaled_dot_product_attention_backward(dout, cache)
    tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (q, k, v))
    tout, _ = torch_attention(tq, tk.repeat_interleave(g, dim=1), tv.repeat_interleave(g, dim=1), dropout_p=p,
                              dropout_mask=torch.from_numpy(keep))
    tout.backward(torch.from_numpy(dout))
    assert_close({"out": (out, tout), "dq": (dq, tq.grad), "dk": (dk, tk.grad), "dv": (dv_, tv.grad)})


def test_tiled_dropout_from_rng_replays_in_the_backward():
    """The tiled path draws its tiles' keep-masks in the same order with and without grouping: grouped
    attention with ``rng`` equals plain tiled attention on repeated K, V with the same seed."""
    rng = np.random.default_rng(3)
    q, k, v = _inputs(rng, 2, 2, 3, 5, 6, 4, 3)
    out, cache = F.flash_attention_forward(q, k, v, dropout_p=0.3, enable_gqa=True, block_q=2, block_k=4,
                                           rng=np.random.default_rng(7))
    ref, rcache = F.flash_attention_forward(q, np.repeat(k, 3, 1), np.repeat(v, 3, 1), dropout_p=0.3,
                                            block_q=2, block_k=4, rng=np.random.default_rng(7))
    dout = rng.standard_normal(out.shape)
    dq, dk, dv = F.flash_attention_backward(dout, cache)
    rq, rk, rv = F.flash_attention_backward(dout, rcache)
    assert_close({"out": (out, ref), "dq": (dq, rq), "dk": (dk, _group_sum(rk, 2)), "dv": (dv, _group_sum(rv, 2))})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_leading_dims_and_unequal_kv_heads_vs_torch(dtype):
    """Key with batch 1 (broadcast), key and value with different head counts (torch allows each to divide
    Hq), a 5-dimensional layout and a mask per query head: as torch, gradients in the inputs' own shapes."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 2, 4, 3, 5)).astype(dtype)
    k = rng.standard_normal((1, 2, 2, 6, 5)).astype(dtype)
    v = rng.standard_normal((3, 1, 1, 6, 7)).astype(dtype)
    mask = rng.random((2, 4, 3, 6)) >= 0.3
    mask[..., 0] = True
    out, cache = F.scaled_dot_product_attention_forward(q, k, v, mask, scale=0.4, enable_gqa=True)
    dout = rng.standard_normal(out.shape).astype(dtype)
    grads = F.scaled_dot_product_attention_backward(dout, cache)
    assert out.dtype == dtype and all(gr.dtype == dtype for gr in grads)
    t = [torch.from_numpy(x).requires_grad_() for x in (q, k, v)]
    tout = TF.scaled_dot_product_attention(*t, torch.from_numpy(mask), scale=0.4, enable_gqa=True)
    tout.backward(torch.from_numpy(dout))
    assert_close({"out": (out, tout), **{n: (gr, tt.grad) for n, gr, tt in zip(("dq", "dk", "dv"), grads, t)}},
                 dtype=dtype)


def test_out_buffer_and_plain_broadcast_gradient_shapes():
    """``out=`` is honoured with grouping; without enable_gqa a size-1 head (or batch) dimension of key
    broadcasts as in torch, and its gradient is summed back to key's shape."""
    rng = np.random.default_rng(1)
    q, k, v = _inputs(rng, 2, 1, 4, 3, 5, 4, 2)
    buf = np.empty((2, 3, 4, 2)).transpose(0, 2, 1, 3)                  # a head-transposed view
    out, cache = F.scaled_dot_product_attention_forward(q, k, v, enable_gqa=True, out=buf)
    assert out is buf
    plain, pcache = F.scaled_dot_product_attention_forward(q, k, v)     # Hkv = 1 broadcasts without enable_gqa
    np.testing.assert_allclose(out, plain, rtol=1e-13, atol=1e-15)
    dout = rng.standard_normal(out.shape)
    for g, ref in zip(F.scaled_dot_product_attention_backward(dout, pcache),
                      F.scaled_dot_product_attention_backward(dout, cache)):
        assert g.shape == ref.shape
        np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("fn", [F.scaled_dot_product_attention_forward, F.flash_attention_forward])
def test_refusals_as_torch(fn):
    """Different head counts without enable_gqa, heads that do not divide, and no heads dimension are
    refused as torch refuses them, each message naming enable_gqa and what it got."""
    rng = np.random.default_rng(2)
    q, k, v = _inputs(rng, 2, 2, 2, 3, 4, 5, 5)                          # Hq = 4, Hkv = 2
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    with pytest.raises(RuntimeError):
        TF.scaled_dot_product_attention(tq, tk, tv)
    with pytest.raises(ValueError, match=r"query \(2, 4, 3, 5\), key \(2, 2, 4, 5\) .* pass enable_gqa=True"):
        fn(q, k, v)
    q3 = q[:, :3]
    with pytest.raises(RuntimeError, match="must divide the number of heads"):
        TF.scaled_dot_product_attention(torch.from_numpy(q3), tk, tv, enable_gqa=True)
    with pytest.raises(ValueError, match="enable_gqa=True needs the key's and value's heads to divide the "
                                         r"query's \(dimension -3\), got query 3, key 2 and value 2 heads"):
        fn(q3, k, v, enable_gqa=True)
    with pytest.raises(ValueError, match="enable_gqa=True needs a heads dimension"):
        fn(q[0, 0], k[0, 0], v[0, 0], enable_gqa=True)
    if fn is F.flash_attention_forward:
        with pytest.raises(ValueError, match="same number of heads here, got 2 and 1"):
            fn(q, k, v[:, :1], enable_gqa=True)
    out, _ = fn(q, k, v, enable_gqa=True)                                # still usable after refusals
    assert out.shape == (2, 4, 3, 5)
