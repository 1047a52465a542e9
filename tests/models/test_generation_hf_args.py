"""``generate``'s further Hugging Face arguments, proven against ``transformers``' own ``generate`` on a
tiny random GPT-2 built offline (``tests/models/test_hf_pretrained.py``'s ``hf_gpt2``), loaded into
``nt.GPT`` through ``save_pretrained`` / ``from_pretrained`` in float64: the same tokens for greedy and
beam search with ``repetition_penalty``, ``no_repeat_ngram_size``, ``min_new_tokens``, several eos ids,
``max_length``, ``num_return_sequences``; the same per-step scores; the streamer's calls."""

from __future__ import annotations

import numpy as np
import pytest

import numpy_transformer as nt

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")
from tests.models.test_hf_pretrained import hf_gpt2  # noqa: E402

PROMPT = np.array([[1, 7, 3], [5, 2, 8]])                                        # (B, S), vocab 11


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2")
    hf = hf_gpt2(seed=3, n_embd=16)               # a seed whose greedy tokens vary
    hf.save_pretrained(path)
    return hf, nt.GPT.from_pretrained(path, dtype="float64")


PAD = 1     # not 0: transformers' beam search fills with ``pad_token_id or eos_token_id[0]``, so a pad id 0
#             (a falsy tensor) becomes eos[0] there (generation/utils.py, ``output_fill_value``)


def _hf(hf, prompt=PROMPT, **kw):
    kw.setdefault("pad_token_id", PAD)
    out = hf.generate(torch.tensor(prompt), attention_mask=torch.ones(prompt.shape, dtype=torch.long),
                      do_sample=False, **kw)
    return out if kw.get("return_dict_in_generate") else out.numpy()


CASES = {
    "repetition_penalty": dict(repetition_penalty=1.7),
    "repetition_penalty_below_1": dict(repetition_penalty=0.6),
    "no_repeat_ngram_2": dict(no_repeat_ngram_size=2),
    "no_repeat_ngram_1": dict(no_repeat_ngram_size=1, max_new_tokens=7),
    "min_new_tokens_several_eos": dict(min_new_tokens=7, eos_token_id=[4, 10, 9]),
    "several_eos": dict(eos_token_id=[4, 10, 9]),
    "all_three": dict(repetition_penalty=1.3, no_repeat_ngram_size=3, min_new_tokens=3, eos_token_id=[4, 9]),
    "max_length": dict(max_length=10),
}


@pytest.mark.parametrize("beams", [1, 3])
@pytest.mark.parametrize("name", CASES)
def test_same_tokens_as_transformers(pair, name, beams):
    hf, ours = pair
    kw = dict(CASES[name])
    if "max_length" not in kw:
        kw.setdefault("max_new_tokens", 9)
    ref = _hf(hf, num_beams=beams, **kw)
    got = ours.generate(PROMPT, num_beams=beams, pad_token_id=PAD, **kw)
    np.testing.assert_array_equal(got, ref)
    if name == "several_eos":                           # the case means something: a row stops early
        assert np.isin(got[:, 3:-1], kw["eos_token_id"]).any()


def test_the_processors_change_the_tokens(pair):
    """Each processor's case above would pass vacuously if it changed nothing on this model."""
    _, ours = pair
    plain = ours.generate(PROMPT, 9)
    for name in ("repetition_penalty", "no_repeat_ngram_2", "min_new_tokens_several_eos"):
        kw = CASES[name]
        assert not np.array_equal(ours.generate(PROMPT, 9, **kw), ours.generate(PROMPT, 9, **{
            k: v for k, v in kw.items() if k == "eos_token_id"})), name
    assert not np.array_equal(ours.generate(PROMPT, 9, eos_token_id=[4, 10, 9]), plain)


def test_beam_num_return_sequences_as_transformers(pair):
    hf, ours = pair
    for kw in (dict(), dict(eos_token_id=[4, 10]), dict(eos_token_id=10, length_penalty=0.5)):
        ref = _hf(hf, num_beams=4, num_return_sequences=3, max_new_tokens=7, **kw)
        got = ours.generate(input_ids=PROMPT, max_new_tokens=7, num_beams=4, num_return_sequences=3, pad_token_id=PAD,
                            **kw)
        assert got.shape[0] == 6
        np.testing.assert_array_equal(got, ref)


def test_output_scores_equal_transformers(pair):
    """transformers processes the scores in float32 (``_sample`` casts the last logits to float32), so
    the comparison is at float32's precision; the tokens are exact."""
    hf, ours = pair
    kw = dict(max_new_tokens=6, repetition_penalty=1.4, no_repeat_ngram_size=2, min_new_tokens=2, eos_token_id=[4])
    ref = _hf(hf, output_scores=True, return_dict_in_generate=True, **kw)
    got = ours.generate(PROMPT, output_scores=True, return_dict_in_generate=True, pad_token_id=PAD, **kw)
    assert isinstance(got, nt.models.generation.GenerateOutput)
    np.testing.assert_array_equal(got.sequences, ref.sequences.numpy())
    assert len(got.scores) == len(ref.scores)
    for a, b in zip(got.scores, ref.scores):
        b = b.double().numpy()
        assert np.array_equal(np.isinf(a), np.isinf(b))
        np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=1e-6, atol=0)
    assert ours.generate(PROMPT, 3, return_dict_in_generate=True).scores is None


def test_streamer_receives_the_prompt_then_each_token_as_transformers(pair):
    hf, ours = pair

    class Record:
        def __init__(self):
            self.calls = []

        def put(self, value):
            self.calls.append(np.asarray(value).tolist())

        def end(self):
            self.calls.append("end")

    ref, got = Record(), Record()
    _hf(hf, max_new_tokens=5, eos_token_id=[4, 10], streamer=ref)
    out = ours.generate(PROMPT, 5, eos_token_id=[4, 10], pad_token_id=PAD, streamer=got)
    assert got.calls == ref.calls and got.calls[0] == PROMPT.tolist() and got.calls[-1] == "end"
    seen = []
    ours.generate(PROMPT, 5, streamer=seen.append)
    np.testing.assert_array_equal(np.stack(seen, axis=1), ours.generate(PROMPT, 5)[:, 3:])
    assert len(out) == 2


def test_stopping_criteria_as_transformers(pair):
    hf, ours = pair

    class Stop(transformers.StoppingCriteria):                   # ends a row once it generates a token != 8
        def __call__(self, input_ids, scores, **kwargs):
            return (input_ids[:, 3:] != 8).any(-1)

    def ours_stop(seq, scores):
        return (seq[:, 3:] != 8).any(-1)

    for kw in (dict(), dict(eos_token_id=[9]), dict(eos_token_id=[4, 9])):
        ref = _hf(hf, max_new_tokens=12, stopping_criteria=transformers.StoppingCriteriaList([Stop()]), **kw)
        got = ours.generate(PROMPT, 12, stopping_criteria=[ours_stop], pad_token_id=PAD, **kw)
        np.testing.assert_array_equal(got, ref)
        assert got.shape[1] < 15                                   # it stopped early


def test_sampling_num_return_sequences_repeats_each_prompt(pair):
    _, ours = pair
    out = ours.generate(PROMPT, 6, do_sample=True, num_return_sequences=3, seed=0)
    assert out.shape == (6, 9)
    np.testing.assert_array_equal(out[:, :3], np.repeat(PROMPT, 3, axis=0))
    np.testing.assert_array_equal(out, ours.generate(np.repeat(PROMPT, 3, axis=0), 6, do_sample=True, seed=0))
    assert len({tuple(r) for r in out[:3, 3:]}) > 1


def test_bad_arguments_name_themselves(pair):
    _, m = pair
    cases = [
        (dict(max_new_tokens=3, input_ids=PROMPT), "pass the prompts once"),
        (dict(max_new_tokens=3, max_length=9), "pass one of max_new_tokens"),
        (dict(), "pass max_new_tokens"),
        (dict(max_length=3), r"max_length=3 counts the prompt's 3 positions"),
        (dict(max_new_tokens=3, repetition_penalty=0.0), "repetition_penalty must be"),
        (dict(max_new_tokens=3, no_repeat_ngram_size=-1), "no_repeat_ngram_size must be a positive int"),
        (dict(max_new_tokens=3, min_new_tokens=2), "min_new_tokens=2 .* no eos_token_id"),
        (dict(max_new_tokens=3, num_return_sequences=2), "num_return_sequences=2 with greedy"),
        (dict(max_new_tokens=3, num_beams=2, num_return_sequences=3), r"num_return_sequences=3 must be <= num_beams=2"),
        (dict(max_new_tokens=3, output_scores=True), "output_scores=True .* return_dict_in_generate=True"),
        (dict(max_new_tokens=3, num_beams=2, streamer=print), "beam search"),
        (dict(max_new_tokens=3, stopping_criteria=lambda s, x: "yes"), "stopping_criteria .* must return a bool"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            m.generate(PROMPT, **kw)
    with pytest.raises(TypeError, match="streamer must have put"):
        m.generate(PROMPT, 3, streamer=object())
    with pytest.raises(TypeError, match="stopping_criteria must be a callable"):
        m.generate(PROMPT, 3, stopping_criteria=[3])
