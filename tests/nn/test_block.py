"""nt.GroupedQueryAttention and nt.TransformerBlock beyond the registry's comparisons
(tests/nn/test_modules_vs_torch.py runs them against torch's sdpa with enable_gqa and the twins):

* with one key/value head per query head and no rotation they *are* torch.nn.MultiheadAttention and
  torch.nn.TransformerEncoderLayer (weights mapped: in_proj = [q; k; v]), outputs and every gradient;
* the cached forward equals the full causal forward at every position (GQA, rotary, a bias);
* the refusals name the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt

torch.set_num_threads(1)


def _t(a, grad=False):
    return torch.from_numpy(np.array(a, copy=True)).requires_grad_(grad)


def _perturb(module, seed):
    rng = np.random.default_rng(seed)
    for p in module.parameters():
        p.data[...] += (0.3 * rng.standard_normal(p.shape)).astype(p.dtype)
    return module


@given(b=st.integers(1, 3), s=st.integers(1, 5), h=st.integers(1, 3), dh=st.integers(1, 3), bias=st.booleans(),
       causal=st.booleans(), seed=st.integers(0, 99))
def test_one_kv_head_per_head_is_torch_multihead_attention(b, s, h, dh, bias, causal, seed):
    d = h * dh
    ours = _perturb(nt.GroupedQueryAttention(d, h, bias=bias, dtype=np.float64, seed=seed), seed)
    ref = torch.nn.MultiheadAttention(d, h, bias=bias, batch_first=True, dtype=torch.float64)
    a = ours
    with torch.no_grad():
        ref.in_proj_weight.copy_(_t(np.concatenate([a.q_proj.weight.data, a.k_proj.weight.data, a.v_proj.weight.data])))
        ref.out_proj.weight.copy_(_t(a.o_proj.weight.data))
        if bias:
            ref.in_proj_bias.copy_(_t(np.concatenate([a.q_proj.bias.data, a.k_proj.bias.data, a.v_proj.bias.data])))
            ref.out_proj.bias.copy_(_t(a.o_proj.bias.data))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, s, d))
    dout = rng.standard_normal((b, s, d))
    out = ours(x, is_causal=causal)
    dx = ours.backward(dout)
    xt = _t(x, True)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1) if causal else None
    out_t, _ = ref(xt, xt, xt, attn_mask=mask, need_weights=False)
    out_t.backward(_t(dout))
    pairs = {"out": (out, out_t), "dx": (dx, xt.grad)}
    dw = np.concatenate([a.q_proj.weight.grad, a.k_proj.weight.grad, a.v_proj.weight.grad])
    pairs.update({"in_proj_weight": (dw, ref.in_proj_weight.grad), "out_proj.weight": (a.o_proj.weight.grad,
                                                                                        ref.out_proj.weight.grad)})
    if bias:
        db = np.concatenate([a.q_proj.bias.grad, a.k_proj.bias.grad, a.v_proj.bias.grad])
        pairs["in_proj_bias"] = (db, ref.in_proj_bias.grad)
    assert_close(pairs, tol=1e-12)


@given(b=st.integers(1, 3), s=st.integers(1, 5), h=st.integers(1, 2), dh=st.integers(2, 3), f=st.integers(1, 6),
       act=st.sampled_from(["relu", "gelu"]), norm_first=st.booleans(), bias=st.booleans(), causal=st.booleans(),
       seed=st.integers(0, 99))
def test_the_default_block_is_torch_encoder_layer(b, s, h, dh, f, act, norm_first, bias, causal, seed):
    """LayerNorm, ReLU/GELU, H key/value heads, no rotation, no bias: torch.nn.TransformerEncoderLayer."""
    d = h * dh
    ours = _perturb(nt.TransformerBlock(d, h, f, ffn=act, norm_first=norm_first, bias=bias, dtype=np.float64,
                                        seed=seed), seed)
    ref = torch.nn.TransformerEncoderLayer(d, h, f, dropout=0.0, activation=act, batch_first=True,
                                           norm_first=norm_first, bias=bias, dtype=torch.float64)
    sd = ours.state_dict()
    a = "self_attn."
    mapped = {"self_attn.in_proj_weight": np.concatenate([sd[a + "q_proj.weight"], sd[a + "k_proj.weight"],
                                                          sd[a + "v_proj.weight"]]),
              "self_attn.out_proj.weight": sd[a + "o_proj.weight"]}
    if bias:
        mapped["self_attn.in_proj_bias"] = np.concatenate([sd[a + "q_proj.bias"], sd[a + "k_proj.bias"],
                                                           sd[a + "v_proj.bias"]])
        mapped["self_attn.out_proj.bias"] = sd[a + "o_proj.bias"]
    for k, v in sd.items():
        if k.startswith("mlp."):
            mapped[k[4:]] = v                                  # mlp.linear1.* -> linear1.*
        elif k.startswith("norm"):
            mapped[k] = v
    ref.load_state_dict({k: _t(v) for k, v in mapped.items()}, strict=True)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, s, d))
    dout = rng.standard_normal((b, s, d))
    out = ours(x, is_causal=causal)
    dx = ours.backward(dout)
    xt = _t(x, True)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1) if causal else None
    out_t = ref(xt, src_mask=mask, is_causal=causal)
    out_t.backward(_t(dout))
    pairs = {"out": (out, out_t), "dx": (dx, xt.grad),
             "norm1.weight": (ours.norm1.weight.grad, ref.norm1.weight.grad),
             "linear1.weight": (ours.mlp.linear1.weight.grad, ref.linear1.weight.grad),
             "linear2.weight": (ours.mlp.linear2.weight.grad, ref.linear2.weight.grad),
             "v_proj.weight": (ours.self_attn.v_proj.weight.grad, ref.self_attn.in_proj_weight.grad[2 * d:])}
    assert_close(pairs, tol=1e-10)


@given(h_kv=st.integers(1, 2), g=st.integers(1, 3), dh=st.sampled_from([2, 4]), s=st.integers(2, 6),
       rope=st.booleans(), bias=st.booleans(), norm_first=st.booleans(), ffn=st.sampled_from(["gelu", "swiglu"]),
       seed=st.integers(0, 99))
def test_cached_forward_equals_the_full_causal_forward(h_kv, g, dh, s, rope, bias, norm_first, ffn, seed):
    h = h_kv * g
    d = h * dh
    block = _perturb(nt.TransformerBlock(d, h, 5, num_kv_heads=h_kv, ffn=ffn, norm="rmsnorm", norm_first=norm_first,
                                         rope=rope, dtype=np.float64, seed=seed), seed).eval()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, s, d))
    full_bias = rng.standard_normal((h, s, s)) if bias else None
    full = block(x, attn_bias=full_bias, is_causal=True)
    cache = nt.KVCache()
    first = 1 + seed % (s - 1)                               # a prompt of `first` positions, then one by one
    rows = [block.forward_cached(x[:, :first], cache, 0,
                                 attn_bias=None if full_bias is None else full_bias[:, :first, :first])]
    for t in range(first, s):
        rows.append(block.forward_cached(x[:, t:t + 1], cache, 0,
                                         attn_bias=None if full_bias is None else full_bias[:, t:t + 1, :t + 1]))
    assert cache.keys[0].shape == (2, h_kv, s, dh)           # the cache holds Hkv heads, not H
    assert_close({"cached": (np.concatenate(rows, axis=1), full)}, tol=1e-12)


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match=r"num_heads must be a multiple of num_kv_heads, got num_heads=4 and "
                                         r"num_kv_heads=3"):
        nt.GroupedQueryAttention(8, 4, 3)
    with pytest.raises(ValueError, match="rope needs an even head dimension"):
        nt.GroupedQueryAttention(6, 2, rope=True)
    attn = nt.GroupedQueryAttention(8, 4, 2, dtype=np.float64, seed=0)
    with pytest.raises(ValueError, match=r"attn_bias must have shape \(H, S, S\) = \(4, 3, 3\)"):
        attn(np.zeros((1, 3, 8)), attn_bias=np.zeros((2, 3, 3)))
    out = attn(np.ones((1, 3, 8)))                           # still usable after the refusal
    assert attn.backward(np.ones_like(out)).shape == (1, 3, 8)
    with pytest.raises(ValueError, match="ffn must be one of"):
        nt.TransformerBlock(8, 2, 4, ffn="tanh")
    with pytest.raises(ValueError, match="norm must be one of"):
        nt.TransformerBlock(8, 2, 4, norm="batchnorm")
