"""The checks of docs/derivations.md's blocks for the decoder and what generation uses: the decoder, tied
embeddings, the KV cache, RoPE, ALiBi, relative position bias, grouped-query attention and score biases
(registered in ``CHECKS``).
"""

from __future__ import annotations

import numpy as np

import numpy_transformer.functional as F
from numpy_transformer import nn
from tests.project.derivation_registry import FD_TOL, _mha_params, check, close, rel_err


def _directional(loss, x, u, step=1e-3):
    """Richardson-extrapolated central difference of ``loss`` at ``x`` along ``u`` (error O(step^4))."""
    central = [(loss(x + e * u) - loss(x - e * u)) / (2 * e) for e in (step, step / 2)]
    return (4 * central[1] - central[0]) / 3


@check("decoder")
def _check_decoder(ns):
    rng = np.random.default_rng(17)
    # the causal mask's backward: ours, and exact zeros above the diagonal
    b, h, s, dh = 2, 2, 5, 3
    q, k, v, do = (rng.standard_normal((b, h, s, dh)) for _ in range(4))
    _, cache = F.scaled_dot_product_attention_forward(q, k, v, is_causal=True)
    dq, dk, dv = F.scaled_dot_product_attention_backward(do, cache)
    ddq, ddk, ddv, da = ns["causal_attention_grads"](do, q, k, v)
    close("causal", dq=(ddq, dq), dk=(ddk, dk), dv=(ddv, dv))
    assert np.all(da[..., F.causal_mask(s)] == 0), "masked scores must get exactly zero gradient"
    one = np.zeros_like(do)
    one[..., 2, :] = do[..., 2, :]                                         # a loss on query 2 alone
    _, dk2, dv2, _ = ns["causal_attention_grads"](one, q, k, v)
    assert np.all(dk2[..., 3:, :] == 0) and np.all(dv2[..., 3:, :] == 0), "keys after 2 get nothing"
    layer = nn.TransformerDecoderLayer(6, 2, 8, dropout=0.0, dtype=np.float64, seed=3)
    tgt, mem = rng.standard_normal((2, s, 6)), rng.standard_normal((2, 4, 6))
    dy = np.zeros((2, s, 6))
    dy[:, 2] = rng.standard_normal((2, 6))
    layer(tgt, mem, tgt_is_causal=True)
    dtgt, _ = layer.backward(dy)
    assert np.all(dtgt[:, 3:] == 0) and np.all(np.abs(dtgt[:, :3]).max(axis=-1) > 0), "causal in the layer"

    # cross-attention's two paths, against finite differences
    bt, s2, t2, d, heads = 2, 3, 4, 6, 2
    w_in, b_in, w_o, b_o = _mha_params(rng, d)
    x, m = rng.standard_normal((bt, s2, d)), rng.standard_normal((bt, t2, d))
    dy = rng.standard_normal((bt, s2, d))
    mask = rng.random((s2, t2)) < 0.3
    mask[:, 0] = False

    def loss(x_, m_):
        out, _, _ = F.multi_head_attention_forward(x_, m_, m_, heads, w_in, b_in, w_o, b_o, attn_mask=mask)
        return float(np.sum(dy * out))
    dx, dm = ns["cross_attention_grads"](dy, x, m, heads, w_in, b_in, w_o, b_o, mask)
    dirs_x = [rng.standard_normal(x.shape) for _ in range(3)]
    dirs_m = [rng.standard_normal(m.shape) for _ in range(3)]
    fd_x = np.array([_directional(lambda x_: loss(x_, m), x, u) for u in dirs_x])
    fd_m = np.array([_directional(lambda m_: loss(x, m_), m, u) for u in dirs_m])
    close("finite differences", tol=FD_TOL, dX=(np.array([np.sum(dx * u) for u in dirs_x]), fd_x),
          dM=(np.array([np.sum(dm * u) for u in dirs_m]), fd_m))
    _, _, cache = F.multi_head_attention_forward(x, m, m, heads, w_in, b_in, w_o, b_o, attn_mask=mask)
    dk_only = F.multi_head_attention_backward(dy, cache)[1]
    assert rel_err([np.sum(dk_only * u) for u in dirs_m], fd_m) > 1e-3, "the key path alone must not pass"

    # the memory gradient: a sum over the layers, against finite differences of a 3-layer decoder
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, heads, 8, dropout=0.0, dtype=np.float64, seed=4), 3,
                                norm=nn.LayerNorm(d, dtype=np.float64), seed=5)
    for p in dec.parameters():
        p.data += 0.3 * rng.standard_normal(p.shape)                       # layers differ from the template
    tgt, dy = rng.standard_normal((bt, s2, d)), rng.standard_normal((bt, s2, d))
    dec(tgt, m, tgt_is_causal=True)
    g = dec.norm.backward(dy)
    per_layer = []
    for lay in reversed(list(dec.layers)):                                 # each layer's own share
        g, dm_l = lay.backward(g)
        per_layer.append(dm_l)
    dm = ns["memory_grad"](per_layer)
    loss_m = lambda m_: float(np.sum(dy * dec(tgt, m_, tgt_is_causal=True)))
    fd = np.array([_directional(loss_m, m, u) for u in dirs_m])
    close("memory, finite differences", tol=FD_TOL, dM=(np.array([np.sum(dm * u) for u in dirs_m]), fd))
    for i, share in enumerate(per_layer):
        assert rel_err([np.sum(share * u) for u in dirs_m], fd) > 1e-3, f"layer {i}'s share alone must not pass"
    dec(tgt, m, tgt_is_causal=True)
    close("the module's dmemory", dM=(dm, dec.backward(dy)[1]))


@check("tied_embedding")
def _check_tied_embedding(ns):
    """One Parameter as an Embedding's table and a Linear head's weight, a LayerNorm between them (nt.GPT
    itself: tests/models/test_gpt.py, tied grad = untied embedding grad + untied head grad)."""
    rng = np.random.default_rng(17)
    v, d, n = 7, 5, 9
    ids = rng.integers(0, v, size=n)
    ids[-1] = ids[0]
    emb = nn.Embedding(v, d, dtype=np.float64, seed=0)
    head = nn.Linear(d, v, bias=False, dtype=np.float64, seed=1)
    head.weight = emb.weight
    ln = nn.LayerNorm(d, dtype=np.float64)
    h = ln(emb(ids))
    dlogits = rng.standard_normal(head(h).shape)
    de = ln.backward(head.backward(dlogits))
    emb.backward(de)
    close("Embedding + tied Linear", dW=(ns["tied_grad"](ids, h, dlogits, de, v), emb.weight.grad))


@check("kv_cache")
def _check_kv_cache(ns):
    rng = np.random.default_rng(18)
    for s, dh in [(1, 3), (6, 4)]:
        q, k, v = (rng.standard_normal((s, dh)) for _ in range(3))
        full, _ = F.scaled_dot_product_attention_forward(q, k, v, is_causal=True)
        close(f"S={s}: cached steps vs the causal full forward", out=(ns["decode_with_cache"](q, k, v), full))


@check("rope")
def _check_rope(ns):
    rng = np.random.default_rng(20)
    for lead, s, dh, base, inter in [((), 1, 2, 10000.0, False), ((2, 3), 5, 8, 10000.0, False),
                                     ((3,), 4, 6, 500.0, True), ((2,), 3, 4, 10000.0, True)]:
        x, dout = rng.standard_normal((2,) + lead + (s, dh))
        pos = rng.integers(0, 200, size=s)
        out, cache = F.rope_forward(x, pos, base, inter)
        close(f"{lead + (s, dh)}, interleaved={inter}", out=(ns["rope_rotate"](x, pos, base, inter), out),
              dx=(ns["rope_grad"](dout, pos, base, inter), F.rope_backward(dout, cache)))


@check("alibi")
def _check_alibi(ns):
    for h in range(1, 13):
        for s, t in [(1, 1), (4, 4), (1, 6), (3, 5)]:
            close(f"H={h}, S={s}, T={t}", bias=(ns["alibi"](h, s, t), F.alibi_bias(h, s, t)))


@check("relative_position_bias")
def _check_relative_position_bias(ns):
    rng = np.random.default_rng(21)
    for nb, md, bidirectional, s, t in [(32, 128, True, 7, 150), (32, 128, False, 150, 150), (8, 6, True, 5, 9),
                                       (6, 5, False, 1, 12)]:
        w = rng.standard_normal((nb, 3))
        buckets = F.relative_position_bucket(F.relative_positions(s, t), bidirectional, nb, md)
        bias, cache = F.relative_position_bias_forward(w, buckets)
        dbias = rng.standard_normal(bias.shape)
        b, dw = ns["t5_bias_and_grad"](w, s, t, bidirectional, md, dbias)
        close(f"NB={nb}, max_distance={md}, bidirectional={bidirectional}, S={s}, T={t}", bias=(b, bias),
              dW=(dw, F.relative_position_bias_backward(dbias, cache)))


@check("gqa")
def _check_gqa(ns):
    rng = np.random.default_rng(20)
    for hq, hkv in [(4, 2), (6, 1), (3, 3)]:                   # grouped, multi-query, one head per query head
        q = rng.standard_normal((2, hq, 5, 4))
        k, v = rng.standard_normal((2, hkv, 6, 4)), rng.standard_normal((2, hkv, 6, 3))
        out, cache = F.scaled_dot_product_attention_forward(q, k, v, enable_gqa=True)
        do = rng.standard_normal(out.shape)
        dq, dk, dv = F.scaled_dot_product_attention_backward(do, cache)
        ddq, ddk, ddv = ns["gqa_backward"](do, q, k, v)
        close(f"Hq={hq}, Hkv={hkv}", out=(ns["gqa_forward"](q, k, v), out), dq=(ddq, dq), dk=(ddk, dk),
              dv=(ddv, dv))


@check("score_bias")
def _check_score_bias(ns):
    """One bias b (H, S, T) added in two layers: db = the layers' dA summed over layers and batch, equal
    to torch's autograd through the same two layers, and to F.sdpa_backward(attn_mask_grad=True)."""
    import torch
    rng = np.random.default_rng(25)
    n, h, s, dh = 2, 3, 4, 5
    b = rng.standard_normal((h, s, s))
    layers = [[rng.standard_normal((n, h, s, dh)) for _ in range(4)] for _ in range(2)]   # q, k, v, dO
    dAs = [ns["score_bias_layer"](q, k, v, b, dO) for q, k, v, dO in layers]
    db = ns["bias_grad_over_layers"](dAs)
    bt = torch.tensor(b, requires_grad=True)
    total = 0
    for q, k, v, dO in layers:
        out = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)), attn_mask=bt)
        total = total + (out * torch.tensor(dO)).sum()
    total.backward()
    ours = 0
    for q, k, v, dO in layers:
        _, cache = F.scaled_dot_product_attention_forward(q, k, v, attn_mask=b)
        ours = ours + F.scaled_dot_product_attention_backward(dO, cache, attn_mask_grad=True)[3]
    close("two layers, one bias", db=(db, bt.grad.numpy()), sdpa=(ours, bt.grad.numpy()))
