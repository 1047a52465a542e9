"""nt.GPT: the tied gradient, the KV cache (cached logits equal the full forward at every step), the
torch twin's cache, state_dict keys, and the errors. The registry's GPT case (tests/nn/test_modules_vs_torch.py)
compares outputs and every parameter gradient with torch.nn blocks and with the twin, dropout active."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.models.gpt_config import NORMS, POSITIONS
from reference_torch.models import gpt as RG

torch.set_num_threads(1)


def _model(dtype="float64", seed=0, **kw):
    cfg = dict(vocab_size=11, block_size=12, n_layer=2, n_head=2, n_embd=8, n_inner=16, dtype=dtype)
    cfg.update(kw)
    return nt.GPT(nt.GPTConfig(**cfg), seed=seed)


def _perturb(model, seed):
    """Random weights of O(1) (GPT-2's 0.02 embeddings would make every logit tiny)."""
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data[...] += (0.5 * rng.standard_normal(p.shape)).astype(p.dtype)
    return model


# ------------------------------------------------------------------------------------------------
# the tied embedding
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_tied_gradient_is_the_sum_of_both_uses(positions):
    """Tied: one weight W used as the embedding table and as the head. Its gradient equals the untied
    model's embedding gradient plus its head gradient, on the same numbers (docs/derivations.md)."""
    tied = _perturb(_model(positions=positions, tie_word_embeddings=True, seed=1), 2)
    untied = _model(positions=positions, tie_word_embeddings=False, seed=1)
    untied.load_state_dict(tied.state_dict())                  # lm_head.weight := the tied W
    assert np.array_equal(untied.lm_head.weight.data, untied.wte.weight.data)
    assert untied.lm_head.weight is not untied.wte.weight and tied.lm_head.weight is tied.wte.weight
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 11, size=(3, 7))
    dlogits = rng.standard_normal((3, 7, 11))
    for m in (tied, untied):
        m.eval()
        m(ids)
        m.backward(dlogits)
    head, emb = untied.lm_head.weight.grad, untied.wte.weight.grad
    assert np.abs(head).max() > 0.1 and np.abs(emb).max() > 0.1      # both uses contribute
    assert_close({"tied grad vs head + embedding": (tied.wte.weight.grad, head + emb)}, tol=1e-12)
    # and against torch's autograd through the tied twin
    ref = RG.to_torch(tied).eval()
    assert ref.lm_head.weight is ref.wte.weight
    out = ref(ids)
    out.backward(torch.from_numpy(dlogits))
    assert_close({"tied grad vs torch": (tied.wte.weight.grad, ref.wte.weight.grad)}, tol=1e-12)


def test_tied_parameter_listed_once_state_dict_under_both_names():
    m = _model(tie_word_embeddings=True)
    names = [n for n, _ in m.named_parameters()]
    assert "wte.weight" in names and "lm_head.weight" not in names
    sd = m.state_dict()
    assert sd["lm_head.weight"] is sd["wte.weight"]
    ref = RG.to_torch(m)
    assert list(ref.state_dict()) == list(sd) and [n for n, _ in ref.named_parameters()] == names


@pytest.mark.parametrize("positions,tie", [("learned", True), ("sinusoidal", False)])
def test_state_dict_keys(positions, tie):
    m = _model(positions=positions, tie_word_embeddings=tie, n_layer=1)
    block = ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
             "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
             "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    expected = ["wte.weight"] + (["wpe.weight"] if positions == "learned" else []) + [f"h.0.{k}" for k in block] + [
        "ln_f.weight", "ln_f.bias", "lm_head.weight"]
    assert list(m.state_dict()) == expected
    other = _model(positions=positions, tie_word_embeddings=tie, n_layer=1, seed=5)
    other.load_state_dict(m.state_dict())
    assert all(np.array_equal(a, other.state_dict()[k]) for k, a in m.state_dict().items())


def test_from_torch_round_trip():
    ref = RG.GPT(nt.GPTConfig(7, block_size=6, n_layer=1, n_head=2, n_embd=4, dtype="float64")).eval()
    m = RG.from_torch(ref)
    assert not m.training
    ids = np.arange(6)[None] % 7
    with torch.no_grad():
        assert_close({"logits": (m(ids), ref(ids))})


# ------------------------------------------------------------------------------------------------
# the KV cache
# ------------------------------------------------------------------------------------------------

@given(seed=st.integers(0, 2**31), b=st.integers(1, 3), prompt=st.integers(1, 5), chunk=st.integers(1, 3),
       positions=st.sampled_from(POSITIONS), tie=st.booleans(),
       heads=st.sampled_from([1, 2, 4]), bias=st.booleans(), ffn=st.sampled_from(["gelu", "relu", "silu", "swiglu"]),
       norm=st.sampled_from(NORMS), mqa=st.booleans())
def test_cached_decoding_equals_full_forward_at_every_step(seed, b, prompt, chunk, positions, tie, heads, bias,
                                                           ffn, norm, mqa):
    """The prompt in one call, then the rest ``chunk`` tokens at a time: every position's logits equal
    the full forward over the whole sequence, float64 to 1e-12 (every position scheme, norm, feed-forward,
    and multi-query attention, whose cache holds one key/value head)."""
    m = _perturb(_model(positions=positions, tie_word_embeddings=tie, n_head=heads, bias=bias, ffn=ffn, norm=norm,
                        num_kv_heads=1 if mqa else None, relative_attention_num_buckets=6,
                        relative_attention_max_distance=5, seed=seed % 1000), seed).eval()
    ids = np.random.default_rng(seed).integers(0, 11, size=(b, 12))
    full = m(ids)                                                                # (B, 12, V)
    logits, cache = m(ids[:, :prompt], use_cache=True)
    assert cache.get_seq_length() == prompt and len(cache) == 2
    assert_close({"prompt": (logits, full[:, :prompt])}, tol=1e-12)
    t = prompt
    while t < 12:
        step, cache2 = m(ids[:, t:t + chunk], past_key_values=cache)
        assert cache2 is cache
        assert_close({f"positions {t}..": (step, full[:, t:t + chunk])}, tol=1e-12)
        t += chunk
    assert cache.get_seq_length() == 12


def test_cached_decoding_float32():
    m = _perturb(_model(dtype="float32", seed=4), 4).eval()
    ids = np.random.default_rng(0).integers(0, 11, size=(2, 9))
    full = m(ids)
    logits, cache = m(ids[:, :1], use_cache=True)
    for t in range(1, 9):
        step, cache = m(ids[:, t:t + 1], past_key_values=cache)
        assert step.dtype == np.float32 and cache.keys[0].dtype == np.float32
        assert_close({f"position {t}": (step, full[:, t:t + 1])}, dtype=np.float32)


def test_torch_twin_cache_equals_its_full_forward_and_ours():
    m = _perturb(_model(seed=6, positions="sinusoidal"), 6).eval()
    ref = RG.to_torch(m).eval()
    ids = np.random.default_rng(1).integers(0, 11, size=(2, 10))
    with torch.no_grad():
        full = ref(ids)
    logits, past = ref(ids[:, :4], use_cache=True)
    ours, cache = m(ids[:, :4], use_cache=True)
    pairs = {"prompt": (logits, full[:, :4]), "ours prompt": (ours, logits)}
    for t in range(4, 10):
        logits, past = ref(ids[:, t:t + 1], past_key_values=past, use_cache=True)
        ours, cache = m(ids[:, t:t + 1], past_key_values=cache)
        pairs[f"twin {t}"] = (logits, full[:, t:t + 1])
        pairs[f"ours {t}"] = (ours, logits)
    assert_close(pairs, tol=1e-12)


def test_cache_reorder_and_cross_attention_slot():
    """The API the Transformer decoder can reuse: a memory slot is projected once and attended without
    a causal mask; ``cached_attention`` equals the module's own cross-attention."""
    rng = np.random.default_rng(0)
    attn = nt.MultiheadAttention(6, 2, dtype=np.float64, seed=0)
    for p in attn.parameters():
        p.data[...] += 0.3 * rng.standard_normal(p.shape)
    q, mem = rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 5, 6))
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[1, 3:] = True
    ref, _ = attn(q, mem, mem, key_padding_mask=kpm, need_weights=False)
    cache = nt.KVCache()
    first = nt.nn.cached_attention(attn, q[:, :1], cache, slot=("cross", 0), memory=mem, key_padding_mask=kpm)
    rest = nt.nn.cached_attention(attn, q[:, 1:], cache, slot=("cross", 0), memory=mem * 0, key_padding_mask=kpm)
    assert_close({"cross": (np.concatenate([first, rest], axis=1), ref)}, tol=1e-12)   # memory read once
    causal, _ = attn(q, q, q, is_causal=True, need_weights=False)
    got = [nt.nn.cached_attention(attn, q[:, i:i + 1], cache, slot=0) for i in range(4)]
    assert_close({"self": (np.concatenate(got, axis=1), causal)}, tol=1e-12)
    cache.reorder_cache([1, 1])
    assert np.array_equal(cache.keys[0][0], cache.keys[0][1]) and cache.batch_size == 2
    with pytest.raises(ValueError, match="not appended"):
        cache.update(("cross", 0), cache.keys[0], cache.values[0])


def test_backward_after_cached_forward_is_refused_and_model_stays_usable():
    m = _model()
    ids = np.zeros((1, 3), dtype=np.int64)
    logits, _ = m(ids, use_cache=True)
    with pytest.raises(RuntimeError, match="inference only"):
        m.backward(np.ones_like(logits))
    y = m(ids)
    assert m.backward(np.ones_like(y)) is None and m.wte.weight.grad is not None


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------

def test_errors_name_the_argument():
    m = _model(block_size=6)
    with pytest.raises(ValueError, match=r"ids: 7 positions exceed block_size=6"):
        m(np.zeros((1, 7), dtype=np.int64))
    _, cache = m(np.zeros((1, 4), dtype=np.int64), use_cache=True)
    with pytest.raises(ValueError, match=r"ids: 3 positions after the 4 cached positions exceed block_size=6"):
        m(np.zeros((1, 3), dtype=np.int64), past_key_values=cache)
    assert cache.get_seq_length() == 4                          # refused: the cache is unchanged
    with pytest.raises(ValueError, match="non-empty"):
        m(np.zeros((1, 0), dtype=np.int64))
    with pytest.raises(TypeError, match="integer"):
        m(np.zeros((1, 2)))
    with pytest.raises(IndexError, match=r"ids must lie in \[0, 11\)"):
        m(np.array([[11]]))
    with pytest.raises(ValueError, match="use_cache=False"):
        m(np.zeros((1, 1), dtype=np.int64), past_key_values=cache, use_cache=False)
    with pytest.raises(TypeError, match="past_key_values must be an nt.KVCache"):
        m(np.zeros((1, 1), dtype=np.int64), past_key_values=[(1, 2)])
    with pytest.raises(ValueError, match="batch 2 but past_key_values holds 1"):
        m(np.zeros((2, 1), dtype=np.int64), past_key_values=cache)
    with pytest.raises(ValueError, match="n_embd must be divisible by n_head"):
        nt.GPTConfig(5, n_embd=6, n_head=4)
    with pytest.raises(ValueError, match="positions must be one of"):
        nt.GPTConfig(5, positions="t5")
    with pytest.raises(ValueError, match="norm must be one of"):
        nt.GPTConfig(5, norm="batchnorm")
    with pytest.raises(ValueError, match="n_head must be a multiple of num_kv_heads, got n_head=4 and num_kv_heads=3"):
        nt.GPTConfig(5, n_embd=8, n_head=4, num_kv_heads=3)
    with pytest.raises(ValueError, match="positions='rope' needs an even head dimension"):
        nt.GPTConfig(5, n_embd=6, n_head=2, positions="rope")
    with pytest.raises(ValueError, match="ffn must be one of"):
        nt.GPTConfig(5, ffn="tanh")
    with pytest.raises(TypeError, match="either config or its fields"):
        nt.GPT(nt.GPTConfig(5), n_layer=3)
    out = m(np.zeros((1, 2), dtype=np.int64))                   # still usable after every refusal
    assert out.shape == (1, 2, 11)


def test_config_round_trip_and_keyword_construction():
    cfg = nt.GPTConfig(9, block_size=5, n_layer=1, n_head=1, n_embd=4, dtype=np.float64)
    assert cfg.dtype == "float64" and cfg.ffn_dim == 16
    assert nt.GPTConfig(**cfg.to_dict()) == cfg
    m = nt.GPT(vocab_size=9, block_size=5, n_layer=1, n_head=1, n_embd=4, dtype="float64", seed=0)
    assert nt.GPT(cfg.to_dict(), seed=0).config == m.config
    assert np.array_equal(nt.GPT(cfg, seed=0).wte.weight.data, m.wte.weight.data)


@given(seed=st.integers(0, 2**31), positions=st.sampled_from(["rope", "alibi", "relative", "learned"]),
       ffn=st.sampled_from(["gelu", "swiglu"]), mqa=st.booleans(), pad=st.integers(1, 3), cached=st.booleans())
def test_modern_blocks_left_padding_equals_each_prompt_alone(seed, positions, ffn, mqa, pad, cached):
    """The modern blocks take Hugging Face's attention_mask too: a left-padded row's real positions give
    the logits of that row run alone (rotary positions counted from its first real token; ALiBi and the
    relative bias depend on distances only), with and without the KV cache."""
    m = _perturb(_model(positions=positions, ffn=ffn, norm="rmsnorm", n_head=2, num_kv_heads=1 if mqa else None,
                        relative_attention_num_buckets=6, relative_attention_max_distance=5, seed=seed % 1000),
                 seed).eval()
    assert m.config.modern or positions == "learned"
    rng = np.random.default_rng(seed)
    s = 6
    ids = rng.integers(0, 11, size=(2, s))
    mask = np.ones((2, s), dtype=np.int64)
    mask[1, :pad] = 0                                              # row 1: `pad` padding tokens on the left
    if cached:
        logits, cache = m(ids[:, :3], attention_mask=mask[:, :3], use_cache=True)
        rest, _ = m(ids[:, 3:], past_key_values=cache, attention_mask=mask)
        logits = np.concatenate([logits, rest], axis=1)
    else:
        logits = m(ids, attention_mask=mask)
    alone = m(ids[1:, pad:])
    assert_close({"padded row vs alone": (logits[1, pad:], alone[0]), "row 0 vs alone": (logits[0], m(ids[:1])[0])},
                 tol=1e-12)
