"""Generation past ``block_size``: nanoGPT's crop. The model sees each row's last ``block_size``
tokens, the KV cache rebuilt from that window at every step; the tokens equal a step-by-step loop of
full forwards over ``seq[:, -block_size:]`` (nanoGPT's ``generate``), for every kind of positions."""

from __future__ import annotations

import numpy as np
import pytest

import numpy_transformer as nt


def _model(positions="learned", block_size=6, seed=0):
    m = nt.GPT(nt.GPTConfig(11, block_size=block_size, n_layer=2, n_head=2, n_embd=8, n_inner=16,
                            positions=positions, dtype="float64"), seed=seed)
    rng = np.random.default_rng(seed + 100)
    for p in m.parameters():                   # O(1) weights: peaked, distinct next-token distributions
        p.data[...] += 0.6 * rng.standard_normal(p.shape)
    return m.eval()


def _nanogpt_greedy(m, ids, n, block_size):
    """nanoGPT's loop: crop to the last block_size tokens, one full forward, the argmax of the last row."""
    seq = ids
    for _ in range(n):
        logits = m(seq[:, -block_size:])                                         # (B, <=bs, V)
        seq = np.concatenate([seq, logits[:, -1].argmax(-1)[:, None]], axis=1)
    return seq


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope", "alibi", "none"])
def test_greedy_past_block_size_equals_nanogpts_cropped_loop(positions, use_cache):
    m = _model(positions)
    ids = np.random.default_rng(1).integers(0, 11, size=(3, 4))
    out = m.generate(ids, 20, use_cache=use_cache)                   # 24 tokens, block_size 6
    assert out.shape == (3, 24)
    np.testing.assert_array_equal(out, _nanogpt_greedy(m, ids, 20, 6))


def test_a_prompt_longer_than_block_size_is_cropped_and_kept():
    m = _model()
    ids = np.random.default_rng(2).integers(0, 11, size=(2, 9))
    out = m.generate(ids, 7)
    np.testing.assert_array_equal(out[:, :9], ids)
    np.testing.assert_array_equal(out, _nanogpt_greedy(m, ids, 7, 6))


def test_padded_batch_past_block_size_equals_each_prompt_alone():
    m = _model()
    ids = np.array([[0, 0, 3, 5], [1, 2, 3, 4]])
    mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]])
    out = m.generate(ids, 12, attention_mask=mask)
    np.testing.assert_array_equal(out[0, 2:], m.generate(ids[:1, 2:], 12)[0])
    np.testing.assert_array_equal(out[1], m.generate(ids[1:], 12)[0])


def test_beam_search_and_sampling_past_block_size_cache_or_not():
    m = _model(seed=3)
    ids = np.random.default_rng(3).integers(0, 11, size=(2, 3))
    for kw in (dict(num_beams=3), dict(num_beams=2, eos_token_id=[2, 5]), dict(do_sample=True, seed=4)):
        a, b = m.generate(ids, 15, **kw), m.generate(ids, 15, use_cache=False, **kw)
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(m.generate(ids, 15, num_beams=1), _nanogpt_greedy(m, ids, 15, 6))
