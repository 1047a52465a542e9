"""``nt.trace`` inside the attention backward: the recorded dP, dA (scores), dq, dk, dv are the
gradients torch's autograd gives those intermediate tensors (``retain_grad``) on the same inputs, for
``MultiheadAttention`` (masks, cross-attention) and ``GroupedQueryAttention`` (grouped heads, RoPE, a
bias); the residual stream and the by-layer health flags (vanishing, exploding, a dead head)."""

import numpy as np
import pytest

import numpy_transformer as nt

torch = pytest.importorskip("torch")

from reference_torch.nn.rotary import rope as torch_rope  # noqa: E402

TOL = 1e-10


def _rel(ours, ref):
    ref = ref.detach().numpy()
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-300))


def _check(t, name, expected):
    """Every recorded backward intermediate of attention ``name`` against torch's retained grads."""
    suffix = {"d probs": ".softmax", "d scores": ".scores (q k^T / sqrt(Dh))", "dq": ".q (heads)",
              "dk": ".k (heads)", "dv": ".v (heads)"}
    errors = {}
    for what, ref in expected.items():
        r = t.get(name + suffix[what], "backward")
        assert r.array.shape == tuple(ref.shape), (what, r.array.shape, ref.shape)
        errors[what] = _rel(r.array, ref.grad)
        assert np.isclose(r.norm, float(ref.grad.norm()), rtol=1e-10), what
    assert max(errors.values()) < TOL, errors
    return errors


def _torch_mha(sd, query, key, value, h, dout, kpm=None, attn_mask=None):
    """Multi-head attention written out in torch, every intermediate retained."""
    tt = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)                    # noqa: E731
    w, bias = tt(sd["in_proj_weight"]), tt(sd["in_proj_bias"])
    xq, xk, xv = (tt(a).requires_grad_() for a in (query, key, value))
    b, s, d = xq.shape
    t = xk.shape[1]
    dh = d // h
    wq, wk, wv = w.chunk(3)
    bq, bk, bv = bias.chunk(3)
    q = (xq @ wq.T + bq).view(b, s, h, dh).transpose(1, 2)
    k = (xk @ wk.T + bk).view(b, t, h, dh).transpose(1, 2)
    v = (xv @ wv.T + bv).view(b, t, h, dh).transpose(1, 2)
    scores = (q / dh ** 0.5) @ k.transpose(-1, -2)                                       # (B, H, S, T)
    add = torch.zeros(b, 1, s, t, dtype=torch.float64)
    if attn_mask is not None:
        am = torch.tensor(attn_mask)
        add = add + (torch.where(am, -torch.inf, 0.0) if am.dtype == torch.bool else am.double())
    if kpm is not None:
        add = add + torch.where(torch.tensor(kpm), -torch.inf, 0.0)[:, None, None, :]
    probs = torch.softmax(scores + add, dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(b, s, d)
    out = ctx @ tt(sd["out_proj.weight"]).T + tt(sd["out_proj.bias"])
    for a in (q, k, v, scores, probs):
        a.retain_grad()
    out.backward(tt(dout))
    return out, {"d probs": probs, "d scores": scores, "dq": q, "dk": k, "dv": v}


@pytest.mark.parametrize("case", ["self", "self+masks", "cross+masks"])
def test_mha_backward_intermediates_equal_torch_autograd(case):
    rng = np.random.default_rng(3)
    b, s, t, d, h = 2, 5, 7 if case.startswith("cross") else 5, 12, 3
    m = nt.MultiheadAttention(d, h, dtype=np.float64, seed=1)
    m.in_proj_bias.data[...] = rng.standard_normal(3 * d)
    m.out_proj.bias.data[...] = rng.standard_normal(d)
    x = rng.standard_normal((b, s, d))
    key = value = x
    if case.startswith("cross"):
        key, value = rng.standard_normal((b, t, d)), rng.standard_normal((b, t, d))
    kpm = attn_mask = None
    if case.endswith("masks"):
        kpm = np.zeros((b, t), bool)
        kpm[1, -2:] = True                                                    # padded keys of row 1
        attn_mask = rng.standard_normal((s, t))                               # a float mask, added
        attn_mask[0, 1] = -np.inf
    dout = rng.standard_normal((b, s, d))
    with nt.trace(m, keep_arrays=True) as tr:
        out, _ = m(x, key, value, key_padding_mask=kpm, attn_mask=attn_mask)
        m.backward(dout)
    ref_out, expected = _torch_mha(m.state_dict(), x, key, value, h, dout, kpm, attn_mask)
    assert _rel(out, ref_out) < TOL
    _check(tr, "MultiheadAttention", expected)
    # the torch route written out above is torch's own module
    tm = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=torch.float64)
    tm.load_state_dict({k: torch.tensor(v) for k, v in m.state_dict().items()})
    tt = lambda a: None if a is None else torch.tensor(a)                      # noqa: E731
    ref2, _ = tm(tt(x), tt(key), tt(value), key_padding_mask=tt(kpm), attn_mask=tt(attn_mask))
    assert _rel(ref_out.detach().numpy(), ref2) < TOL


@pytest.mark.parametrize("hkv, rope, bias", [(2, False, False), (1, True, True), (4, True, False)])
def test_gqa_backward_intermediates_equal_torch_autograd(hkv, rope, bias):
    rng = np.random.default_rng(5)
    b, s, d, h = 2, 6, 16, 4
    m = nt.GroupedQueryAttention(d, h, num_kv_heads=hkv, bias=True, rope=rope, dtype=np.float64, seed=2)
    x = rng.standard_normal((b, s, d))
    attn_bias = rng.standard_normal((h, s, s)) if bias else None
    dout = rng.standard_normal((b, s, d))
    with nt.trace(m, keep_arrays=True) as tr:
        out = m(x, attn_bias=attn_bias, is_causal=True)
        m.backward(dout)
    tt = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)            # noqa: E731
    sd = {k: tt(v) for k, v in m.state_dict().items()}
    xt = tt(x).requires_grad_()
    dh, g = d // h, h // hkv
    lin = lambda n, a: a @ sd[n + ".weight"].T + sd[n + ".bias"]               # noqa: E731
    q = lin("q_proj", xt).view(b, s, h, dh).transpose(1, 2)
    k = lin("k_proj", xt).view(b, s, hkv, dh).transpose(1, 2)
    v = lin("v_proj", xt).view(b, s, hkv, dh).transpose(1, 2)
    if rope:
        q, k = torch_rope(q, None), torch_rope(k, None)
    scores = (q @ k.repeat_interleave(g, dim=1).transpose(-1, -2)) / dh ** 0.5  # (B, H, S, S)
    add = torch.triu(torch.full((s, s), -torch.inf, dtype=torch.float64), 1)
    if bias:
        add = add + tt(attn_bias)
    probs = torch.softmax(scores + add, dim=-1)
    ctx = (probs @ v.repeat_interleave(g, dim=1)).transpose(1, 2).reshape(b, s, d)
    ref = lin("o_proj", ctx)
    for a in (q, k, v, scores, probs):
        a.retain_grad()
    ref.backward(tt(dout))
    assert _rel(out, ref) < TOL
    errors = _check(tr, "GroupedQueryAttention", {"d probs": probs, "d scores": scores, "dq": q, "dk": k,
                                                  "dv": v})
    assert tr.get("GroupedQueryAttention.k (heads)", "backward").shape == (b, hkv, s, dh)
    assert set(errors) == {"d probs", "d scores", "dq", "dk", "dv"}


def test_no_trace_no_recording_and_identical_gradients():
    """The recording changes nothing: the same gradients bit for bit with and without a trace."""
    rng = np.random.default_rng(0)
    x, dout = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))
    grads = []
    for traced in (False, True):
        m = nt.MultiheadAttention(8, 2, dtype=np.float64, seed=0)
        with (nt.trace(m) if traced else _null()):
            m(x, x, x)
            dx = m.backward(dout)
        grads.append([dx, m.in_proj_weight.grad, m.out_proj.weight.grad])
    for a, b_ in zip(*grads):
        for u, w in zip(a if isinstance(a, tuple) else (a,), b_ if isinstance(b_, tuple) else (b_,)):
            assert np.array_equal(u, w)


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _encoder(norm_first=False, layers=3):
    layer = nt.TransformerEncoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first, dtype=np.float64, seed=0)
    return nt.TransformerEncoder(layer, layers)


def _traced(enc, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 5, 16))
    with nt.trace(enc) as t:
        y = enc(x)
        enc.backward(rng.standard_normal(y.shape))
    return t


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_streams_and_layer_norms_recorded_healthy(norm_first):
    t = _traced(_encoder(norm_first))
    norms = t.layer_grad_norms()
    assert list(norms) == ["layers.0", "layers.1", "layers.2"]
    assert all(np.isfinite(v) and v > 0 for v in norms.values())
    for i in range(3):
        r = t.get(f"layers.{i} residual (between self_attn and feed-forward)", "backward")
        assert r.shape == (2, 5, 16) and r.norm > 0
    assert not t.problems(), t.report()


def test_flags_a_constructed_vanishing_gradient():
    """A post-LN layer whose norm1 gain is 1e-6 multiplies the gradient through it by ~1e-6: the layers
    below the top get flagged vanishing, the top one (the reference) does not."""
    enc = _encoder(norm_first=False)
    enc.layers[1].norm1.weight.data[...] = 1e-6
    t = _traced(enc)
    flagged = {r.name for r in t.problems() if "vanishing gradient" in r.flag}
    assert flagged == {"layers.0", "layers.1"}, t.report()
    assert "x the top layer's (layers.2" in t.get("layers.0", "backward").flag


def test_flags_a_constructed_exploding_gradient():
    """A pre-LN layer whose feed-forward output weights are 1e4 x larger multiplies the gradient through
    its feed-forward branch by ~1e4 (the norm before it sees a normal-sized stream): that layer's input
    gradient, and, through the residual, every one below, are flagged exploding."""
    enc = _encoder(norm_first=True)
    enc.layers[1].linear2.weight.data[...] *= 1e4
    t = _traced(enc)
    flagged = {r.name for r in t.problems() if "exploding gradient:" in r.flag}
    assert flagged == {"layers.0", "layers.1"}, t.report()


def test_flags_a_head_whose_gradient_is_exactly_zero():
    """out_proj ignores head 1 (its columns zero): every gradient inside that head is exactly zero."""
    m = nt.MultiheadAttention(8, 2, dtype=np.float64, seed=0)
    m.out_proj.weight.data[:, 4:] = 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8))
    with nt.trace(m) as t:
        m(x, x, x)
        m.backward(rng.standard_normal((2, 4, 8)))
    for suffix in (".softmax", ".scores (q k^T / sqrt(Dh))", ".q (heads)", ".k (heads)", ".v (heads)"):
        assert "gradient exactly zero in head(s) 1" in t.get("MultiheadAttention" + suffix, "backward").flag


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_records_both_residual_streams(norm_first):
    layer = nt.TransformerDecoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first, dtype=np.float64, seed=0)
    rng = np.random.default_rng(0)
    tgt, memory = rng.standard_normal((2, 4, 16)), rng.standard_normal((2, 6, 16))
    with nt.trace(layer) as t:
        y = layer(tgt, memory)
        layer.backward(rng.standard_normal(y.shape))
    for where in ("between multihead_attn and feed-forward", "between self_attn and multihead_attn"):
        r = t.get(f"TransformerDecoderLayer residual ({where})", "backward")
        assert r.shape == (2, 4, 16) and r.norm > 0
    assert t.get("multihead_attn.k (heads)", "backward").shape == (2, 4, 6, 4)
