"""Prompts of unequal length: ``attention_mask`` (B, S) of 0/1 with left padding, in ``nt.GPT.forward`` and
``generate``.

* a left-padded batch's logits at the real positions equal each prompt run alone, and every logit
  equals the torch twin's (float64, 1e-12), gradients included;
* the cached forward (prompt chunked, then token by token) equals the full padded forward;
* generation: each padded row gets exactly the tokens it gets alone (greedy, beams, eos), sampling of
  a padded row equals the unpadded prompt with the same seed, use_cache True/False identical;
* a mutant whose positions are not shifted fails the check above (the check can fail);
* right padding and malformed masks are refused, naming ``attention_mask``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from reference_torch.models import gpt as RG

torch.set_num_threads(1)
V = 11


def _model(dtype="float64", seed=0, **kw):
    cfg = dict(vocab_size=V, block_size=12, n_layer=2, n_head=2, n_embd=8, n_inner=16, dtype=dtype)
    cfg.update(kw)
    m = nt.GPT(nt.GPTConfig(**cfg), seed=seed)
    rng = np.random.default_rng(seed + 100)
    for p in m.parameters():                   # O(1) weights: peaked, distinct next-token distributions
        p.data[...] += (0.6 * rng.standard_normal(p.shape)).astype(p.dtype)
    return m.eval()


def _padded(lengths, seed=0, pad_id=3):
    """Prompts of the given lengths, left-padded with ``pad_id`` to the longest: (prompts, ids, mask)."""
    rng = np.random.default_rng(seed)
    s = max(lengths)
    prompts = [rng.integers(0, V, size=n) for n in lengths]
    ids = np.stack([np.concatenate([np.full(s - len(p), pad_id), p]) for p in prompts])      # (B, S)
    mask = (np.arange(s)[None, :] >= s - np.asarray(lengths)[:, None]).astype(np.int64)   # (B, S) 1 = real
    return prompts, ids, mask


def _alone_pairs(model, prompts, logits, tag=""):
    """``{name: (padded row's logits at its real positions, that prompt alone)}``."""
    s = logits.shape[1]
    return {f"{tag}row {i}": (logits[i, s - len(p):], model(p[None])[0]) for i, p in enumerate(prompts)}


lengths_st = st.lists(st.integers(1, 6), min_size=1, max_size=4)


@given(seed=st.integers(0, 2**31), lengths=lengths_st, positions=st.sampled_from(["learned", "sinusoidal"]),
       tie=st.booleans(), heads=st.sampled_from([1, 2, 4]))
def test_left_padded_logits_equal_each_prompt_alone_and_the_torch_twin(seed, lengths, positions, tie, heads):
    m = _model(seed=seed % 1000, positions=positions, tie_word_embeddings=tie, n_head=heads)
    prompts, ids, mask = _padded(lengths, seed)
    logits = m(ids, attention_mask=mask)                                         # (B, S, V)
    assert_close(_alone_pairs(m, prompts, logits), tol=1e-12)
    with torch.no_grad():
        ref = RG.to_torch(m).eval()(ids, attention_mask=mask).numpy()
    assert_close({"logits vs twin": (logits, ref)}, tol=1e-12)


@given(seed=st.integers(0, 2**31), lengths=lengths_st, chunk=st.integers(1, 3),
       positions=st.sampled_from(["learned", "sinusoidal"]))
def test_cached_padded_forward_equals_the_full_one(seed, lengths, chunk, positions):
    """The padded prompt in chunks (with the mask so far), then 4 real tokens one at a time (the mask
    omitted, the cache keeps it, or passed whole each call): every logit equals the full padded
    forward's."""
    m = _model(seed=seed % 1000, positions=positions)
    prompts, ids, mask = _padded(lengths, seed)
    more = np.random.default_rng(seed + 1).integers(0, V, size=(len(lengths), 4))
    seq, full_mask = np.concatenate([ids, more], 1), np.concatenate([mask, np.ones_like(more)], 1)
    full = m(seq, attention_mask=full_mask)
    s = ids.shape[1]
    for whole in (False, True):
        logits, cache, t = [], None, 0
        while t < seq.shape[1]:
            n = chunk if t < s else 1
            kw = dict(attention_mask=full_mask[:, :t + n]) if whole or t < s else {}
            out, cache = m(seq[:, t:t + n], past_key_values=cache, use_cache=True, **kw)
            logits.append(out)
            t += n
        if not mask.all():                     # nothing padded: the plain path, no mask kept
            assert cache.attention_mask.shape == full_mask.shape
        assert_close({f"cached (mask passed whole: {whole})": (np.concatenate(logits, 1), full)}, tol=1e-12)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_padded_backward_equals_the_twins_autograd(positions):
    """Training through the mask: every parameter gradient equals torch autograd's, random upstream
    gradient, float64."""
    m = _model(seed=5, positions=positions).train()
    _, ids, mask = _padded([2, 5, 4], seed=5)
    ref = RG.to_torch(m).eval()
    m.eval()
    logits = m(ids, attention_mask=mask)
    dlogits = np.random.default_rng(0).standard_normal(logits.shape)
    m.zero_grad()
    m.backward(dlogits)
    out = ref(ids, attention_mask=mask)
    out.backward(torch.from_numpy(dlogits))
    ours = dict(m.named_parameters())
    pairs = {name: (ours[name].grad, p.grad.numpy()) for name, p in ref.named_parameters()}
    pairs["logits"] = (logits, out.detach().numpy())
    assert len(pairs) > 10
    assert_close(pairs, tol=1e-10)


def test_float32_padded_logits_stay_float32_and_match_alone():
    m = _model(dtype="float32", seed=2)
    prompts, ids, mask = _padded([1, 4, 2], seed=2)
    logits = m(ids, attention_mask=mask)
    assert logits.dtype == np.float32
    assert_close(_alone_pairs(m, prompts, logits), dtype=np.float32)


# ------------------------------------------------------------------------------------------------
# generation
# ------------------------------------------------------------------------------------------------

def _generated_alone(model, prompts, out, s, **kwargs):
    """Check each padded row of ``out`` against the same prompt generated alone."""
    for i, p in enumerate(prompts):
        alone = model.generate(p[None], 5, **kwargs)[0]
        row = out[i, s - len(p):]
        assert np.array_equal(row[:len(alone)], alone), (i, row, alone)
        assert np.all(row[len(alone):] == kwargs.get("eos_token_id", -1)), (i, row, alone)


@given(seed=st.integers(0, 2**31), lengths=lengths_st,
       kwargs=st.sampled_from([dict(), dict(num_beams=3), dict(num_beams=2, eos_token_id=2),
                               dict(eos_token_id=4)]),
       use_cache=st.booleans())
def test_padded_generation_equals_each_prompt_alone(seed, lengths, kwargs, use_cache):
    m = _model(seed=seed % 1000)
    prompts, ids, mask = _padded(lengths, seed)
    out = m.generate(ids, 5, attention_mask=mask, use_cache=use_cache, **kwargs)
    assert np.array_equal(out[:, :ids.shape[1]], ids)
    _generated_alone(m, prompts, out, ids.shape[1], use_cache=use_cache, **kwargs)


@pytest.mark.parametrize("kwargs", [dict(), dict(do_sample=True, seed=3),
                                    dict(do_sample=True, temperature=0.7, top_k=4, top_p=0.9, seed=5),
                                    dict(num_beams=3), dict(num_beams=4, eos_token_id=2), dict(eos_token_id=2)])
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_use_cache_true_and_false_identical_with_padding(kwargs, positions):
    m = _model(seed=2, positions=positions)
    _, ids, mask = _padded([3, 1, 5], seed=7)
    a = m.generate(ids, 6, attention_mask=mask, use_cache=True, **kwargs)
    b = m.generate(ids, 6, attention_mask=mask, use_cache=False, **kwargs)
    assert np.array_equal(a, b)
    assert a.shape[1] > ids.shape[1]


@pytest.mark.parametrize("use_cache", [True, False])
def test_sampling_a_padded_row_equals_the_prompt_alone(use_cache):
    """One uniform per row and step: a single padded row draws exactly what the bare prompt draws."""
    m = _model(seed=4)
    prompt = np.array([[5, 1, 8]])
    padded, mask = np.array([[0, 0, 5, 1, 8]]), np.array([[0, 0, 1, 1, 1]])
    kw = dict(do_sample=True, temperature=1.3, top_k=6, seed=11, use_cache=use_cache)
    alone = m.generate(prompt, 7, **kw)
    out = m.generate(padded, 7, attention_mask=mask, **kw)
    assert np.array_equal(out[:, 2:], alone)
    assert len(set(alone[0, 3:])) > 1


def test_a_mask_of_ones_changes_nothing_and_the_limit_counts_real_tokens():
    m = _model(seed=1)
    ids = np.random.default_rng(0).integers(0, V, size=(2, 4))
    assert np.array_equal(m.generate(ids, 5, attention_mask=np.ones((2, 4), int)), m.generate(ids, 5))
    # block_size 12: a 10-wide batch whose longest prompt has 4 real tokens may generate 8 more
    _, ids, mask = _padded([4, 2], seed=1)
    ids, mask = np.pad(ids, ((0, 0), (6, 0))), np.pad(mask, ((0, 0), (6, 0)))
    assert m.generate(ids, 8, attention_mask=mask).shape == (2, 18)
    # past 12 real tokens generation crops to the last 12 columns (nanoGPT): each row as if alone
    prompts, _, _ = _padded([4, 2], seed=1)
    out = m.generate(ids, 11, attention_mask=mask)
    for row, prompt in zip(out, prompts):
        np.testing.assert_array_equal(row[10 - len(prompt):], m.generate(prompt[None], 11)[0])


# ------------------------------------------------------------------------------------------------
# the check can fail: positions not shifted
# ------------------------------------------------------------------------------------------------

def test_a_model_whose_positions_are_not_shifted_fails_the_check(monkeypatch):
    """Mutant: positions 0..S-1 whatever the padding (the bug a mask-only implementation has). The
    padded rows' logits then differ from the prompts alone, and the twin disagrees."""
    m = _model(seed=0)
    prompts, ids, mask = _padded([1, 6], seed=0)
    monkeypatch.setattr(nt.models.gpt, "position_ids",
                        lambda mask: np.broadcast_to(np.arange(mask.shape[1]), mask.shape))
    logits = m(ids, attention_mask=mask)
    with pytest.raises(AssertionError):
        assert_close(_alone_pairs(m, prompts, logits), tol=1e-12)
    with torch.no_grad():
        ref = RG.to_torch(m).eval()(ids, attention_mask=mask).numpy()
    with pytest.raises(AssertionError):
        assert_close({"logits vs twin": (logits, ref)}, tol=1e-12)
    with pytest.raises(AssertionError):
        _generated_alone(m, prompts, m.generate(ids, 5, attention_mask=mask), ids.shape[1])


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mask,error,match", [
    ([[1, 1, 0], [1, 1, 1]], ValueError, r"attention_mask row 0 has a 0 after a 1 \(right padding.*pad prompts on "
                                          r"the left"),
    ([[0, 1, 0], [1, 1, 1]], ValueError, r"right padding"),
    ([[1, 1], [1, 1]], ValueError, r"attention_mask must have shape \(2, 3\).*got shape \(2, 2\)"),
    ([[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]], TypeError, r"attention_mask must be an integer or bool array of 0/1.*"
                                                     r"float64"),
    ([[0, 2, 1], [1, 1, 1]], ValueError, r"attention_mask must hold only 0 \(padding\) and 1"),
])
@pytest.mark.parametrize("where", ["forward", "generate"])
def test_malformed_attention_mask_is_refused(mask, error, match, where):
    m = _model()
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    call = (lambda: m(ids, attention_mask=mask)) if where == "forward" else \
        (lambda: m.generate(ids, 2, attention_mask=mask))
    with pytest.raises(error, match=match):
        call()
    assert m(ids).shape == (2, 3, V)                                             # still usable


def test_mask_errors_with_the_cache_and_an_empty_prompt():
    m = _model()
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match=r"attention_mask row 1 is all 0: an empty prompt"):
        m.generate(ids, 2, attention_mask=[[0, 1, 1], [0, 0, 0]])
    _, cache = m(ids, use_cache=True, attention_mask=[[0, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(2, 4\) .*got shape \(2, 1\)"):
        m(ids[:, :1], past_key_values=cache, attention_mask=[[1], [1]])
    with pytest.raises(ValueError, match=r"attention_mask's first 3 columns \(the cached positions\) differ"):
        m(ids[:, :1], past_key_values=cache, attention_mask=[[1, 1, 1, 1], [1, 1, 1, 1]])
    out, cache = m(ids[:, :1], past_key_values=cache, attention_mask=[[0, 1, 1, 1], [1, 1, 1, 1]])
    assert out.shape == (2, 1, V) and cache.get_seq_length() == 4


def test_block_size_counts_real_positions_in_the_forward():
    m = _model()                                                                 # block_size 12
    ids = np.ones((2, 14), dtype=np.int64)
    mask = np.pad(np.ones((2, 12), dtype=np.int64), ((0, 0), (2, 0)))            # 14 wide, 12 real
    assert m(ids, attention_mask=mask).shape == (2, 14, V)
    mask[0, 1] = 1
    with pytest.raises(ValueError, match=r"ids: row 0 holds 13 real positions .*more than block_size=12"):
        m(ids, attention_mask=mask)


def test_cached_attention_self_padding_float_and_bool_agree():
    """``cached_attention``'s self-attention key padding mask: bool True = padding, or float added
    (-inf = padding); both equal the module's own attention with the causal and padding masks."""
    rng = np.random.default_rng(0)
    attn = nt.MultiheadAttention(6, 2, dtype=np.float64, batch_first=True, seed=0)
    x = rng.standard_normal((2, 5, 6))
    pad = np.array([[True, True, False, False, False], [False] * 5])
    ref, _ = attn(x, x, x, attn_mask=nt.functional.causal_mask(5), key_padding_mask=pad, need_weights=False)
    for kpm in (pad, np.where(pad, -np.inf, 0.0)):
        cache = nt.KVCache()
        first = nt.nn.kv_cache.cached_attention(attn, x[:, :3], cache, 0, key_padding_mask=kpm[:, :3])
        rest = nt.nn.kv_cache.cached_attention(attn, x[:, 3:], cache, 0, key_padding_mask=kpm)
        assert_close({f"{kpm.dtype}": (np.concatenate([first, rest], 1), ref)}, tol=1e-12)
    cache = nt.KVCache()
    nt.nn.kv_cache.cached_attention(attn, x[:, :3], cache, 0, key_padding_mask=pad[:, :3])
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(2, 5\) \(the 3 cached and 2 new"):
        nt.nn.kv_cache.cached_attention(attn, x[:, 3:], cache, 0, key_padding_mask=pad[:, :3])
    assert cache.get_seq_length(0) == 3                                          # refused: cache unchanged
