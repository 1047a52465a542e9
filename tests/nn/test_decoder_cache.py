"""Incremental decoding for the encoder-decoder: ``TransformerDecoder(Layer).forward(...,
past_key_values=, use_cache=)`` and ``Transformer.encode``/``decode``. Fed the target one position (or a
chunk) at a time, the cached path gives at every step the full forward's outputs with the causal
``tgt_mask`` over the whole prefix (float64, 1e-12); the memory's cross-attention keys and values are
projected once; a backward after a cached forward is refused; bad calls name the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.nn import kv_cache


def _perturb(model, seed):
    """Move every parameter off its initial value (LayerNorm's ones and zeros included)."""
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data[...] += (0.2 * rng.standard_normal(p.shape)).astype(p.dtype)
    return model


def _decoder(d, heads, layers, norm_first=False, bias=True, activation="relu", final_norm=True, batch_first=True,
             dtype=np.float64, seed=0):
    layer = nt.TransformerDecoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.1, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first, bias=bias, dtype=dtype,
                                       seed=seed)
    norm = nt.LayerNorm(d, bias=bias, dtype=dtype) if final_norm else None
    return _perturb(nt.TransformerDecoder(layer, layers, norm=norm, seed=seed), seed).eval()


def _memory_padding(kind, rng, b, t, dtype):
    """None, a bool padding mask (True = pad) or a float one (added), never padding memory position 0."""
    if kind is None or t == 1:
        return None
    pad = rng.random((b, t)) < 0.4
    pad[:, 0] = False
    if kind == "bool":
        return pad
    return np.where(pad, -np.inf, -rng.random((b, t))).astype(dtype)     # float: -inf and finite biases


def _decode_in_chunks(dec, tgt, memory, prompt, chunk, kpm=None, batch_first=True):
    """The cached path: ``prompt`` positions in the first call, then ``chunk`` at a time; every output."""
    axis = 1 if batch_first else 0
    take = (lambda a, b: tgt[:, a:b]) if batch_first else (lambda a, b: tgt[a:b])
    out, cache = dec(take(0, prompt), memory, memory_key_padding_mask=kpm, use_cache=True)
    outs, s = [out], tgt.shape[axis]
    t = prompt
    while t < s:
        step, cache2 = dec(take(t, t + chunk), memory, memory_key_padding_mask=kpm, past_key_values=cache)
        assert cache2 is cache
        outs.append(step)
        t += chunk
    return outs, cache


@given(seed=st.integers(0, 2**31), b=st.integers(1, 3), s=st.integers(1, 7), t=st.integers(1, 6),
       heads=st.sampled_from([1, 2, 4]), layers=st.integers(1, 3), norm_first=st.booleans(), bias=st.booleans(),
       activation=st.sampled_from(["relu", "gelu"]), final_norm=st.booleans(), batch_first=st.booleans(),
       prompt=st.integers(1, 3), chunk=st.integers(1, 3), padding=st.sampled_from([None, "bool", "float"]))
def test_cached_decoding_equals_full_forward_at_every_step(seed, b, s, t, heads, layers, norm_first, bias, activation,
                                                           final_norm, batch_first, prompt, chunk, padding):
    """Every step's outputs equal the full causal forward over the whole target, float64 to 1e-12."""
    rng = np.random.default_rng(seed)
    dec = _decoder(8, heads, layers, norm_first, bias, activation, final_norm, batch_first, seed=seed % 1000)
    shape = (lambda n: (b, n, 8)) if batch_first else (lambda n: (n, b, 8))
    tgt, memory = rng.standard_normal(shape(s)), rng.standard_normal(shape(t))
    kpm = _memory_padding(padding, rng, b, t, np.float64)
    full = dec(tgt, memory, tgt_mask=nt.Transformer.generate_square_subsequent_mask(s, np.float64),
               memory_key_padding_mask=kpm)
    prompt = min(prompt, s)
    outs, cache = _decode_in_chunks(dec, tgt, memory, prompt, chunk, kpm, batch_first)
    got = np.concatenate(outs, axis=1 if batch_first else 0)
    assert got.shape == full.shape
    assert_close({"cached outputs, every step": (got, full)}, tol=1e-12)
    assert len(cache) == 2 * layers and cache.get_seq_length(0) == s
    assert all(cache.get_seq_length(("cross", i)) == t for i in range(layers))


@given(seed=st.integers(0, 2**31), b=st.integers(1, 2), s=st.integers(1, 6), t=st.integers(1, 5),
       norm_first=st.booleans(), layers=st.integers(1, 2))
def test_transformer_encode_decode_equals_its_forward(seed, b, s, t, norm_first, layers):
    """``model.decode(tgt[:, i:i+1], model.encode(src), past_key_values=...)`` at every i equals
    ``model(src, tgt, tgt_mask=causal)``; ``encode`` is the encoder's memory."""
    m = _perturb(nt.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=layers,
                                dim_feedforward=16, norm_first=norm_first, dtype=np.float64, seed=seed % 1000),
                 seed).eval()
    rng = np.random.default_rng(seed)
    src, tgt = rng.standard_normal((b, t, 8)), rng.standard_normal((b, s, 8))
    full = m(src, tgt, tgt_mask=m.generate_square_subsequent_mask(s, np.float64))
    memory = m.encode(src)
    assert_close({"encode": (memory, m.encoder(src))}, tol=1e-15)
    assert_close({"decode, no cache": (m.decode(tgt, memory, tgt_is_causal=True), full)}, tol=1e-12)
    cache = None
    for i in range(s):
        step, cache = m.decode(tgt[:, i:i + 1], memory, past_key_values=cache, use_cache=True)
        assert_close({f"position {i}": (step, full[:, i:i + 1])}, tol=1e-12)


def test_cross_attention_keys_and_values_are_projected_once(monkeypatch):
    """Over a whole decoding the memory goes through each layer's key and value projections exactly
    once (the static slots stay the same arrays); the self-attention projects only new positions."""
    layers, s, t = 3, 6, 5
    dec = _decoder(8, 2, layers)
    calls = []
    project = kv_cache._project

    def counting(attn, x, which):
        calls.append((id(attn), which, x.shape[1]))
        return project(attn, x, which)
    monkeypatch.setattr(kv_cache, "_project", counting)
    rng = np.random.default_rng(0)
    tgt, memory = rng.standard_normal((2, s, 8)), rng.standard_normal((2, t, 8))
    out, cache = dec(tgt[:, :1], memory, use_cache=True)
    static = {i: (cache.keys[("cross", i)], cache.values[("cross", i)]) for i in range(layers)}
    for i in range(1, s):
        _, cache = dec(tgt[:, i:i + 1], memory, past_key_values=cache)
    for i, layer in enumerate(dec.layers):
        assert cache.keys[("cross", i)] is static[i][0] and cache.values[("cross", i)] is static[i][1]
        cross = [c for c in calls if c[0] == id(layer.multihead_attn)]
        assert sorted(w for _, w, _ in cross if w in (1, 2)) == [1, 2]            # k and v: once each
        assert all(n == t for _, w, n in cross if w in (1, 2))                    # ... of the memory
        assert [w for _, w, _ in cross].count(0) == s                             # one query per step
        own = [c for c in calls if c[0] == id(layer.self_attn)]
        assert len(own) == 3 * s and all(n == 1 for _, _, n in own)               # q, k, v of the new one


@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_cached_forward_and_unbatched(norm_first):
    """The layer alone (slots 0 and ("cross", 0)), batched and unbatched, equals its causal forward."""
    layer = _perturb(nt.TransformerDecoderLayer(8, 2, dim_feedforward=16, norm_first=norm_first, dtype=np.float64,
                                                seed=3), 3).eval()
    rng = np.random.default_rng(1)
    tgt, memory = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 4, 8))
    full = layer(tgt, memory, tgt_is_causal=True)
    outs, cache = _decode_in_chunks(layer, tgt, memory, 2, 1)
    assert_close({"layer": (np.concatenate(outs, axis=1), full)}, tol=1e-12)
    assert set(cache.keys) == {0, ("cross", 0)}
    outs, _ = _decode_in_chunks(layer, tgt[1], memory[1], 1, 2, batch_first=False)   # unbatched: (S, D)
    assert outs[0].ndim == 2
    assert_close({"unbatched": (np.concatenate(outs, axis=0), full[1])}, tol=1e-12)


def test_cached_decoding_float32():
    dec = _decoder(8, 2, 2, dtype=np.float32, seed=5)
    rng = np.random.default_rng(2)
    tgt = rng.standard_normal((2, 7, 8)).astype(np.float32)
    memory = rng.standard_normal((2, 4, 8)).astype(np.float32)
    full = dec(tgt, memory, tgt_is_causal=True)
    outs, cache = _decode_in_chunks(dec, tgt, memory, 1, 1)
    assert all(o.dtype == np.float32 for o in outs) and cache.keys[("cross", 1)].dtype == np.float32
    assert_close({"float32": (np.concatenate(outs, axis=1), full)}, dtype=np.float32)


def test_backward_after_cached_forward_is_refused_and_the_module_stays_usable():
    dec = _decoder(8, 2, 2)
    layer = dec.layers[0]
    rng = np.random.default_rng(0)
    tgt, memory = rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 4, 8))
    for mod in (dec, layer):
        out, _ = mod(tgt, memory, use_cache=True)
        with pytest.raises(RuntimeError, match=r"backward\(\) after a cached forward .*inference only"):
            mod.backward(np.ones_like(out))
        out = mod(tgt, memory, tgt_is_causal=True)                                # the full forward works again
        dtgt, dmemory = mod.backward(rng.standard_normal(out.shape))
        assert dtgt.shape == tgt.shape and dmemory.shape == memory.shape and np.isfinite(dmemory).all()


def test_cached_call_errors_name_the_argument():
    dec = _decoder(8, 2, 2)
    rng = np.random.default_rng(0)
    tgt, memory = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 4, 8))
    _, cache = dec(tgt[:, :1], memory, use_cache=True)
    before = {k: v.copy() for k, v in cache.keys.items()}
    with pytest.raises(ValueError, match=r"memory.*\(B, T, D\) \(D = d_model = 8\)"):
        dec(tgt[:, 1:2], memory[..., :6], past_key_values=cache)                  # wrong width
    with pytest.raises(ValueError, match=r"memory must have tgt's batch size 2"):
        dec(tgt[:, 1:2], memory[:1], past_key_values=cache)
    with pytest.raises(ValueError, match=r"tgt has batch 1 but past_key_values holds 2 rows"):
        dec(tgt[:1, 1:2], memory[:1], past_key_values=cache)
    with pytest.raises(ValueError, match=r"memory has length 3 but past_key_values holds .* of length 4"):
        dec(tgt[:, 1:2], memory[:, :3], past_key_values=cache)
    with pytest.raises(ValueError, match=r"tgt_mask must be None in the cached forward"):
        dec(tgt[:, 1:2], memory, tgt_mask=np.zeros((1, 1)), past_key_values=cache)
    with pytest.raises(ValueError, match=r"tgt_key_padding_mask must be None in the cached forward"):
        dec(tgt[:, 1:2], memory, tgt_key_padding_mask=np.zeros((2, 1), bool), past_key_values=cache)
    with pytest.raises(ValueError, match=r"memory_is_causal=True is not supported in the cached forward"):
        dec(tgt[:, 1:2], memory, memory_is_causal=True, past_key_values=cache)
    with pytest.raises(ValueError, match=r"past_key_values given with use_cache=False"):
        dec(tgt[:, 1:2], memory, past_key_values=cache, use_cache=False)
    with pytest.raises(TypeError, match=r"past_key_values must be an nt.KVCache"):
        dec(tgt[:, 1:2], memory, past_key_values={})
    assert set(cache.keys) == set(before) and all(np.array_equal(cache.keys[k], before[k]) for k in before)
    out, cache = dec(tgt[:, 1:2], memory, past_key_values=cache)                  # refused calls changed nothing
    assert cache.get_seq_length(0) == 2
    custom = nt.Transformer(d_model=8, nhead=2, num_encoder_layers=1, dim_feedforward=16, dtype=np.float64,
                            custom_decoder=nt.TransformerEncoderLayer(8, 2, dtype=np.float64))
    with pytest.raises(TypeError, match=r"use_cache/past_key_values need an nt.TransformerDecoder"):
        custom.decode(tgt, memory, use_cache=True)
