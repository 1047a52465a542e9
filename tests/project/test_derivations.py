"""docs/derivations.md is executable: every ```python block there is run and checked against our code.

Convention (stated at the top of the doc): a block starts with ``# check: NAME``, runs in a fresh
namespace holding only ``np`` and ``F`` (numpy_transformer.functional), and defines functions; the
check registered here under NAME calls them on random float64 inputs and compares with the library
to a normwise relative 1e-12 (the residual check uses finite differences, to 1e-8).

Meta-tests make the doc trustworthy:
* every block has a check and every check a block (no block silently skipped);
* every check *fails* when the block's outputs are perturbed by one part in a million (no check
  passes vacuously);
* every ``*_backward`` in ``functional.__all__`` is linked from the doc;
* every code link resolves to a function that exists, and every code excerpt quoted after it appears
  verbatim (whitespace aside) in that function's source;
* every in-page anchor matches a heading.
"""

from __future__ import annotations

import ast
import re
import types

import numpy as np
import pytest
from _compare import assert_close
from _paths import REPO_ROOT

import numpy_transformer.functional as F
from numpy_transformer import nn

ROOT = REPO_ROOT
DOC = ROOT / "docs" / "derivations.md"
TOL = 1e-12                    # float64, normwise relative
FD_TOL = 1e-8                  # Richardson-extrapolated central differences


# --------------------------------------------------------------------------------------------------
# block extraction and execution
# --------------------------------------------------------------------------------------------------

_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_LABEL = re.compile(r"#\s*check:\s*(\w+)\s*$")


def doc_text():
    return DOC.read_text(encoding="utf-8")


def doc_blocks():
    """[(label or None, source, line number)] for every ```python block, in order."""
    text = doc_text()
    out = []
    for m in _BLOCK.finditer(text):
        src = m.group(1)
        first = src.splitlines()[0] if src.strip() else ""
        label = _LABEL.match(first.strip())
        out.append((label.group(1) if label else None, src, text.count("\n", 0, m.start(1)) + 1))
    return out


def run_block(label):
    """Execute the block named ``label`` in a fresh namespace; return the namespace."""
    matches = [(src, line) for lab, src, line in doc_blocks() if lab == label]
    assert len(matches) == 1, f"expected exactly one block '# check: {label}', found {len(matches)}"
    src, line = matches[0]
    ns = {"np": np, "F": F, "__name__": f"derivations_{label}"}
    code = compile("\n" * (line - 1) + src, str(DOC), "exec")        # tracebacks point at the doc
    exec(code, ns)
    return ns


CHECKS = {}


def check(label):
    def register(fn):
        assert label not in CHECKS, label
        CHECKS[label] = fn
        return fn
    return register


def close(context=None, tol=TOL, **pairs):
    assert_close(pairs, tol=tol, context=f"{context}: " if context else "")


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# --------------------------------------------------------------------------------------------------
# one check per block
# --------------------------------------------------------------------------------------------------

@check("linear")
def _check_linear(ns):
    rng = np.random.default_rng(0)
    for lead in [(7,), (2, 3)]:
        x = rng.standard_normal(lead + (5,))
        w, b = rng.standard_normal((4, 5)), rng.standard_normal(4)
        dy = rng.standard_normal(lead + (4,))
        _, cache = F.linear_forward(x, w, b)
        dx, dw, db = F.linear_backward(dy, cache)
        ddx, ddw, ddb = ns["linear_grads"](dy, x, w)
        close(f"lead {lead}", dx=(ddx, dx), dW=(ddw, dw), db=(ddb, db))


@check("embedding")
def _check_embedding(ns):
    rng = np.random.default_rng(1)
    v, d = 6, 4
    ids = np.array([[0, 2, 2, 5], [2, 1, 0, 2]])                       # repeated ids
    w = rng.standard_normal((v, d))
    dy = rng.standard_normal(ids.shape + (d,))
    for pad in (None, 2, 0):
        _, cache = F.embedding_forward(ids, w, padding_idx=pad)
        close(f"padding_idx={pad}", dW=(ns["embedding_grad"](dy, ids, v, pad), F.embedding_backward(dy, cache)))
    _, cache = F.embedding_forward(ids, w)
    ours = F.embedding_backward(dy, cache)
    assert rel_err(ns["embedding_grad_fancy_index"](dy, ids, v), ours) > 1e-2, \
        "the fancy-index update should lose contributions of repeated ids"
    distinct = np.array([[3, 0], [5, 1]])
    dy2 = rng.standard_normal(distinct.shape + (d,))
    _, cache = F.embedding_forward(distinct, w)
    close("distinct ids", dW=(ns["embedding_grad_fancy_index"](dy2, distinct, v), F.embedding_backward(dy2, cache)))


def _ln_data(rng, eps_list=(1e-5, 0.3)):
    x = 3.0 + 2.0 * rng.standard_normal((2, 3, 8))
    w, b = rng.standard_normal(8), rng.standard_normal(8)
    dy = rng.standard_normal(x.shape)
    return x, w, b, dy, eps_list


@check("layer_norm")
def _check_layer_norm(ns):
    rng = np.random.default_rng(2)
    x, w, b, dy, eps_list = _ln_data(rng)
    for eps in eps_list:
        _, cache = F.layer_norm_forward(x, w, b, eps)
        dx, dw, db = F.layer_norm_backward(dy, cache)
        ddx, ddw, ddb = ns["layer_norm_grads"](dy, x, w, eps)
        close(f"eps={eps}", dx=(ddx, dx), dw=(ddw, dw), db=(ddb, db))
    _, cache = F.layer_norm_forward(x, None, None, 1e-5)                 # no affine part: w = 1
    close("no affine", dx=(ns["layer_norm_grads"](dy, x, np.ones(8), 1e-5)[0], F.layer_norm_backward(dy, cache)[0]))


@check("layer_norm_jacobian")
def _check_layer_norm_jacobian(ns):
    rng = np.random.default_rng(3)
    x, w, b, dy, eps_list = _ln_data(rng)
    for eps in eps_list:
        jac = ns["layer_norm_jacobian"](x, eps)                            # (2, 3, 8, 8)
        assert jac.shape == x.shape + (8,)
        _, cache = F.layer_norm_forward(x, w, b, eps)
        dx = F.layer_norm_backward(dy, cache)[0]
        close(f"eps={eps}", dx=(np.einsum("...jk,...j->...k", jac, dy * w), dx),
              J_symmetric=(jac, np.swapaxes(jac, -1, -2)))


@check("rms_norm")
def _check_rms_norm(ns):
    rng = np.random.default_rng(20)
    grads = ns["rms_norm_grads"]
    for shape, n_axes in [((2, 3, 8), 1), ((2, 3, 4), 2), ((5, 1), 1)]:
        ns_shape = shape[len(shape) - n_axes:]
        x = 1.5 + 2.0 * rng.standard_normal(shape)             # an offset: RMSNorm does not remove it
        w, dy = rng.standard_normal(ns_shape), rng.standard_normal(shape)
        for eps in (1e-5, 0.3):
            _, cache = F.rms_norm_forward(x, w, eps)
            dx, dw = F.rms_norm_backward(dy, cache)
            ddx, ddw = grads(dy, x, w, eps, n_axes)
            close(f"{shape} over {n_axes} axes, eps={eps}", dx=(ddx, dx), dw=(ddw, dw))
        if shape[-1] == 1:                # D = 1 with eps = machine eps: dx is rounding noise in any formula
            continue
        _, cache = F.rms_norm_forward(x, None, None, normalized_shape=ns_shape)    # no weight, eps = machine eps
        dx, dw = F.rms_norm_backward(dy, cache)
        assert dw is None
        close(f"{shape} no weight", dx=(grads(dy, x, np.ones(ns_shape), np.finfo(np.float64).eps, n_axes)[0], dx))


@check("softmax")
def _check_softmax(ns):
    rng = np.random.default_rng(4)
    x = 3.0 * rng.standard_normal((3, 4, 5))
    dy = rng.standard_normal(x.shape)
    for axis in (-1, 0, 1):
        y, cache = F.softmax_forward(x, axis=axis)
        close(f"axis={axis}", dx=(ns["softmax_grad"](dy, x, axis), F.softmax_backward(dy, cache)))
    y, cache = F.softmax_forward(x)
    jac = ns["softmax_jacobian"](y)                                        # (3, 4, 5, 5)
    close("Jacobian", dx=(np.einsum("...ik,...i->...k", jac, dy), F.softmax_backward(dy, cache)),
          J_symmetric=(jac, np.swapaxes(jac, -1, -2)))


@check("cross_entropy")
def _check_cross_entropy(ns):
    rng = np.random.default_rng(5)
    z = 2.0 * rng.standard_normal((2, 7, 5))                               # (N, C, d1): class axis at dim 1
    t = rng.integers(0, 7, size=(2, 5))
    t[0, 1] = t[1, 3] = -100
    t0 = t.copy()
    t0[t0 == -100] = 0                                                     # ignore_index a real class
    probs = rng.random(z.shape)                                            # probability targets (unnormalised)
    weight = rng.uniform(0.5, 2.0, 7)
    cases = [(t, -100), (t0, 0), (probs, -100)]
    for targets, ignore in cases:
        for w in (None, weight):
            for smoothing in (0.0, 0.1):
                for reduction in ("mean", "sum"):
                    loss, cache = F.cross_entropy_forward(z, targets, w, ignore, reduction, smoothing)
                    dz = F.cross_entropy_backward(1.0, cache)
                    dloss, ddz = ns["cross_entropy"](z, targets, w, smoothing, ignore, reduction)
                    close(f"ignore={ignore} weight={w is not None} smoothing={smoothing} {reduction}",
                          loss=(dloss, loss), dz=(ddz, dz))
    ignored = np.full((2, 5), -100)                                        # every row ignored: NaN mean, zero gradient
    loss, cache = F.cross_entropy_forward(z, ignored, weight)
    dloss, ddz = ns["cross_entropy"](z, ignored, weight)
    assert np.isnan(loss) and np.isnan(dloss)
    close("every row ignored", dz=(ddz, F.cross_entropy_backward(1.0, cache)))


@check("relu")
def _check_relu(ns):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 5))
    x[0, :3] = 0.0                                                         # the kink: slope 0
    dy = rng.standard_normal(x.shape)
    _, cache = F.relu_forward(x)
    close(dx=(ns["relu_grad"](dy, x), F.relu_backward(dy, cache)))


@check("gelu")
def _check_gelu(ns):
    rng = np.random.default_rng(7)
    x = np.concatenate([np.linspace(-8, 8, 161), 2.0 * rng.standard_normal(50)])
    dy = rng.standard_normal(x.shape)
    for approximate in ("none", "tanh"):
        _, cache = F.gelu_forward(x, approximate)
        close(approximate, dx=(ns["gelu_grad"](dy, x, approximate), F.gelu_backward(dy, cache)))


@check("dropout")
def _check_dropout(ns):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4, 5))
    dy = rng.standard_normal(x.shape)
    for p in (0.3, 0.9, 1.0):
        _, cache = F.dropout_forward(x, p, training=True, rng=np.random.default_rng(9))
        close(f"p={p}", dx=(ns["dropout_grad"](dy, cache.mask, p), F.dropout_backward(dy, cache)))
    _, cache = F.dropout_forward(x, 0.3, training=False)                  # evaluation: the identity
    close("eval", dx=(ns["dropout_grad"](dy, np.ones(x.shape, bool), 0.0), F.dropout_backward(dy, cache)))


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


def _mha_params(rng, d):
    return (rng.standard_normal((3 * d, d)) / np.sqrt(d), rng.standard_normal(3 * d),
            rng.standard_normal((d, d)) / np.sqrt(d), rng.standard_normal(d))


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


@check("silu")
def _check_silu(ns):
    rng = np.random.default_rng(20)
    x = np.concatenate([rng.standard_normal(50) * 4, [-30.0, -1.28, 0.0, 2.4, 30.0]])
    dy = rng.standard_normal(x.shape)
    _, cache = F.silu_forward(x)
    close("silu", dx=(ns["silu_grad"](dy, x), F.silu_backward(dy, cache)))


@check("swiglu")
def _check_swiglu(ns):
    rng = np.random.default_rng(21)
    n, d, f = 7, 4, 6
    x, dy = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    wg, wu, wd = rng.standard_normal((f, d)), rng.standard_normal((f, d)), rng.standard_normal((d, f))
    _, cache = F.swiglu_forward(x, wg, wu, wd)
    dx, dwg, dwu, dwd = F.swiglu_backward(dy, cache)[:4]
    ddx, ddwg, ddwu, ddwd = ns["swiglu_grads"](dy, x, wg, wu, wd)
    close("functional", dx=(ddx, dx), dWg=(ddwg, dwg), dWu=(ddwu, dwu), dWd=(ddwd, dwd))
    m = nn.SwiGLU(d, f, dtype=np.float64, seed=0)
    for name, w in (("gate_proj", wg), ("up_proj", wu), ("down_proj", wd)):
        getattr(m, name).weight.data[...] = w
    m(x)
    close("nn.SwiGLU", dx=(ddx, m.backward(dy)), dWg=(ddwg, m.gate_proj.weight.grad),
          dWu=(ddwu, m.up_proj.weight.grad), dWd=(ddwd, m.down_proj.weight.grad))


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


# --------------------------------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------------------------------

def test_every_block_is_checked():
    blocks = doc_blocks()
    assert blocks, "no ```python block found in docs/derivations.md"
    unlabeled = [line for label, _, line in blocks if label is None]
    assert not unlabeled, f"blocks without a '# check: NAME' first line at doc lines {unlabeled}"
    labels = [label for label, _, _ in blocks]
    dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
    assert not dupes, f"labels used by more than one block: {dupes}"
    assert set(labels) == set(CHECKS), (f"blocks without a check: {sorted(set(labels) - set(CHECKS))}; "
                                        f"checks without a block: {sorted(set(CHECKS) - set(labels))}")


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_block(label):
    CHECKS[label](run_block(label))


def _perturbed(obj, rng):
    if isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
        scale = float(np.max(np.abs(obj))) if obj.size and np.all(np.isfinite(obj)) else 1.0
        return obj + 1e-6 * (scale or 1.0) * rng.standard_normal(obj.shape)
    if isinstance(obj, (float, np.floating)) and np.isfinite(obj):
        return obj + 1e-6 * (abs(obj) or 1.0)
    if isinstance(obj, tuple):
        return tuple(_perturbed(o, rng) for o in obj)
    if isinstance(obj, list):
        return [_perturbed(o, rng) for o in obj]
    if isinstance(obj, dict):
        return {k: _perturbed(o, rng) for k, o in obj.items()}
    return obj


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_check_fails_on_perturbed_block(label):
    """Each check must notice when the block's functions return values off by one part in 1e6."""
    ns = run_block(label)
    rng = np.random.default_rng(0)
    defined = [name for name, obj in ns.items() if isinstance(obj, types.FunctionType)
               and obj.__module__ == ns["__name__"]]
    assert defined, f"block {label!r} defines no function"
    for name in defined:
        fn = ns[name]
        ns[name] = lambda *a, _fn=fn, **k: _perturbed(_fn(*a, **k), rng)
    with pytest.raises(AssertionError):
        CHECKS[label](ns)


# Backwards whose section is owed by someone else; remove the entry when the section lands.
PENDING = {}


def test_every_backward_is_documented():
    text = doc_text()
    backwards = [n for n in F.__all__ if n.endswith("_backward") and n not in PENDING]
    assert backwards
    missing = [n for n in backwards if not re.search(rf"\[`{n}`\]\(\.\./numpy_transformer/functional/\w+\.py\)", text)]
    assert not missing, f"functional backward(s) not linked from docs/derivations.md: {missing}"


_LINK = re.compile(r"\[`([\w.]+)`\]\((\.\./[^)#\s]+\.py)\)")
_MATH_SPAN = re.compile(r"\$`[^`]*`\$")
_CODE_SPAN = re.compile(r"`([^`]+)`")


def _definition(tree, dotted):
    """The ast node of ``name`` or ``Class.method`` at module level, or None."""
    nodes = tree.body
    node = None
    for part in dotted.split("."):
        node = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        nodes = node.body
    return node


def _norm(s):
    return " ".join(s.split())


def test_code_links_and_excerpts():
    """Every [`name`](../file.py) exists there, and every `excerpt` after it on the line is in its source."""
    n_links = n_excerpts = 0
    for lineno, line in enumerate(doc_text().splitlines(), 1):
        line = _MATH_SPAN.sub("", line)
        links = list(_LINK.finditer(line))
        for i, m in enumerate(links):
            name, rel = m.groups()
            path = (DOC.parent / rel).resolve()
            assert path.is_file(), f"doc line {lineno}: {rel} does not exist"
            source = path.read_text(encoding="utf-8")
            node = _definition(ast.parse(source), name)
            assert node is not None, f"doc line {lineno}: {name} is not defined in {rel}"
            segment = _norm(ast.get_source_segment(source, node))
            end = links[i + 1].start() if i + 1 < len(links) else len(line)
            for excerpt in _CODE_SPAN.findall(line[m.end():end]):
                assert _norm(excerpt) in segment, f"doc line {lineno}: `{excerpt}` is not in {name} ({rel})"
                n_excerpts += 1
            n_links += 1
    assert n_links >= 20 and n_excerpts >= 30, (n_links, n_excerpts)


def _github_slug(heading):
    slug = heading.strip().lower()
    slug = re.sub(r"[^\w\- ]", "", slug)
    return slug.replace(" ", "-")


def test_relative_links_and_anchors():
    text = doc_text()
    outside_code = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    slugs = {_github_slug(h) for h in re.findall(r"^#{1,6} (.+)$", outside_code, flags=re.M)}
    for target in re.findall(r"\]\(([^)\s]+)\)", outside_code):
        if target.startswith("#"):
            assert target[1:] in slugs, f"anchor {target} matches no heading"
        elif not re.match(r"[a-z]+://", target):
            assert (DOC.parent / target.split("#")[0]).resolve().exists(), f"link {target} is broken"


def test_the_contents_list_every_section():
    """The "Contents:" line links each numbered section, in order (a section added must be listed)."""
    text = doc_text()
    outside_code = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    sections = re.findall(r"^## (\d+)\. (.+)$", outside_code, flags=re.M)
    contents = outside_code.split("Contents:", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"\[(\d+) [^]]*\]\(#([^)]+)\)", contents)
    assert [n for n, _ in listed] == [n for n, _ in sections], (listed, sections)
    assert [a for _, a in listed] == [_github_slug(f"{n}. {title}") for n, title in sections]


def test_tiled_section_gives_each_symbol_one_meaning():
    """In the tiled-attention section m is the running maximum (as in flash_attention_forward's code), so
    the dropout keep-mask, m in sections 9 and 10, is z there."""
    tiled = doc_text().split("Tiled (flash) attention", 2)[-1]
    assert "running maximum $`m`$" in tiled and r"\tfrac{z}{1-p}" in tiled
    assert not re.search(r"\\frac\{m\}|\\tfrac\{m\}|keep-mask \$`m`\$", tiled)


def test_github_math_hazards():
    """Inline maths uses $`...`$ (so Markdown cannot eat _ or *) and display maths ```math blocks."""
    text = re.sub(r"^```.*?^```", "", doc_text(), flags=re.M | re.S)
    text = _MATH_SPAN.sub("", text)
    text = re.sub(r"`[^`]*`", "", text)
    assert "$$" not in text, "use ```math blocks for display maths"
    stray = [line for line in text.splitlines() if "$" in line]
    assert not stray, f"inline maths must be written $`...`$: {stray[:3]}"


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
