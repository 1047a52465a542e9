"""Tiled (flash) attention: same outputs and gradients as the standard path and as torch's
``scaled_dot_product_attention``, over shapes, masks and block sizes that need not divide S or T."""

import numpy as np
import pytest
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@st.composite
def problems(draw):
    b, h = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    s = draw(st.integers(1, 24))
    causal = draw(st.booleans())
    t = s if causal else draw(st.integers(1, 24))
    dh, dv = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "padding", "very_negative"]))
    block_q, block_k = draw(st.integers(1, 30)), draw(st.integers(1, 30))
    seed = draw(st.integers(0, 2**31 - 1))
    return b, h, s, t, dh, dv, causal, mask_kind, block_q, block_k, seed


def _mask(kind, rng, b, h, s, t):
    """A mask in torch's function convention (bool True = takes part), never masking key 0 for every
    query so that no row is fully masked (tested on its own below)."""
    if kind == "none":
        return None
    if kind == "bool":
        m = rng.random((b, h, s, t)) >= 0.4
        m[..., 0] = True
        return m
    if kind == "float":
        return rng.standard_normal((s, t))
    if kind == "padding":
        pad = rng.random((b, t)) >= 0.4
        pad[:, 0] = True
        return pad[:, None, None, :]
    m = np.full((s, t), -1000.0)                     # every score far below 0: underflow-prone
    m[:, 0] = -np.inf if t > 1 else -1000.0
    return m


def _with_causal(mask, s, t):
    """``mask`` and causality as one mask: what the tiled path computes from ``attn_mask`` plus
    ``is_causal=True`` (the standard path and torch's function refuse the two together)."""
    allowed = ~F.causal_mask(s, t)                   # (S, T), True = may attend
    if mask is None:
        return allowed
    return mask & allowed if mask.dtype == bool else np.where(allowed, mask, -np.inf)


@given(problems())
def test_flash_matches_standard_and_torch(problem):
    b, h, s, t, dh, dv, causal, kind, bq, bk, seed = problem
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((b, h, s, dh)), rng.standard_normal((b, h, t, dh))
    v, do = rng.standard_normal((b, h, t, dv)), rng.standard_normal((b, h, s, dv))
    mask = _mask(kind, rng, b, h, s, t)
    out, cache = F.flash_attention_forward(q, k, v, attn_mask=mask, is_causal=causal, block_q=bq, block_k=bk)
    dq, dk, dvv = F.flash_attention_backward(do, cache)
    both = mask is not None and causal
    ref_mask, ref_causal = (_with_causal(mask, s, t), False) if both else (mask, causal)
    ref, rcache = F.scaled_dot_product_attention_forward(q, k, v, attn_mask=ref_mask, is_causal=ref_causal)
    rq, rk, rv = F.scaled_dot_product_attention_backward(do, rcache)
    ctx = f"(B,H,S,T,Dh,Dv)={(b, h, s, t, dh, dv)} causal={causal} mask={kind} blocks=({bq},{bk}): "
    assert_close({"out": (out, ref), "dq": (dq, rq), "dk": (dk, rk), "dv": (dvv, rv)}, context=ctx)
    # torch's function: the same mask convention, handed over unchanged
    tm = None if ref_mask is None else torch.from_numpy(np.ascontiguousarray(ref_mask))
    ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    to = TF.scaled_dot_product_attention(*ts, attn_mask=tm, is_causal=ref_causal)
    to.backward(torch.from_numpy(do))
    assert_close({"out": (out, to), "dq": (dq, ts[0].grad), "dk": (dk, ts[1].grad), "dv": (dvv, ts[2].grad)},
                 context="vs torch " + ctx)


def test_fully_masked_rows_are_zero_without_nan():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 6, 4)) for _ in range(3))
    mask = np.ones((6, 6), bool)
    mask[2] = False                                  # query 2 may attend to nothing (True = takes part)
    out, cache = F.flash_attention_forward(q, k, v, attn_mask=mask, block_q=4, block_k=4)
    dq, dk, dv = F.flash_attention_backward(rng.standard_normal(out.shape), cache)
    assert np.all(out[:, :, 2] == 0) and np.all(dq[:, :, 2] == 0)
    assert np.isneginf(cache.lse[:, :, 2]).all()
    assert all(np.isfinite(a).all() for a in (out, dq, dk, dv))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_flash_dropout_replays_the_same_tiles(dtype):
    """Dropout masks are drawn per tile and replayed by the backward: finite differences of the
    forward (with the same seed) agree with the backward, and a full mask reproduces the standard path."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 2, 7, 3)) for _ in range(3))
    do = rng.standard_normal((2, 2, 7, 3))
    keep = rng.random((2, 2, 7, 7)) >= 0.3
    out, cache = F.flash_attention_forward(q, k, v, block_q=3, block_k=2, dropout_p=0.3, dropout_mask=keep)
    ref, rcache = F.scaled_dot_product_attention_forward(q, k, v, dropout_p=0.3, dropout_mask=keep)
    assert_close({"out": (out, ref)})
    assert_close(dict(zip(["dq", "dk", "dv"], zip(F.flash_attention_backward(do, cache),
                                                  F.scaled_dot_product_attention_backward(do, rcache)))))
    if dtype == np.float64:
        def f(qq):
            o, _ = F.flash_attention_forward(qq, k, v, block_q=3, block_k=2, dropout_p=0.3,
                                             rng=np.random.default_rng(7))
            return float(np.sum(o * do))
        _, c = F.flash_attention_forward(q, k, v, block_q=3, block_k=2, dropout_p=0.3, rng=np.random.default_rng(7))
        dq = F.flash_attention_backward(do, c)[0]
        eps = 1e-6
        for idx in [(0, 0, 0, 0), (1, 1, 6, 2), (0, 1, 3, 1)]:
            qp, qm = q.copy(), q.copy()
            qp[idx] += eps
            qm[idx] -= eps
            assert abs((f(qp) - f(qm)) / (2 * eps) - dq[idx]) < 1e-7


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"padding": True}])
def test_layer_tiled_equals_standard(norm_first, kwargs):
    rng = np.random.default_rng(3)
    std = nt.TransformerEncoderLayer(16, 4, 32, dropout=0.0, dtype=np.float64, seed=5, norm_first=norm_first)
    tiled = nt.TransformerEncoderLayer(16, 4, 32, dropout=0.0, dtype=np.float64, seed=5, norm_first=norm_first,
                                       attention="tiled", block_size=3)
    x, dy = rng.standard_normal((2, 7, 16)), rng.standard_normal((2, 7, 16))
    kw = dict(kwargs)
    if kw.pop("padding", False):
        pad = np.zeros((2, 7), bool)
        pad[1, 4:] = True
        kw["src_key_padding_mask"] = pad
    pairs = {"out": (tiled(x, **kw), std(x, **kw)), "dx": (tiled.backward(dy), std.backward(dy))}
    for (name, p), q in zip(tiled.named_parameters(), std.parameters()):
        pairs[name] = (p.grad, q.grad)
    assert_close(pairs)


@pytest.mark.parametrize("extras", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("masks", ["none", "causal_bool", "causal_bool+padding", "per_head+padding"])
def test_mha_tiled_equals_standard_with_bias_kv_and_zero_attn(extras, masks):
    """The appended keys (add_bias_kv, add_zero_attn) are attended by every query on the tiled path too
    (a causal mask does not hide them), and bias_k/bias_v get the same gradients."""
    from numpy_transformer.testing import make_masks
    rng = np.random.default_rng(4)
    b, s, d, h = 2, 5, 8, 2
    mods = [nt.MultiheadAttention(d, h, add_bias_kv=extras[0], add_zero_attn=extras[1], dtype=np.float64, seed=2,
                                  attention=a, block_size=2) for a in ("tiled", "standard")]
    x, dy = rng.standard_normal((b, s, d)), rng.standard_normal((b, s, d))
    am, kpm, causal = make_masks(masks, b, h, s, s, np.float64, rng)
    outs = [m(x, x, x, attn_mask=am, key_padding_mask=kpm, is_causal=causal, need_weights=False)[0] for m in mods]
    grads = [m.backward(dy, sum_inputs=True) for m in mods]
    pairs = {"out": tuple(outs), "dx": tuple(grads)}
    for (name, p), q in zip(mods[0].named_parameters(), mods[1].parameters()):
        pairs[name] = (p.grad, q.grad)
    assert_close(pairs)


def test_tiled_module_refuses_need_weights():
    mha = nt.MultiheadAttention(8, 2, attention="tiled", dtype=np.float64)
    x = np.zeros((1, 3, 8))
    with pytest.raises(ValueError, match="need_weights=False"):
        mha(x, x, x)
    out, w = mha(x, x, x, need_weights=False)
    assert w is None and out.shape == x.shape
    with pytest.raises(ValueError, match="attention must be"):
        nt.MultiheadAttention(8, 2, attention="fast")
