"""Finite-difference gradient checks (float64, no torch) of every functional op and every module, tests that
``gradcheck`` catches wrong backward functions, and the ``gradcheck`` CLI command.

Shapes, masks and options are drawn by hypothesis; values come from a NumPy generator seeded by
hypothesis (smooth random values, away from ReLU's kink). This file never imports torch.
"""

from __future__ import annotations

import doctest
import importlib
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import numpy_transformer as nt
from numpy_transformer import cli
from numpy_transformer import functional as F
from numpy_transformer.study.gradchecking import (
    GradcheckError,
    GradcheckResult,
    gradcheck,
    gradcheck_module,
    numerical_gradient,
)

# The module checks cost ~0.1-0.5 s per example: a fifth of the profile's examples (5 with ci, 100 with
# thorough).
HEAVY = settings(max_examples=max(4, settings().max_examples // 5))
seeds = st.integers(0, 2**32 - 1)
small = st.integers(1, 4)


def _ok(result):
    assert isinstance(result, GradcheckResult)
    result.raise_if_failed()
    assert result.checks, "nothing was checked"
    return result


def _bool_mask(shape):
    return arrays(np.bool_, shape)


def _away_from_zero(x, margin=0.05):
    return np.where(x >= 0, x + margin, x - margin)


# --------------------------------------------------------------------------------------------------
# every functional op against finite differences
# --------------------------------------------------------------------------------------------------

@given(seed=seeds, lead=st.lists(small, max_size=2), d_in=small, d_out=small, bias=st.booleans())
def test_linear(seed, lead, d_in, d_out, bias):
    rng = np.random.default_rng(seed)
    inputs = {"x": rng.standard_normal((*lead, d_in)), "weight": rng.standard_normal((d_out, d_in)),
              "bias": rng.standard_normal(d_out) if bias else None}
    res = _ok(gradcheck(F.linear_forward, F.linear_backward, inputs, seed=seed, verbose=False))
    assert [c.name for c in res.checks] == ["x", "weight"] + (["bias"] if bias else [])


@given(seed=seeds, data=st.data(), vocab=st.integers(2, 6), dim=small, pad=st.booleans())
def test_embedding(seed, data, vocab, dim, pad):
    rng = np.random.default_rng(seed)
    shape = tuple(data.draw(st.lists(small, min_size=1, max_size=2), label="ids shape"))
    ids = data.draw(arrays(np.int64, shape, elements=st.integers(0, vocab - 1)), label="ids")
    padding_idx = int(ids.reshape(-1)[0]) if pad else None
    res = _ok(gradcheck(F.embedding_forward, F.embedding_backward,
                        {"ids": ids, "weight": rng.standard_normal((vocab, dim)), "padding_idx": padding_idx},
                        exclude={"weight": padding_idx} if pad else None, seed=seed, verbose=False))
    if pad:                                          # the frozen row gets exactly zero
        assert not np.any(res["weight"].analytic_grad[padding_idx])


@given(seed=seeds, lead=st.lists(small, max_size=2), d=st.integers(3, 7), affine=st.booleans(),
       bias=st.booleans(), scale=st.sampled_from([0.1, 1.0, 30.0]))
def test_layer_norm(seed, lead, d, affine, bias, scale):
    rng = np.random.default_rng(seed)
    inputs = {"x": scale * rng.standard_normal((*lead, d)) + 2,
              "weight": rng.standard_normal(d) if affine else None,
              "bias": rng.standard_normal(d) if bias else None}
    _ok(gradcheck(F.layer_norm_forward, F.layer_norm_backward, inputs, seed=seed, verbose=False))


@given(seed=seeds, data=st.data(), shape=st.lists(small, min_size=1, max_size=3))
def test_softmax(seed, data, shape):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    x = 3 * rng.standard_normal(shape)
    masked = data.draw(_bool_mask(tuple(shape)), label="-inf entries")     # whole rows may be masked
    x[masked] = -np.inf
    res = gradcheck(F.softmax_forward, F.softmax_backward, {"x": x, "axis": axis}, seed=seed, verbose=False)
    res.raise_if_failed()
    assert res["x"].checked == int((~masked).sum())           # -inf entries have no finite difference


@given(seed=seeds, shape=st.lists(small, min_size=1, max_size=3))
def test_relu(seed, shape):
    x = _away_from_zero(np.random.default_rng(seed).standard_normal(shape))
    _ok(gradcheck(F.relu_forward, F.relu_backward, [x], seed=seed, verbose=False))


@given(seed=seeds, shape=st.lists(small, min_size=1, max_size=3), approximate=st.sampled_from(["none", "tanh"]),
       scale=st.sampled_from([0.5, 3.0, 8.0]))
def test_gelu(seed, shape, approximate, scale):
    x = scale * np.random.default_rng(seed).standard_normal(shape)
    _ok(gradcheck(F.gelu_forward, F.gelu_backward, {"x": x, "approximate": approximate}, seed=seed,
                  verbose=False))


@given(seed=seeds, data=st.data(), shape=st.lists(small, min_size=1, max_size=3), p=st.floats(0.0, 0.9),
       training=st.booleans())
def test_dropout_with_fixed_mask(seed, data, shape, p, training):
    x = np.random.default_rng(seed).standard_normal(shape)
    mask = data.draw(_bool_mask(tuple(shape)), label="keep mask")
    _ok(gradcheck(F.dropout_forward, F.dropout_backward,
                  {"x": x, "p": p, "training": training, "rng": None, "mask": mask}, seed=seed, verbose=False))


@st.composite
def attention_setup(draw):
    """Shapes, a mask of any supported kind (bool, float with some -inf, none) and causality."""
    lead = tuple(draw(st.lists(small, max_size=2), label="lead"))
    s, t, dh, dv = draw(small), draw(small), draw(small), draw(small)
    kind = draw(st.sampled_from(["none", "bool", "float"]), label="mask kind")
    mask = None
    if kind == "bool":
        mask = draw(_bool_mask((s, t)), label="bool mask")          # fully masked rows allowed
    elif kind == "float":
        mask = draw(arrays(np.float64, (s, t), elements=st.sampled_from([0.0, -1.5, 2.0, -np.inf])), label="mask")
    # as torch's function, a mask and is_causal=True are not given together
    return lead, s, t, dh, dv, mask, draw(st.booleans(), label="is_causal") if mask is None else False


@given(seed=seeds, setup=attention_setup(), scale=st.sampled_from([None, 0.3]))
def test_scaled_dot_product_attention(seed, setup, scale):
    lead, s, t, dh, dv, mask, is_causal = setup
    rng = np.random.default_rng(seed)
    inputs = {"query": rng.standard_normal((*lead, s, dh)), "key": rng.standard_normal((*lead, t, dh)),
              "value": rng.standard_normal((*lead, t, dv)), "attn_mask": mask, "is_causal": is_causal, "scale": scale}
    res = _ok(gradcheck(F.scaled_dot_product_attention_forward, F.scaled_dot_product_attention_backward,
                        inputs, wrt=["query", "key", "value"], seed=seed, verbose=False))
    if mask is not None and mask.dtype != np.bool_:          # a float mask is an input, but a constant here
        assert ("attn_mask", "not in wrt") in res.skipped


@given(seed=seeds, setup=attention_setup(), block_q=small, block_k=small)
def test_flash_attention(seed, setup, block_q, block_k):
    lead, s, t, dh, dv, mask, is_causal = setup
    rng = np.random.default_rng(seed)
    inputs = {"query": rng.standard_normal((*lead, s, dh)), "key": rng.standard_normal((*lead, t, dh)),
              "value": rng.standard_normal((*lead, t, dv)), "attn_mask": mask, "is_causal": is_causal,
              "block_q": block_q, "block_k": block_k}
    _ok(gradcheck(F.flash_attention_forward, F.flash_attention_backward, inputs, wrt=["query", "key", "value"],
                  seed=seed, verbose=False))


def _mha_backward(dout, cache):
    dq, dk, dv, grads = F.multi_head_attention_backward(dout, cache)
    return {"query": dq, "key": dk, "value": dv, **{k.replace(".", "_"): g for k, g in grads.items()}}


@st.composite
def mha_setup(draw):
    b, s, t = draw(st.integers(1, 2)), draw(small), draw(small)
    h = draw(st.sampled_from([1, 2]))
    d = h * draw(st.integers(1, 3))
    separate = draw(st.booleans(), label="kdim/vdim")
    kdim, vdim = (draw(small), draw(small)) if separate else (d, d)
    bias = draw(st.booleans(), label="bias")
    attn_mask = draw(st.one_of(st.none(), _bool_mask((s, t)), _bool_mask((b * h, s, t)),
                               arrays(np.float64, (s, t), elements=st.floats(-3, 3))), label="attn_mask")
    kpm = draw(st.one_of(st.none(), _bool_mask((b, t))), label="key_padding_mask")
    is_causal = draw(st.booleans(), label="is_causal")
    if is_causal and attn_mask is not None:          # the hint must be right: then the mask is the causal one
        attn_mask = (F.causal_mask(s, t) if attn_mask.ndim == 2
                     else np.broadcast_to(F.causal_mask(s, t), attn_mask.shape))
    extras = draw(st.sampled_from([(False, False), (True, False), (False, True), (True, True)]),
                  label="add_bias_kv, add_zero_attn")
    if any(extras) and is_causal:                    # appended keys refuse the hint: the causal mask itself
        attn_mask, is_causal = (F.causal_mask(s, t) if attn_mask is None else attn_mask), False
    return b, s, t, h, d, kdim, vdim, separate, bias, attn_mask, kpm, is_causal, extras


@given(seed=seeds, setup=mha_setup(), tiled=st.booleans())
def test_multi_head_attention(seed, setup, tiled):
    b, s, t, h, d, kdim, vdim, separate, bias, attn_mask, kpm, is_causal, (bias_kv, zero_attn) = setup
    rng = np.random.default_rng(seed)
    n = rng.standard_normal
    inputs = {"query": n((b, s, d)), "key": n((b, t, kdim)), "value": n((b, t, vdim)), "num_heads": h}
    if separate:
        inputs.update(q_proj_weight=n((d, d)), k_proj_weight=n((d, kdim)), v_proj_weight=n((d, vdim)))
    else:
        inputs["in_proj_weight"] = n((3 * d, d))
    inputs["in_proj_bias"] = n(3 * d) if bias else None
    inputs.update(out_proj_weight=n((d, d)), out_proj_bias=n(d) if bias else None, attn_mask=attn_mask,
                  key_padding_mask=kpm, is_causal=is_causal, attention="tiled" if tiled else "standard",
                  block_size=2, add_zero_attn=zero_attn)
    if bias_kv:
        inputs.update(bias_k=n((1, 1, d)), bias_v=n((1, 1, d)))
    wrt = [k for k, v in inputs.items() if isinstance(v, np.ndarray) and k.endswith(("query", "key", "value",
                                                                                     "weight", "bias", "_k", "_v"))]
    _ok(gradcheck(F.multi_head_attention_forward, _mha_backward, inputs, wrt=wrt, seed=seed, verbose=False))


# --------------------------------------------------------------------------------------------------
# every module: input gradients and every parameter's gradient
# --------------------------------------------------------------------------------------------------

def _randomise_norms(module, rng):
    """LayerNorms start at weight 1, bias 0: random values make their gradients less special."""
    for name, p in module.named_parameters():
        if p.data.ndim == 1:
            p.data[...] = rng.standard_normal(p.shape) * 0.3 + (1.0 if name.endswith("norm1.weight") or
                                                                 name.endswith("norm2.weight") else 0.0)
    return module


@given(seed=seeds, lead=st.lists(small, max_size=2), d_in=small, d_out=small, bias=st.booleans())
def test_module_linear(seed, lead, d_in, d_out, bias):
    rng = np.random.default_rng(seed)
    m = nt.Linear(d_in, d_out, bias=bias, dtype=np.float64, seed=seed)
    res = _ok(gradcheck_module(m, rng.standard_normal((*lead, d_in)), seed=seed, verbose=False))
    assert [c.name for c in res.checks] == ["x", "weight"] + (["bias"] if bias else [])


@given(seed=seeds, data=st.data(), vocab=st.integers(2, 6), dim=small, pad=st.booleans())
def test_module_embedding_and_token_embedding(seed, data, vocab, dim, pad):
    ids = data.draw(arrays(np.int64, (2, 3), elements=st.integers(0, vocab - 1)), label="ids")
    m = nt.Embedding(vocab, dim, padding_idx=int(ids[0, 0]) if pad else None, dtype=np.float64, seed=seed)
    res = _ok(gradcheck_module(m, ids, exclude={"weight": m.padding_idx} if pad else None, verbose=False))
    assert res.skipped == [("ids", "not floating point")]
    _ok(gradcheck_module(nt.TokenEmbedding(vocab, dim, dtype=np.float64, seed=seed), ids, verbose=False))


@given(seed=seeds, lead=st.lists(small, max_size=2), d=st.integers(3, 6), affine=st.booleans(), bias=st.booleans())
def test_module_layer_norm(seed, lead, d, affine, bias):
    rng = np.random.default_rng(seed)
    m = nt.LayerNorm(d, elementwise_affine=affine, bias=bias, dtype=np.float64)
    _randomise_norms(m, rng)
    _ok(gradcheck_module(m, 2 * rng.standard_normal((*lead, d)) + 1, seed=seed, verbose=False))


@given(seed=seeds, shape=st.lists(small, min_size=1, max_size=3), approximate=st.sampled_from(["none", "tanh"]))
def test_module_activations_dropout_positional(seed, shape, approximate):
    rng = np.random.default_rng(seed)
    x = _away_from_zero(rng.standard_normal(shape))
    _ok(gradcheck_module(nt.ReLU(), x, verbose=False))
    _ok(gradcheck_module(nt.GELU(approximate), 3 * x, verbose=False))
    _ok(gradcheck_module(nt.Dropout(0.5, seed=seed), x, verbose=False))          # eval mode: the identity
    pe = nt.PositionalEncoding(4, max_len=6, dtype=np.float64)
    _ok(gradcheck_module(pe, rng.standard_normal((2, min(shape[0], 6), 4)), verbose=False))


@HEAVY
@given(seed=seeds, setup=mha_setup(), batch_first=st.booleans(), tiled=st.booleans())
def test_module_multihead_attention(seed, setup, batch_first, tiled):
    b, s, t, h, d, kdim, vdim, separate, bias, attn_mask, kpm, is_causal, (bias_kv, zero_attn) = setup
    rng = np.random.default_rng(seed)
    m = nt.MultiheadAttention(d, h, dropout=0.3, bias=bias, add_bias_kv=bias_kv, add_zero_attn=zero_attn,
                              kdim=kdim if separate else None,
                              vdim=vdim if separate else None, batch_first=batch_first, dtype=np.float64,
                              seed=seed, attention="tiled" if tiled else "standard", block_size=2)
    _randomise_norms(m, rng)
    lay = (lambda n, f: (b, n, f)) if batch_first else (lambda n, f: (n, b, f))
    res = _ok(gradcheck_module(m, rng.standard_normal(lay(s, d)), rng.standard_normal(lay(t, kdim)),
                               rng.standard_normal(lay(t, vdim)), seed=seed, verbose=False,
                               forward_kwargs={"attn_mask": attn_mask, "key_padding_mask": kpm,
                                               "is_causal": is_causal, "need_weights": False}))
    assert [c.name for c in res.checks][:3] == ["query", "key", "value"]
    assert len(res.checks) == 3 + len(m.parameters())
    assert m.training                                         # the mode is restored


@HEAVY
@given(seed=seeds, activation=st.sampled_from(["relu", "gelu"]), norm_first=st.booleans(), s=small,
       batch_first=st.booleans(), masks=st.sampled_from(["none", "causal", "padding", "bool"]),
       tiled=st.booleans())
def test_module_transformer_encoder_layer(seed, activation, norm_first, s, batch_first, masks, tiled):
    rng = np.random.default_rng(seed)
    layer = nt.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.1, activation=activation,
                                       norm_first=norm_first, batch_first=batch_first, dtype=np.float64, seed=seed,
                                       attention="tiled" if tiled else "standard", block_size=2)
    _randomise_norms(layer, rng)
    kwargs = {"causal": {"is_causal": True},
              "padding": {"src_key_padding_mask": np.arange(s)[None, :] >= np.array([[s], [max(1, s - 1)]])},
              "bool": {"src_mask": rng.random((s, s)) < 0.3},
              "none": {}}[masks]
    x = rng.standard_normal((2, s, 4) if batch_first else (s, 2, 4))
    res = _ok(gradcheck_module(layer, x, forward_kwargs=kwargs, seed=seed, verbose=False))
    assert len(res.checks) == 13


@HEAVY
@given(seed=seeds, num_layers=st.integers(1, 2), final_norm=st.booleans(), norm_first=st.booleans(),
       causal=st.booleans())
def test_module_transformer_encoder(seed, num_layers, final_norm, norm_first, causal):
    rng = np.random.default_rng(seed)
    layer = nt.TransformerEncoderLayer(4, 2, dim_feedforward=6, activation="gelu", norm_first=norm_first,
                                       dtype=np.float64, seed=seed)
    enc = nt.TransformerEncoder(layer, num_layers, norm=nt.LayerNorm(4, dtype=np.float64) if final_norm else None,
                                seed=seed)
    _randomise_norms(enc, rng)
    res = _ok(gradcheck_module(enc, rng.standard_normal((2, 3, 4)), seed=seed, verbose=False,
                               forward_kwargs={"mask": F.causal_mask(3) if causal else None}))
    assert len(res.checks) == 1 + 12 * num_layers + 2 * final_norm


# --------------------------------------------------------------------------------------------------
# gradcheck catches wrong backward functions, and says where
# --------------------------------------------------------------------------------------------------

def _failed(res, name):
    assert not res.passed
    assert [c.name for c in res.failures] == [name], str(res)
    check = res[name]
    assert check.index is not None and check.n_bad > 0
    text = str(res)
    assert f"gradient of input {name!r}" in text and "is wrong" in text and "index (" in text
    with pytest.raises(GradcheckError, match=f"FAILED: {name!r}"):
        res.raise_if_failed()
    return check


def test_detects_softmax_backward_without_the_row_sum_term():
    x = np.random.default_rng(0).standard_normal((3, 5))
    res = gradcheck(F.softmax_forward, lambda dout, cache: cache.y * dout, {"x": x}, verbose=False)
    check = _failed(res, "x")
    assert check.max_rel_err > 0.1
    assert abs(check.analytic - check.numeric) == pytest.approx(check.max_abs_err)
    # the right backward passes on the same input
    gradcheck(F.softmax_forward, F.softmax_backward, {"x": x}, verbose=False).raise_if_failed()


def test_detects_linear_backward_with_a_transposed_weight():
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((2, 3, 4)), "weight": rng.standard_normal((4, 4)),
              "bias": rng.standard_normal(4)}

    def transposed_dx(dout, cache):                        # dx = dout @ W^T instead of dout @ W
        dx, dw, db = F.linear_backward(dout, cache)
        return dout @ cache.weight.T, dw, db
    _failed(gradcheck(F.linear_forward, transposed_dx, inputs, verbose=False), "x")

    def transposed_dw(dout, cache):                        # dW = x^T dout instead of dout^T x
        dx, dw, db = F.linear_backward(dout, cache)
        return dx, dw.T, db
    check = _failed(gradcheck(F.linear_forward, transposed_dw, inputs, verbose=False), "weight")
    assert "transposed" in check.note

    inputs["weight"] = rng.standard_normal((5, 4))            # not square: the shapes give it away
    inputs["bias"] = rng.standard_normal(5)
    res = gradcheck(F.linear_forward, transposed_dw, inputs, verbose=False)
    assert [c.name for c in res.failures] == ["weight"]
    assert "has shape (4, 5) but the input has shape (5, 4)" in str(res)


def test_detects_layer_norm_backward_missing_a_term():
    rng = np.random.default_rng(2)

    def missing_variance_term(dout, cache):
        dx, dw, db = F.layer_norm_backward(dout, cache)
        dxhat = dout * cache.weight
        return (dxhat - dxhat.mean(axis=-1, keepdims=True)) * cache.rstd, dw, db

    res = gradcheck(F.layer_norm_forward, missing_variance_term,
                    {"x": rng.standard_normal((2, 3, 6)), "weight": rng.standard_normal(6),
                     "bias": rng.standard_normal(6)}, verbose=False)
    _failed(res, "x")
    assert res["weight"].passed and res["bias"].passed


def test_detects_gelu_and_attention_bugs_with_hints():
    x = 2 * np.random.default_rng(3).standard_normal((4, 3))

    def gelu_missing_pdf(dout, cache):                        # y' = Phi(x) only: forgets x * phi(x)
        return dout * 0.5 * F.erfc(-cache.x / np.sqrt(2))
    _failed(gradcheck(F.gelu_forward, gelu_missing_pdf, [x], names=["x"], verbose=False), "x")

    check = _failed(gradcheck(F.relu_forward, lambda d, c: -F.relu_backward(d, c),
                              [_away_from_zero(x)], names=["x"], verbose=False), "x")
    assert "wrong sign" in check.note

    rng = np.random.default_rng(4)
    qkv = {"query": rng.standard_normal((2, 3, 4)), "key": rng.standard_normal((2, 5, 4)),
           "value": rng.standard_normal((2, 5, 2))}

    def unscaled(dout, cache):                                # forgets the 1/sqrt(Dh) on dq and dk
        dq, dk, dv = F.scaled_dot_product_attention_backward(dout, cache)
        return dq * 2, dk, dv
    check = _failed(gradcheck(F.scaled_dot_product_attention_forward, unscaled, qkv, verbose=False), "query")
    assert "times 2" in check.note


class _LinearForgettingBias(nt.Linear):
    def backward(self, dout):
        cache, shape = self._take()
        dx, dw, _ = F.linear_backward(dout, cache)
        self.weight.accumulate(dw)
        return dx


class _LayerNormWrongBackward(nt.LayerNorm):
    def backward(self, dout):
        cache, shape = self._take()
        dx, dw, db = F.layer_norm_backward(dout, cache)
        self.weight.accumulate(dw)
        self.bias.accumulate(db)
        return dout * cache.weight * cache.rstd                  # the normalisation's projection is missing


def test_module_check_detects_a_missing_parameter_gradient_and_a_wrong_input_gradient():
    rng = np.random.default_rng(5)
    res = gradcheck_module(_LinearForgettingBias(3, 2, dtype=np.float64, seed=0), rng.standard_normal((4, 3)),
                           verbose=False)
    assert [c.name for c in res.failures] == ["bias"]
    assert "p.grad is None after backward" in str(res) and "parameter 'bias'" in str(res)

    res = gradcheck_module(_LayerNormWrongBackward(5, dtype=np.float64), rng.standard_normal((2, 5)),
                           verbose=False)
    assert [c.name for c in res.failures] == ["x"]


def test_max_elements_subsets_but_still_checks_the_largest_gradient():
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((6, 8)), rng.standard_normal((5, 8))
    res = _ok(gradcheck(F.linear_forward, F.linear_backward, {"x": x, "weight": w}, max_elements=7,
                        verbose=False))
    assert res["x"].checked == 7 and res["x"].total == 48
    assert np.isnan(res["x"].numeric_grad).sum() == 48 - 7

    def one_wrong(dout, cache):                               # only the largest entry of dW is wrong
        dx, dw, db = F.linear_backward(dout, cache)
        dw = dw.copy()
        dw.flat[np.argmax(np.abs(dw))] *= 1.5
        return dx, dw, db
    res = gradcheck(F.linear_forward, one_wrong, {"x": x, "weight": w}, max_elements=3, verbose=False)
    assert [c.name for c in res.failures] == ["weight"] and res["weight"].n_bad == 1


def test_exclude_and_embedding_padding_row():
    """The padding row's gradient is zero by design, not the derivative: FD flags it unless excluded."""
    m = nt.Embedding(5, 3, padding_idx=2, dtype=np.float64, seed=0)
    ids = np.array([[0, 2, 4], [2, 1, 1]])
    res = gradcheck_module(m, ids, verbose=False)
    assert [c.name for c in res.failures] == ["weight"] and res["weight"].index[0] == 2
    _ok(gradcheck_module(m, ids, exclude={"weight": 2}, verbose=False))


def test_gradcheck_module_leaves_the_module_as_it_found_it():
    rng = np.random.default_rng(7)
    layer = nt.TransformerEncoderLayer(4, 2, dim_feedforward=6, dtype=np.float64, seed=0)
    x = rng.standard_normal((2, 3, 4))
    layer(x)
    layer.backward(np.ones((2, 3, 4)))                           # stale accumulated grads
    before = {n: (p.data.copy(), p.grad.copy()) for n, p in layer.named_parameters()}
    x_before = x.copy()
    _ok(gradcheck_module(layer, x, verbose=False))              # passes although p.grad was not zero
    for n, p in layer.named_parameters():
        assert np.array_equal(p.data, before[n][0]) and np.array_equal(p.grad, before[n][1]), n
    assert layer.training and layer.dropout.training
    assert np.array_equal(x, x_before)


def test_refusals():
    rng = np.random.default_rng(8)
    with pytest.raises(TypeError, match="dtype=np.float64"):
        gradcheck_module(nt.Linear(2, 2, seed=0), rng.standard_normal((1, 2)), verbose=False)
    w32 = rng.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(TypeError, match="float64 end to end"):
        gradcheck(lambda x: (x @ w32.T).astype(np.float32), lambda d, c: None, [rng.standard_normal((1, 3))],
                  verbose=False)
    with pytest.raises(ValueError, match="dropout is active"):
        gradcheck_module(nt.Dropout(0.2), rng.standard_normal(3), eval_mode=False, verbose=False)
    with pytest.raises(ValueError, match="returned 4 gradients"):
        gradcheck(F.linear_forward, lambda d, c: (1, 2, 3, 4), {"x": rng.standard_normal((2, 3)),
                                                          "weight": rng.standard_normal((2, 3)),
                                                          "bias": rng.standard_normal(2)}, verbose=False)
    with pytest.raises(ValueError, match="not floating-point inputs"):
        gradcheck(F.embedding_forward, F.embedding_backward, {"ids": np.array([0]), "weight": np.ones((2, 2))},
                  wrt=["ids"], verbose=False)


def test_wrt_turns_a_none_gradient_into_a_failure():
    rng = np.random.default_rng(9)
    inputs = {"x": rng.standard_normal((2, 3)), "weight": rng.standard_normal((2, 3)), "bias": rng.standard_normal(2)}
    no_bias = lambda d, c: F.linear_backward(d, c)[:2] + (None,)  # noqa: E731
    res = gradcheck(F.linear_forward, no_bias, inputs, verbose=False)
    assert res.passed and res.skipped == [("bias", "the backward returned None")]
    res = gradcheck(F.linear_forward, no_bias, inputs, wrt=["x", "weight", "bias"], verbose=False)
    assert [c.name for c in res.failures] == ["bias"] and "all zero" in res["bias"].note


def test_numerical_gradient_restores_the_array_and_handles_aliasing_outputs():
    x = np.array([1.0, -2.0, np.inf, 3.0])
    g = numerical_gradient(lambda: x * 1.0, x, np.ones(4))
    assert np.array_equal(x, [1.0, -2.0, np.inf, 3.0])
    np.testing.assert_allclose(g[[0, 1, 3]], 1.0, rtol=1e-9)
    assert np.isnan(g[2])                                      # no finite difference at inf
    y = np.array([0.5, 2.0])                                   # the output IS the input (dropout in eval)
    np.testing.assert_allclose(numerical_gradient(lambda: y, y, np.array([3.0, -1.0])), [3.0, -1.0], rtol=1e-9)


def test_docstring_examples_run():
    failures = tried = 0
    for name in ["", ".pair", ".module", ".numeric", ".result", ".hygiene"]:
        mod = importlib.import_module("numpy_transformer.study.gradchecking" + name)  # the package, not the function
        f, t = doctest.testmod(mod, verbose=False, report=False)
        failures, tried = failures + f, tried + t
    assert tried >= 12 and failures == 0


def test_exported():
    assert nt.gradcheck is gradcheck and nt.gradcheck_module is gradcheck_module
    assert {"gradcheck", "gradcheck_module", "GradcheckResult"} <= set(nt.__all__)


# --------------------------------------------------------------------------------------------------
# the CLI command
# --------------------------------------------------------------------------------------------------

@pytest.fixture
def gradcheck_cli(monkeypatch):
    """``cli.main`` with only the gradcheck command registered (isolated from other commands' imports)."""
    assert "gradcheck" in cli.COMMAND_MODULES
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["gradcheck"])
    return cli.main


def _rows_by_case(out):
    """The report's rows grouped under their case's name line: {case: [row, ...]}."""
    groups, case = {}, None
    lines = out.splitlines()
    body = lines[lines.index(next(row for row in lines if row.startswith("---"))) + 1:]
    name = ""                                        # a long tensor name stands on its own line
    for line in body:
        if line.startswith("---"):
            break
        if line.startswith("  ") and len(line.split()) == 1:
            name = line.strip()
        elif line.startswith("  "):
            groups[case].append(f"  {name}  {line.strip()}" if name else line)
            name = ""
        else:
            case = line
            groups[case] = []
    return groups


def test_cli_gradcheck_passes_every_op_and_module(gradcheck_cli, capsys):
    status = gradcheck_cli(["gradcheck"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "ALL PASS" in out and "FAIL" not in out
    for case in ["linear ", "embedding ", "layer_norm ", "softmax ", "relu ", "gelu (approximate=none)",
                 "gelu (approximate=tanh)", "dropout (fixed mask", "sdpa (bool mask)", "sdpa (float mask)",
                 "sdpa (causal)", "flash_attention", "multi_head_attention (", "Linear ", "Embedding ",
                 "LayerNorm ", "MultiheadAttention (kdim=3, vdim=5)", "TransformerEncoderLayer (relu, post-LN)",
                 "TransformerEncoderLayer (gelu, pre-LN)", "TransformerEncoder (2 layers, final norm",
                 "TokenEmbedding ", "PositionalEncoding ", "TransformerDecoderLayer (pre-LN, gelu",
                 "TransformerDecoder (2 layers, final norm", "Transformer (1+1 layers"]:
        rows = [row for name, group in _rows_by_case(out).items() if (name + " ").startswith(case) for row in group]
        assert rows and all(line.rstrip().endswith("PASS   PASS") for line in rows), case
    assert "layers.1.norm2.weight" in out and "out_proj.weight" in out
    assert "decoder.layers.0.multihead_attn.in_proj_weight" in out and "layers.1.norm3.weight" in out
    assert max(len(line) for line in out.splitlines()) <= 100, "the report is wider than 100 columns"


def test_cli_gradcheck_shows_the_real_shape_of_an_untested_probability_target(gradcheck_cli, capsys):
    """The '-' row of a probability target (no gradient) shows its shape, the input's: (5,), (2, 3, 3)."""
    gradcheck_cli(["gradcheck", "--only", "probability targets"])
    groups = _rows_by_case(capsys.readouterr().out)
    assert len(groups) == 2
    for rows in groups.values():
        shapes = {line.split()[0]: line[line.index("("):line.index(")") + 1] for line in rows}
        assert shapes["target"] == shapes["input"] != "()", rows


def test_cli_gradcheck_fails_on_a_broken_op(gradcheck_cli, capsys, monkeypatch):
    monkeypatch.setattr(F, "softmax_backward", lambda dout, cache: cache.y * dout)   # row-sum term missing
    status = gradcheck_cli(["gradcheck", "--only", "softmax", "--only", "relu"])
    out = capsys.readouterr().out
    assert status == 1
    groups = _rows_by_case(out)
    assert [row.split()[-1] for row in groups["softmax (axis=-1)"]] == ["FAIL"]
    assert [row.split()[-1] for row in groups["relu"]] == ["PASS"]
    assert "softmax (axis=-1): FAIL: gradient of input 'x'" in out and "FAILED: 2 gradient(s)" in out


def test_cli_gradcheck_reports_an_op_that_raises(gradcheck_cli, capsys, monkeypatch):
    def boom(dout, cache):
        raise RuntimeError("boom")
    monkeypatch.setattr(F, "gelu_backward", boom)
    assert gradcheck_cli(["gradcheck", "--only", "gelu (approximate=tanh)"]) == 1
    assert "RuntimeError: boom" in capsys.readouterr().out


def test_cli_gradcheck_without_torch(gradcheck_cli, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)                     # as if torch were not installed
    for name in [m for m in sys.modules if m == "reference_torch" or m.startswith("reference_torch.")]:
        monkeypatch.delitem(sys.modules, name)
    assert gradcheck_cli(["gradcheck", "--only", "layer_norm", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    assert "torch not installed" in out and "ALL PASS" in out
