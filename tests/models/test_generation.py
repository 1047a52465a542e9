"""numpy_transformer.models.generation: greedy, sampling (temperature, top-k, top-p) and beam search.

* use_cache=True and False give identical tokens (greedy, sampling, beams, eos);
* greedy is the argmax of a full forward at every step;
* beam search with enough beams finds the exhaustive best sequence (all V**N continuations scored);
* top-k / top-p equal a torch transcription of Hugging Face's TopKLogitsWarper / TopPLogitsWarper;
* sampling follows the filtered distribution and is reproducible from ``seed``; batch prompts.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.models import generation as G

torch.set_num_threads(1)


def _model(v=11, seed=0, positions="learned", dropout=0.0, dtype="float64", block_size=16):
    m = nt.GPT(nt.GPTConfig(v, block_size=block_size, n_layer=2, n_head=2, n_embd=8, n_inner=16, dropout=dropout,
                            positions=positions, dtype=dtype), seed=seed)
    rng = np.random.default_rng(seed + 100)
    for p in m.parameters():                   # O(1) weights: peaked, distinct next-token distributions
        p.data[...] += 0.6 * rng.standard_normal(p.shape)
    return m.eval()


def _prompts(b=3, s=3, v=11, seed=0):
    return np.random.default_rng(seed).integers(0, v, size=(b, s))


# ------------------------------------------------------------------------------------------------
# greedy and the cache
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_greedy_is_the_argmax_of_a_full_forward_at_every_step(positions):
    m = _model(positions=positions)
    ids = _prompts()
    out = m.generate(ids, 8)
    assert out.shape == (3, 11) and np.array_equal(out[:, :3], ids)
    for t in range(3, 11):
        assert np.array_equal(out[:, t], m(out[:, :t])[:, -1].argmax(-1)), t
    assert len({tuple(r) for r in out[:, 3:]}) > 1                                # not a constant answer


@pytest.mark.parametrize("kwargs", [dict(), dict(do_sample=True, seed=3), dict(do_sample=True, temperature=0.7,
                                    top_k=4, top_p=0.9, seed=5), dict(num_beams=3), dict(num_beams=4, eos_token_id=2),
                                    dict(eos_token_id=2, pad_token_id=1), dict(num_beams=2, length_penalty=2.0,
                                                                               early_stopping=True, eos_token_id=3)])
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_use_cache_true_and_false_give_identical_tokens(kwargs, positions):
    m = _model(positions=positions, seed=2)
    ids = _prompts(seed=1)
    a = nt.generation.generate(m, ids, 10, use_cache=True, **kwargs)
    b = nt.generation.generate(m, ids, 10, use_cache=False, **kwargs)
    assert np.array_equal(a, b)


def test_batch_prompts_equal_one_prompt_at_a_time():
    m = _model(seed=4)
    ids = _prompts(b=4, seed=2)
    for kw in (dict(), dict(num_beams=3), dict(num_beams=3, eos_token_id=5)):
        batch = m.generate(ids, 7, **kw)
        for i in range(4):
            alone = m.generate(ids[i:i + 1], 7, **kw)[0]
            assert np.array_equal(batch[i, :len(alone)], alone), (kw, i)
            assert (batch[i, len(alone):] == (5 if "eos_token_id" in kw else -1)).all()


def test_eos_finishes_a_row_pads_it_and_stops_when_all_are_done():
    m = _model(seed=6)
    ids = _prompts(b=2, seed=3)
    plain = m.generate(ids, 8)
    eos = int(plain[0, 3 + 2])                     # row 0's third new token
    out = m.generate(ids, 8, eos_token_id=eos, pad_token_id=7)
    first = [int(np.flatnonzero(r[3:] == eos)[0]) if (r[3:] == eos).any() else None for r in plain]
    for r, f in enumerate(first):
        if f is None:
            assert np.array_equal(out[r], plain[r])
        else:
            assert np.array_equal(out[r, :3 + f + 1], plain[r, :3 + f + 1]) and (out[r, 3 + f + 1:] == 7).all()
    single = m.generate(ids[:1], 8, eos_token_id=eos)
    assert single.shape == (1, 3 + first[0] + 1) and single[0, -1] == eos       # stopped early


def test_generate_restores_the_mode_and_turns_dropout_off():
    m = _model(dropout=0.5, seed=1).train()
    ids = _prompts()
    a = m.generate(ids, 5)
    assert m.training
    assert np.array_equal(a, m.generate(ids, 5))
    m.eval()
    assert np.array_equal(a, m.generate(ids, 5)) and not m.training


class Bigram:
    """Any model with the cached-forward protocol: logits depend on the last token only."""

    def __init__(self, table):
        self.table, self.vocab_size, self.max_len = table, table.shape[0], None

    def __call__(self, ids, past_key_values=None, use_cache=None):
        logits = self.table[ids]                                                 # (B, S, V)
        if not use_cache:
            return logits
        return logits, past_key_values if past_key_values is not None else _NoCache()


class _NoCache:
    def reorder_cache(self, rows):
        return self


def test_any_model_with_the_protocol():
    table = np.log(np.random.default_rng(0).dirichlet(np.ones(5), size=5))
    model = Bigram(table)
    ids = np.array([[0], [3]])
    out = G.generate(model, ids, 4)
    expect = [[0], [3]]
    for _ in range(4):
        expect = [r + [int(table[r[-1]].argmax())] for r in expect]
    assert out.tolist() == expect
    assert np.array_equal(G.generate(model, ids, 4, num_beams=2, use_cache=False),
                          G.generate(model, ids, 4, num_beams=2))


# ------------------------------------------------------------------------------------------------
# beam search against exhaustive search
# ------------------------------------------------------------------------------------------------

def _sum_logprob(model, prompt, tokens):
    seq = np.array([list(prompt) + list(tokens)])
    lp = G.log_softmax(model(seq)[0].astype(np.float64))                         # (T, V)
    s = len(prompt)
    return float(sum(lp[s - 1 + i, t] for i, t in enumerate(tokens)))


def _exhaustive(model, prompt, v, n, eos=None, length_penalty=1.0):
    """Every continuation of up to n tokens (ending at the first eos), HF's score, best first."""
    seen = {}
    for tokens in itertools.product(range(v), repeat=n):
        if eos is not None and eos in tokens:
            tokens = tokens[:tokens.index(eos) + 1]
        if tokens not in seen:
            seen[tokens] = _sum_logprob(model, prompt, tokens) / len(tokens) ** length_penalty
    return sorted(seen.items(), key=lambda kv: -kv[1])


@pytest.mark.parametrize("n,beams", [(2, 3), (3, 9)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_search_finds_the_exhaustive_best(n, beams, seed):
    """V = 3: with num_beams = V (two new tokens) or V**2 (three) no prefix of any sequence is ever
    dropped, so beam search must return the most likely continuation of all V**n."""
    v = 3
    m = _model(v=v, seed=seed)
    ids = _prompts(b=2, s=2, v=v, seed=seed)
    out = m.generate(ids, n, num_beams=beams)
    for i in range(2):
        ranked = _exhaustive(m, ids[i], v, n, length_penalty=0.0)
        assert ranked[0][1] - ranked[1][1] > 1e-6                                 # a unique best
        assert tuple(out[i, 2:]) == ranked[0][0], (i, out[i], ranked[:3])


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("seed", [2, 6, 7])       # models where counting the eos in L or not changes the best
def test_beam_search_with_eos_and_length_penalty_finds_the_exhaustive_best(length_penalty, seed):
    """With an eos, finished hypotheses score sum_logprobs / L**length_penalty (L generated tokens,
    eos included); num_beams = V**n and early_stopping="never" make the search exact."""
    v, n, eos = 3, 3, 0
    m = _model(v=v, seed=seed)
    ids = _prompts(b=2, s=2, v=v, seed=seed)
    out = m.generate(ids, n, num_beams=v ** n, eos_token_id=eos, length_penalty=length_penalty,
                     early_stopping="never")
    for i in range(2):
        ranked = _exhaustive(m, ids[i], v, n, eos=eos, length_penalty=length_penalty)
        assert ranked[0][1] - ranked[1][1] > 1e-6
        got = list(out[i, 2:])
        got = tuple(got[:got.index(eos) + 1] if eos in got else got)
        assert got == ranked[0][0], (i, out[i], ranked[:3])


def _bigram(rows, v):
    """A Bigram model from ``{token: {next token: probability}}`` (the rest share what is left)."""
    table = np.zeros((v, v))
    for tok in range(v):
        given = rows.get(tok, {})
        rest = [t for t in range(v) if t not in given]
        table[tok] = (1 - sum(given.values())) / max(len(rest), 1)
        for t, p in given.items():
            table[tok, t] = p
    return Bigram(np.log(np.maximum(table, 1e-300)))


def test_beam_search_escapes_the_greedy_trap():
    """Greedy takes 1 (p .5) then a flat row; the best pair is 2 (p .4) then 3 (p .99). The beams start
    as one (HF's -1e9 on the copies), so two beams hold both first tokens."""
    v = 12
    model = _bigram({0: {1: 0.5, 2: 0.4}, 2: {3: 0.99}}, v)
    ids = np.array([[0]])
    assert G.generate(model, ids, 2).tolist() == [[0, 1, int(model.table[1].argmax())]]
    assert G.generate(model, ids, 2, num_beams=2).tolist() == [[0, 2, 3]]


@pytest.mark.parametrize("early_stopping,expected", [(True, [4, 1, 0]), (False, [4, 1, 0]), ("never", [4, 2, 3, 0])])
def test_beam_search_early_stopping(early_stopping, expected):
    """Two beams, eos = 0. Step 1 finishes [eos] (-0.69), step 2 [1, eos] (-0.65): num_beams hypotheses.
    early_stopping=True stops there. False stops there too: the best *running* beam, [2, 3] (-1.62),
    over its 2 tokens (-0.81) cannot beat the worst hypothesis (-0.69) (transformers 5 bounds the
    running beams only; 4.x also counted the just-finished [1, eos] and went on). "never" bounds it over
    the 4 tokens it may reach (-0.40), goes on and finds [2, 3, eos] ((log .2 + 2 log .99) / 3 = -0.54).
    The same tokens as transformers' generate: tests/models/test_beam_search_hf.py."""
    model = _bigram({4: {0: 0.5, 1: 0.3, 2: 0.2}, 1: {0: 0.9}, 2: {3: 0.99}, 3: {0: 0.99}}, 5)
    out = G.generate(model, np.array([[4]]), 4, num_beams=2, eos_token_id=0, pad_token_id=3,
                     early_stopping=early_stopping)
    assert out.tolist() == [expected]           # a finished hypothesis gets its eos back, then pad


def _exhaustive_multi_eos(model, prompt, v, n, eos, length_penalty=1.0):
    """The best continuation of up to n tokens, each ending at its first token in ``eos``, HF's score."""
    seen = {}
    for tokens in itertools.product(range(v), repeat=n):
        cut = next((i for i, t in enumerate(tokens) if t in eos), None)
        tokens = tokens if cut is None else tokens[:cut + 1]
        if tokens not in seen:
            seen[tokens] = _sum_logprob(model, prompt, tokens) / len(tokens) ** length_penalty
    return max(seen.items(), key=lambda kv: kv[1])[0]


@pytest.mark.parametrize("k", [2, 3])
def test_beam_search_with_several_eos_ids_ranking_on_top(k):
    """eos = [1, 2, 3] take ranks 1-3 after token 4 (p .39). Ranking only 2K candidates leaves fewer
    than K that are not an eos (K = 2: just token 4), and the search used to go on from filler rows
    (the pad token 1 with a summed log-prob of 0, which then wins: [0, 1, 5, 5], the pad inside the
    answer). Hugging Face ranks ``max(2, 1 + n_eos) * K``, which always holds K non-eos continuations:
    the beams are [0, 4] and [0, 5], and the best is [0, 4, 4, 4], the exhaustive best."""
    v, eos = 6, [1, 2, 3]
    model = _bigram({0: {1: 0.2, 2: 0.2, 3: 0.2, 4: 0.39}, 4: {4: 0.999}, 1: {5: 0.999}, 5: {5: 0.999}}, v)
    out = G.generate(model, np.array([[0]]), 3, num_beams=k, eos_token_id=eos)
    assert out.tolist() == [[0, 4, 4, 4]]
    assert tuple(out[0, 1:]) == _exhaustive_multi_eos(model, [0], v, 3, eos)


def test_beam_search_with_several_eos_ids_matches_exhaustive_search():
    """Random models, three eos ids, num_beams = V**n: the search is exact, eos ids finish it."""
    v, n, eos = 4, 3, [0, 2, 3]
    for seed in range(4):
        m = _model(v=v, seed=seed)
        ids = _prompts(b=2, s=2, v=v, seed=seed)
        out = m.generate(ids, n, num_beams=v ** n, eos_token_id=eos, early_stopping="never")
        for i in range(2):
            got = list(out[i, 2:])
            cut = next((j for j, t in enumerate(got) if t in eos), None)
            got = tuple(got if cut is None else got[:cut + 1])
            assert got == _exhaustive_multi_eos(m, ids[i], v, n, eos), (seed, i, out[i])


def test_beam_search_returns_the_eos_the_hypothesis_ended_with():
    """With eos = [1, 2], a hypothesis finished by 2 ends with 2 (the token the model produced, as
    Hugging Face's current beam search keeps it), not with eos_token_id[0]."""
    model = _bigram({0: {2: 0.6, 4: 0.4}, 4: {4: 0.5}}, 5)
    out = G.generate(model, np.array([[0], [0]]), 3, num_beams=2, eos_token_id=[1, 2], pad_token_id=3)
    assert out.tolist() == [[0, 2], [0, 2]]


def test_beam_search_one_beam_is_greedy():
    m = _model(seed=5)
    ids = _prompts(seed=5)
    assert np.array_equal(m.generate(ids, 6, num_beams=1), m.generate(ids, 6))


# ------------------------------------------------------------------------------------------------
# sampling, top-k, top-p
# ------------------------------------------------------------------------------------------------

def _hf_top_k(scores, top_k, min_tokens_to_keep=1):
    """transformers' TopKLogitsWarper.__call__, transcribed."""
    top_k = min(max(top_k, min_tokens_to_keep), scores.size(-1))
    indices_to_remove = scores < torch.topk(scores, top_k)[0][..., -1, None]
    return scores.masked_fill(indices_to_remove, -float("inf"))


def _hf_top_p(scores, top_p, min_tokens_to_keep=1):
    """transformers' TopPLogitsWarper.__call__, transcribed."""
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    return scores.masked_fill(indices_to_remove, -float("inf"))


@given(seed=st.integers(0, 2**31), b=st.integers(1, 4), v=st.integers(1, 40), top_k=st.integers(1, 45),
       top_p=st.floats(0.01, 1.0), scale=st.sampled_from([0.1, 1.0, 5.0]))
def test_top_k_and_top_p_equal_hugging_faces_warpers(seed, b, v, top_k, top_p, scale):
    scores = scale * np.random.default_rng(seed).standard_normal((b, v))
    t = torch.from_numpy(scores)
    k = G.top_k_filter(scores, top_k)
    assert np.array_equal(k, _hf_top_k(t, top_k).numpy())
    p = G.top_p_filter(scores, top_p)
    assert np.array_equal(p, _hf_top_p(t, top_p).numpy())
    assert np.array_equal(G.top_p_filter(k, top_p), _hf_top_p(_hf_top_k(t, top_k), top_p).numpy())
    assert np.isfinite(p).sum(-1).min() >= 1                                     # never an empty row


def test_top_k_and_top_p_small_cases():
    inf = np.inf
    s = np.array([[1.0, 3.0, 3.0, 2.0]])
    assert np.array_equal(G.top_k_filter(s, 2), [[-inf, 3, 3, -inf]])             # ties with the k-th stay
    assert np.array_equal(G.top_k_filter(s, 3), [[-inf, 3, 3, 2]])
    assert np.array_equal(G.top_k_filter(s, 10), s)
    logp = np.log([[0.5, 0.3, 0.15, 0.05]])
    keep = lambda p: np.isfinite(G.top_p_filter(logp, p))[0].tolist()             # noqa: E731
    assert keep(0.75) == [True, True, False, False]                               # 0.5 + 0.3 >= 0.75
    assert keep(0.9) == [True, True, True, False]
    assert keep(0.4) == [True, False, False, False]
    assert keep(1.0) == [True, True, True, True]


def test_sampling_follows_the_filtered_distribution():
    rng = np.random.default_rng(0)
    logits = np.log([0.4, 0.3, 0.2, 0.1, 1e-300])
    scores = np.tile(G.top_k_filter(logits[None], 3), (40000, 1))
    draws = G.sample_from_logits(scores, rng)
    freq = np.bincount(draws, minlength=5) / len(draws)
    expected = np.array([4, 3, 2, 0, 0]) / 9
    assert freq[3] == 0 and freq[4] == 0
    assert np.all(np.abs(freq - expected) < 5 * np.sqrt(expected * (1 - expected) / len(draws)) + 1e-12)


def test_sampling_reproducible_from_seed_and_temperature_sharpens():
    m = _model(seed=7)
    ids = _prompts(seed=7)
    a = m.generate(ids, 10, do_sample=True, seed=11)
    assert np.array_equal(a, m.generate(ids, 10, do_sample=True, seed=11))
    assert not np.array_equal(a, m.generate(ids, 10, do_sample=True, seed=12))
    assert np.array_equal(m.generate(ids, 10, do_sample=True, temperature=1e-6, seed=1), m.generate(ids, 10))
    assert np.array_equal(m.generate(ids, 10, do_sample=True, top_k=1, seed=2), m.generate(ids, 10))


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------

def test_errors_name_the_argument():
    m = _model(block_size=8)
    ids = _prompts()
    with pytest.raises(ValueError, match="ids is an empty prompt"):
        m.generate(np.zeros((2, 0), dtype=np.int64), 3)
    with pytest.raises(ValueError, match=r"ids must have shape \(B, S\)"):
        m.generate(np.array([1, 2]), 3)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive int"):
        m.generate(ids, 0)
    with pytest.raises(ValueError, match="pass do_sample=True"):
        m.generate(ids, 3, top_k=5)
    with pytest.raises(ValueError, match="beam sampling"):
        m.generate(ids, 3, do_sample=True, num_beams=2)
    with pytest.raises(ValueError, match="temperature must be"):
        m.generate(ids, 3, do_sample=True, temperature=0.0)
    with pytest.raises(ValueError, match="top_p must be"):
        m.generate(ids, 3, do_sample=True, top_p=1.5)
    with pytest.raises(ValueError, match=r"eos_token_id must be a token id .* \[0, 11\)"):
        m.generate(ids, 3, eos_token_id=11)
    with pytest.raises(ValueError, match="early_stopping must be"):
        m.generate(ids, 3, num_beams=2, early_stopping="sometimes")
    with pytest.raises(IndexError, match=r"ids must lie in \[0, 11\)"):
        m.generate(ids + 11, 3)
    assert m.generate(ids, 6).shape == (3, 9)         # past block_size: cropped (test_generation_crop.py)
