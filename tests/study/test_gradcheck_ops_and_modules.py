"""Finite-difference gradient checks (float64, no torch) of every functional op and every module: the input
gradients and every parameter's gradient pass ``gradcheck`` / ``gradcheck_module``.

Shapes, masks and options are drawn by hypothesis; values come from a NumPy generator seeded by
hypothesis (smooth random values, away from ReLU's kink). This file never imports torch.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import numpy_transformer as nt
from numpy_transformer import functional as F
from numpy_transformer.study.gradchecking import (
    gradcheck,
    gradcheck_module,
)
from tests.study.gradcheck_helpers import _away_from_zero, _bool_mask, _ok

# The module checks cost ~0.1-0.5 s per example: a fifth of the profile's examples (5 with ci, 100 with
# thorough).
HEAVY = settings(max_examples=max(4, settings().max_examples // 5))
seeds = st.integers(0, 2**32 - 1)
small = st.integers(1, 4)


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
