"""Beam search's outputs against ``transformers``' own ``generate`` (5.x's ``_beam_search``), on tiny random
GPT-2 and Llama folders built offline and loaded into ``nt.GPT`` in float64: the same tokens, the same
``sequences_scores``, per-step ``scores`` and ``beam_indices`` (``return_dict_in_generate``,
``output_scores``), with several eos ids, ``length_penalty`` and ``early_stopping`` in each of their
regimes, ``num_return_sequences``, the score processors, and ``stopping_criteria`` (a list of eos ids,
a user's criterion).

``transformers``' beam search casts the last logits to float32 and keeps its beam scores in float32
(``_beam_search``: ``.to(dtype=torch.float32)``, ``dtype=torch.float``), so it is 1e-7 off itself in a
float64 model. The fixture :func:`float64_beams` makes the oracle exact instead of loosening the
tolerance: the generation module sees a ``torch`` whose ``float32`` and ``float`` are ``float64``, so
the same code runs in float64 (:func:`test_the_fixture_is_what_makes_the_scores_exact` shows the
unpatched oracle agrees to float32's precision only, and on the tokens).
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.models.generation import generate
from numpy_transformer.models.generation_options import EosTokenCriteria
from tests._compare import assert_close

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")
from transformers.generation import utils as generation_utils  # noqa: E402

from tests.models.test_generation import _bigram  # noqa: E402
from tests.models.test_hf_pretrained import LLAMA_CASES, exact_llama, hf_gpt2, hf_llama  # noqa: E402,F401

PROMPT = np.array([[1, 7, 3], [5, 2, 8]])                                        # (B, S), vocab 11
pytestmark = pytest.mark.usefixtures("exact_llama")      # Llama's oracle in float64 (test_hf_pretrained.py)
PAD = 1       # not 0: transformers fills with ``pad_token_id or eos_token_id[0]`` (0 is falsy there)


@pytest.fixture
def float64_beams(monkeypatch):
    """transformers' generation code with float32 read as float64 (module docstring)."""
    proxy = types.SimpleNamespace(**{name: getattr(torch, name) for name in dir(torch) if not name.startswith("__")})
    proxy.float32 = proxy.float = torch.float64
    monkeypatch.setattr(generation_utils, "torch", proxy)


def _pair(kind, tmp_path):
    hf = hf_gpt2(seed=3, n_embd=16) if kind == "gpt2" else hf_llama(seed=3, **LLAMA_CASES["gqa_untied"])
    hf.save_pretrained(tmp_path)
    return hf, nt.GPT.from_pretrained(tmp_path, dtype="float64")


def _hf(hf, prompt=PROMPT, **kw):
    kw.setdefault("pad_token_id", PAD)
    return hf.generate(torch.tensor(prompt), attention_mask=torch.ones(prompt.shape, dtype=torch.long),
                       do_sample=False, **kw)


def _hf_sequences(ref, eos):
    """transformers' sequences, its -1 filler (no eos_token_id given) read as our ``pad_token_id``."""
    seq = ref.sequences.numpy().copy()
    if eos is None:
        seq[seq == -1] = PAD
    return seq


def _assert_scores_equal(ours, ref):
    """Per-step scores: -inf in the same places, the rest to float64's precision."""
    assert len(ours) == len(ref)
    for t, (a, b) in enumerate(zip(ours, ref)):
        b = b.numpy()
        assert a.shape == b.shape and np.array_equal(np.isneginf(a), np.isneginf(b)), t
        assert_close({f"scores[{t}]": (np.where(np.isneginf(a), 0, a), np.where(np.isneginf(b), 0, b))}, tol=1e-12)


CASES = {
    "plain": dict(),
    "several_eos_short_penalty": dict(eos_token_id=[4, 10, 9], length_penalty=0.5),
    "eos_long_penalty_early_true": dict(eos_token_id=[4, 9], length_penalty=2.0, early_stopping=True),
    "eos_negative_penalty_never": dict(eos_token_id=[4, 10], length_penalty=-1.0, early_stopping="never"),
    "eos_positive_penalty_never": dict(eos_token_id=[10, 9], length_penalty=1.5, early_stopping="never"),
    "num_return_sequences": dict(eos_token_id=[10], num_return_sequences=3),
    "processors": dict(repetition_penalty=1.3, no_repeat_ngram_size=2, min_new_tokens=2, eos_token_id=[4, 9]),
}


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("name", CASES)
def test_beam_outputs_equal_transformers(kind, name, tmp_path, float64_beams):
    hf, ours = _pair(kind, tmp_path)
    kw = dict(max_new_tokens=8, num_beams=4, output_scores=True, return_dict_in_generate=True, **CASES[name])
    ref = _hf(hf, **kw)
    got = ours.generate(PROMPT, pad_token_id=PAD, **kw)
    np.testing.assert_array_equal(got.sequences, _hf_sequences(ref, kw.get("eos_token_id")))
    np.testing.assert_array_equal(got.beam_indices, ref.beam_indices.numpy())
    assert_close({"sequences_scores": (got.sequences_scores, ref.sequences_scores)}, tol=1e-12)
    _assert_scores_equal(got.scores, ref.scores)
    assert got.scores[0].shape == (2 * 4, 11) and got.sequences.shape[0] == 2 * kw.get("num_return_sequences", 1)


def test_the_cases_reach_what_they_are_about(tmp_path):
    """The eos cases above end hypotheses before the limit (a -1 in beam_indices, or a search that stops
    early), and length_penalty / early_stopping change what is returned."""
    _, ours = _pair("gpt2", tmp_path)

    def run(**kw):
        return ours.generate(PROMPT, 8, num_beams=4, pad_token_id=PAD, return_dict_in_generate=True, **kw)
    for name in ("several_eos_short_penalty", "eos_negative_penalty_never", "num_return_sequences", "processors"):
        out = run(**CASES[name])
        assert (out.beam_indices == -1).any() or out.sequences.shape[1] < 3 + 8, name
    eos = dict(eos_token_id=[4, 10, 9])
    assert not np.array_equal(run(**eos, length_penalty=-1.0).sequences, run(**eos, length_penalty=2.0).sequences)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_return_dict_without_output_scores_as_transformers(kind, tmp_path, float64_beams):
    """transformers returns ``beam_indices`` always, ``scores`` and ``sequences_scores`` only with output_scores."""
    hf, ours = _pair(kind, tmp_path)
    kw = dict(max_new_tokens=6, num_beams=3, eos_token_id=[4, 9], return_dict_in_generate=True)
    ref = _hf(hf, **kw)
    got = ours.generate(PROMPT, pad_token_id=PAD, **kw)
    assert ref.scores is None and ref.sequences_scores is None
    assert got.scores is None and got.sequences_scores is None
    np.testing.assert_array_equal(got.sequences, ref.sequences.numpy())
    np.testing.assert_array_equal(got.beam_indices, ref.beam_indices.numpy())
    assert isinstance(ours.generate(PROMPT, 4, num_beams=3), np.ndarray)


class _RepeatStop(transformers.StoppingCriteria):
    """Ends a candidate whose last two tokens are equal (transformers' side)."""

    def __call__(self, input_ids, scores, **kwargs):
        return input_ids[:, -1] == input_ids[:, -2]


def _repeat_stop(seq, scores):
    """The same criterion, ours: (N, T) sequences, (N, V) scores -> (N,) bool."""
    return seq[:, -1] == seq[:, -2]


STOPS = {
    "user_criterion": (lambda: _RepeatStop(), lambda: _repeat_stop, {}),
    "user_criterion_and_eos": (lambda: _RepeatStop(), lambda: _repeat_stop, dict(eos_token_id=[4])),
    "eos_list_as_criterion": (lambda: transformers.generation.EosTokenCriteria([4, 10, 9]),
                              lambda: EosTokenCriteria([4, 10, 9]), {}),
}


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("name", STOPS)
def test_stopping_criteria_with_beams_as_transformers(kind, name, tmp_path, float64_beams):
    """A stopping criterion ends the candidates it hits, as an eos does: among the K best they finish,
    below them they are dropped; the search stops when every candidate hit one."""
    hf, ours = _pair(kind, tmp_path)
    theirs, mine, extra = STOPS[name]
    kw = dict(max_new_tokens=10, num_beams=3, output_scores=True, return_dict_in_generate=True, **extra)
    ref = _hf(hf, stopping_criteria=transformers.StoppingCriteriaList([theirs()]), **kw)
    got = ours.generate(PROMPT, pad_token_id=PAD, stopping_criteria=[mine()], **kw)
    np.testing.assert_array_equal(got.sequences, _hf_sequences(ref, kw.get("eos_token_id")))
    np.testing.assert_array_equal(got.beam_indices, ref.beam_indices.numpy())
    assert_close({"sequences_scores": (got.sequences_scores, ref.sequences_scores)}, tol=1e-12)
    _assert_scores_equal(got.scores, ref.scores)
    plain = ours.generate(PROMPT, 10, num_beams=3, pad_token_id=PAD, **extra)
    assert not np.array_equal(got.sequences, plain)                 # the criterion changed the search


def test_the_fixture_is_what_makes_the_scores_exact(tmp_path):
    """Unpatched, transformers' float32 beam scores sit ~1e-7 from ours (and from its own float64 model):
    the fixture, not a tolerance, is what the 1e-12 above rests on. The tokens agree either way."""
    hf, ours = _pair("gpt2", tmp_path)
    kw = dict(max_new_tokens=8, num_beams=4, eos_token_id=[4, 10, 9], output_scores=True, return_dict_in_generate=True)
    ref = _hf(hf, **kw)
    got = ours.generate(PROMPT, pad_token_id=PAD, **kw)
    np.testing.assert_array_equal(got.sequences, ref.sequences.numpy())
    err = np.abs(got.sequences_scores - ref.sequences_scores.double().numpy()).max()
    assert 1e-12 < err / np.abs(got.sequences_scores).max() < 1e-5


# ------------------------------------------------------------------------------------------------
# early stopping on a model whose log-probabilities are a table (transformers' generate on it too)
# ------------------------------------------------------------------------------------------------

def _hf_bigram(log_table):
    """A GPT-2 with no block whose next-token log-probabilities are ``log_table[token]``: one-hot token
    embeddings, no positions, ``ln_f`` mapping each one-hot vector to itself, the head the table."""
    v = log_table.shape[0]
    cfg = transformers.GPT2Config(vocab_size=v, n_positions=16, n_embd=v, n_layer=0, n_head=1, layer_norm_epsilon=0.0,
                                  tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)
    m = transformers.GPT2LMHeadModel(cfg).to(torch.float64).eval()
    with torch.no_grad():
        m.transformer.wte.weight.copy_(torch.eye(v, dtype=torch.float64))
        m.transformer.wpe.weight.zero_()
        m.transformer.ln_f.weight.fill_(np.sqrt((1 - 1 / v) / v))           # the std of a one-hot vector
        m.transformer.ln_f.bias.fill_(1 / v)                                 # its mean
        m.lm_head.weight.copy_(torch.tensor(log_table.T))
    return m


@pytest.mark.parametrize("early_stopping", [True, False, "never"])
def test_early_stopping_as_transformers_on_a_table(early_stopping, float64_beams):
    """tests/models/test_generation.py::test_beam_search_early_stopping's table through transformers: True
    and False stop once two hypotheses are finished (False because the best *running* beam cannot beat
    them), "never" goes on to the better [2, 3, eos]."""
    ours = _bigram({4: {0: 0.5, 1: 0.3, 2: 0.2}, 1: {0: 0.9}, 2: {3: 0.99}, 3: {0: 0.99}}, 5)
    hf = _hf_bigram(ours.table)
    prompt = np.array([[4]])
    kw = dict(max_new_tokens=4, num_beams=2, eos_token_id=0, pad_token_id=3, early_stopping=early_stopping,
              output_scores=True, return_dict_in_generate=True)
    ref = _hf(hf, prompt, **kw)
    got = generate(ours, prompt, **kw)
    np.testing.assert_array_equal(got.sequences, ref.sequences.numpy())
    assert_close({"sequences_scores": (got.sequences_scores, ref.sequences_scores)}, tol=1e-12)
    assert got.sequences.tolist() == [[4, 2, 3, 0] if early_stopping == "never" else [4, 1, 0]]


def test_bad_criteria_and_streamer_with_beams_name_themselves(tmp_path):
    _, ours = _pair("gpt2", tmp_path)
    with pytest.raises(ValueError, match=r"one entry per row of the sequences it is given, shape \(12,\) here .* "
                                         r"every candidate\), got bool of shape \(2,\)"):
        ours.generate(PROMPT, 3, num_beams=3, stopping_criteria=lambda seq, scores: np.zeros(2, dtype=bool))
    with pytest.raises(ValueError, match="streamer works with greedy search and sampling, not with beam search"):
        ours.generate(PROMPT, 3, num_beams=2, streamer=print)
    with pytest.raises(ValueError, match=r"eos_token_id must be a token id >= 0 or a non-empty list of them, got \[\]"):
        EosTokenCriteria([])
    assert EosTokenCriteria(4)(np.array([[1, 4], [4, 1]]), None).tolist() == [True, False]
