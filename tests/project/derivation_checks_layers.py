"""The checks of docs/derivations.md's blocks for attention and the layers built on it: attention, flash
(tiled) attention, multi-head attention, the residual, positional and token embeddings, the encoder layer
(registered in ``CHECKS``).
"""

from __future__ import annotations

import numpy as np
from _compare import assert_close

import numpy_transformer.functional as F
from numpy_transformer import nn
from tests.project.derivation_registry import FD_TOL, TOL, _mha_params, check, close, rel_err


@check("attention")
def _check_attention(ns):
    rng = np.random.default_rng(10)
    b, h, s, t, dh, dv = 2, 3, 5, 6, 4, 3
    q = rng.standard_normal((b, h, s, dh))
    k = rng.standard_normal((b, h, t, dh))
    v = rng.standard_normal((b, h, t, dv))
    do = rng.standard_normal((b, h, s, dv))
    bool_mask = rng.random((b, h, s, t)) < 0.3
    bool_mask[0, 1, 2, :] = True                                           # a fully masked row
    bool_mask[..., 0] = False
    bool_mask[0, 1, 2, 0] = True
    float_mask = rng.standard_normal((s, t))
    bool_mask = ~bool_mask                          # torch's function convention: True = takes part
    cases = [("none", None, 0.0), ("bool", bool_mask, 0.0), ("bool+dropout", bool_mask, 0.25),
             ("float+dropout", float_mask, 0.4)]
    for name, mask, p in cases:
        _, cache = F.scaled_dot_product_attention_forward(q, k, v, attn_mask=mask, dropout_p=p,
                                                          rng=np.random.default_rng(11))
        dq, dk, dvv = F.scaled_dot_product_attention_backward(do, cache)
        if mask is None:
            additive = np.zeros((s, t))
        elif mask.dtype == bool:
            additive = np.where(mask, 0.0, -np.inf)
        else:
            additive = mask
        ddq, ddk, ddv = ns["attention_grads"](do, q, k, v, additive, cache.dropout.mask, p)
        close(name, dq=(ddq, dq), dk=(ddk, dk), dv=(ddv, dvv))
        if mask is bool_mask:
            assert np.all(ddq[0, 1, 2] == 0) and np.all(dq[0, 1, 2] == 0), "fully masked row: dQ must be 0"
    qs = rng.standard_normal((b, h, s, dh))                                # causal, S == T
    ks, vs = rng.standard_normal((b, h, s, dh)), rng.standard_normal((b, h, s, dv))
    _, cache = F.scaled_dot_product_attention_forward(qs, ks, vs, is_causal=True)
    causal = np.where(F.causal_mask(s), -np.inf, 0.0)
    ddq, ddk, ddv = ns["attention_grads"](do, qs, ks, vs, causal)
    dq, dk, dvv = F.scaled_dot_product_attention_backward(do, cache)
    close("causal", dq=(ddq, dq), dk=(ddk, dk), dv=(ddv, dvv))


@check("flash")
def _check_flash(ns):
    rng = np.random.default_rng(15)
    s, t, dh, dv = 7, 10, 4, 3
    q, k = rng.standard_normal((s, dh)), rng.standard_normal((t, dh))
    v, do = rng.standard_normal((t, dv)), rng.standard_normal((s, dv))
    out, cache = F.flash_attention_forward(q, k, v, block_q=3, block_k=4)
    dq, dk, dvv = F.flash_attention_backward(do, cache)
    for block in (3, 4, 10):                                   # tiles that do and do not divide T
        o, lse = ns["flash_forward"](q, k, v, block)
        close(f"block {block}", out=(o, out), lse=(lse, cache.lse))
        ddq, ddk, ddv = ns["flash_backward"](do, q, k, v, o, lse, block)
        close(f"block {block}", dq=(ddq, dq), dk=(ddk, dk), dv=(ddv, dvv))
    # and both agree with the standard path
    o2, c2 = F.scaled_dot_product_attention_forward(q, k, v)
    close("standard", out=(out, o2))
    sq, sk, sv = F.scaled_dot_product_attention_backward(do, c2)
    close("standard", dq=(dq, sq), dk=(dk, sk), dv=(dvv, sv))


@check("multi_head")
def _check_multi_head(ns):
    rng = np.random.default_rng(12)
    b, s, t, d, h = 2, 4, 5, 6, 3
    w_in, b_in, w_o, b_o = _mha_params(rng, d)
    xq, xk, xv = rng.standard_normal((b, s, d)), rng.standard_normal((b, t, d)), rng.standard_normal((b, t, d))
    dy = rng.standard_normal((b, s, d))
    mask = rng.random((s, t)) < 0.3
    mask[1] = True                                                         # a fully masked row
    for m in (None, mask):
        y, _, cache = F.multi_head_attention_forward(xq, xk, xv, h, w_in, b_in, w_o, b_o, attn_mask=m)
        dxq, dxk, dxv, grads = F.multi_head_attention_backward(dy, cache)
        dy_doc, (ddxq, ddxk, ddxv, ddw_in, ddb_in, ddw_o, ddb_o) = ns["mha_forward_backward"](
            dy, xq, xk, xv, h, w_in, b_in, w_o, b_o, m)
        close(f"mask={m is not None}", Y=(dy_doc, y), dXq=(ddxq, dxq), dXk=(ddxk, dxk), dXv=(ddxv, dxv),
              dW_in=(ddw_in, grads["in_proj_weight"]), db_in=(ddb_in, grads["in_proj_bias"]),
              dW_o=(ddw_o, grads["out_proj.weight"]), db_o=(ddb_o, grads["out_proj.bias"]))
    split, merge, wrong = ns["split_heads"], ns["merge_heads"], ns["split_heads_reshape_only"]
    x = rng.standard_normal((b, s, d))
    yh = rng.standard_normal((b, h, s, d // h))
    assert split(x, h).shape == (b, h, s, d // h)
    assert np.array_equal(split(x, h)[:, 1, 2], x[:, 2, d // h:2 * (d // h)]), "head 1 of position 2"
    assert np.array_equal(merge(split(x, h)), x), "merge must invert split"
    assert np.array_equal(np.sort(split(x, h), axis=None), np.sort(x, axis=None)), "split is a permutation"
    close("adjoint", inner=(np.sum(split(x, h) * yh), np.sum(x * merge(yh))))
    assert np.array_equal(np.sort(wrong(x, h), axis=None), np.sort(x, axis=None)), "reshape-only permutes too"
    # ... but it is the wrong permutation: the forward differs from ours (and torch's).
    q, _ = F.linear_forward(xq, w_in[:d], b_in[:d])
    k, _ = F.linear_forward(xk[:, :s], w_in[d:2 * d], b_in[d:2 * d])
    v, _ = F.linear_forward(xv[:, :s], w_in[2 * d:], b_in[2 * d:])
    o, _ = F.scaled_dot_product_attention_forward(wrong(q, h), wrong(k, h), wrong(v, h))
    y_wrong, _ = F.linear_forward(o.reshape(b, s, d), w_o, b_o)
    y_ok, _, _ = F.multi_head_attention_forward(xq, xk[:, :s], xv[:, :s], h, w_in, b_in, w_o, b_o)
    assert rel_err(y_wrong, y_ok) > 1e-2, "the reshape-only split should change the output"


@check("residual")
def _check_residual(ns):
    rng = np.random.default_rng(13)
    b, s, d, h = 2, 4, 6, 2
    w_in, b_in, w_o, b_o = _mha_params(rng, d)
    x = rng.standard_normal((b, s, d))
    dy = rng.standard_normal((b, s, d))
    mask = F.causal_mask(s)

    def loss(x_):                                                          # L = <dy, x + MHA(x, x, x)>
        out, _, _ = F.multi_head_attention_forward(x_, x_, x_, h, w_in, b_in, w_o, b_o, attn_mask=mask)
        return float(np.sum(dy * (x_ + out)))

    def directional(u, step=1e-3):                                         # Richardson: error O(step^4)
        central = [(loss(x + e * u) - loss(x - e * u)) / (2 * e) for e in (step, step / 2)]
        return (4 * central[1] - central[0]) / 3

    dx = ns["residual_grad"](dy, lambda g: ns["self_attention_grad"](g, x, h, w_in, b_in, w_o, b_o, mask))
    dirs = [rng.standard_normal(x.shape) for _ in range(3)]
    fd = np.array([directional(u) for u in dirs])
    close("finite differences", tol=FD_TOL, directional=(np.array([np.sum(dx * u) for u in dirs]), fd))
    _, _, cache = F.multi_head_attention_forward(x, x, x, h, w_in, b_in, w_o, b_o, attn_mask=mask)
    dq_only = dy + F.multi_head_attention_backward(dy, cache)[0]
    assert rel_err([np.sum(dq_only * u) for u in dirs], fd) > 1e-3, "query path alone must not pass"


@check("positional")
def _check_positional(ns):
    rng = np.random.default_rng(14)
    b, s, d, max_len = 3, 5, 4, 8
    x, dy = rng.standard_normal((b, s, d)), rng.standard_normal((b, s, d))
    pe = nn.PositionalEncoding(d, max_len=max_len, dtype=np.float64)
    pe(x)
    close("sinusoidal", dx=(ns["sinusoidal_input_grad"](dy), pe.backward(dy)))
    dp = ns["learned_position_grad"](dy, max_len)
    table = rng.standard_normal((max_len, d))
    ids = np.broadcast_to(np.arange(s), (b, s))                            # every position id B times
    _, cache = F.embedding_forward(ids, table)
    close("learned = scatter-add of repeated ids", dP=(dp, F.embedding_backward(dy, cache)))
    emb = nn.Embedding(max_len, d, dtype=np.float64, seed=0)               # the model's way
    emb(np.arange(s))
    emb.backward(dy.sum(axis=0))
    close("learned = lookup of arange(S), batch-summed", dP=(dp, emb.weight.grad))
    lpe = nn.LearnedPositionalEmbedding(max_len, d, dtype=np.float64, seed=0)   # the models' pos_embed
    lpe(x)
    close("nn.LearnedPositionalEmbedding", dx=(ns["sinusoidal_input_grad"](dy), lpe.backward(dy)),
          dP=(dp, lpe.weight.grad))


@check("token_embedding")
def _check_token_embedding(ns):
    rng = np.random.default_rng(15)
    v, d = 7, 4
    ids = np.array([[1, 3, 3, 6, 1], [0, 3, 2, 2, 5]])
    dy = rng.standard_normal(ids.shape + (d,))
    te = nn.TokenEmbedding(v, d, dtype=np.float64, seed=0)
    te(ids)
    te.backward(dy)
    close(dW=(ns["token_embedding_grad"](dy, ids, v), te.embedding.weight.grad))


@check("encoder_layer")
def _check_encoder_layer(ns):
    b, s, d, h, f, p = 2, 5, 8, 2, 12, 0.2
    for seed, (norm_first, activation) in enumerate([(False, "relu"), (True, "relu"), (False, "gelu"),
                                                     (True, "gelu")]):
        rng = np.random.default_rng(100 + seed)
        layer = nn.TransformerEncoderLayer(d, h, dim_feedforward=f, dropout=p, activation=activation,
                                           norm_first=norm_first, dtype=np.float64, seed=seed)
        sd = layer.state_dict()
        for name in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "self_attn.in_proj_bias",
                     "self_attn.out_proj.bias"):
            sd[name][...] = rng.standard_normal(sd[name].shape)            # make every term visible
        x, dy = rng.standard_normal((b, s, d)), rng.standard_normal((b, s, d))
        causal = F.causal_mask(s)
        padding = np.zeros((b, s), dtype=bool)
        padding[1, -2:] = True
        y = layer(x, src_mask=causal, src_key_padding_mask=padding)
        dx = layer.backward(dy)
        keep = {"self_attn": layer.self_attn.last_mask, "dropout1": layer.dropout1.last_mask,
                "dropout": layer.dropout.last_mask, "dropout2": layer.dropout2.last_mask}
        assert all(m is not None for m in keep.values())
        params = {k: v.copy() for k, v in layer.state_dict().items()}
        y_doc, dx_doc, grads_doc = ns["encoder_layer"](x, dy, params, h, norm_first, activation, p, keep,
                                                       attn_mask=causal, key_padding_mask=padding)
        ours = dict(layer.named_parameters())
        assert set(grads_doc) == set(ours), (sorted(grads_doc), sorted(ours))
        pairs = {"y": (y_doc, y), "dx": (dx_doc, dx)}
        pairs.update({name: (grads_doc[name], prm.grad) for name, prm in ours.items()})
        assert_close(pairs, tol=TOL, context=f"norm_first={norm_first} {activation}: ")
