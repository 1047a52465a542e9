"""Hugging Face's further ``generate`` arguments, checked and put in the shape
:func:`numpy_transformer.models.generation.generate` uses: ``input_ids=`` / ``max_length``, the score
processors' settings (``repetition_penalty``, ``no_repeat_ngram_size``, ``min_new_tokens``), the
``streamer`` (or callback), ``stopping_criteria`` and the ``return_dict_in_generate`` output."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..utils.checks import check_number, check_positive_int
from .logits_process import no_repeat_ngram, repetition_penalty, suppress_tokens

__all__ = ["GenerateOutput", "EosTokenCriteria", "resolve_length", "Processors", "Hooks"]


@dataclass
class GenerateOutput:
    """What ``generate(..., return_dict_in_generate=True)`` returns: Hugging Face's
    ``GenerateDecoderOnlyOutput`` (greedy, sampling) or ``GenerateBeamDecoderOnlyOutput`` (beam
    search), the fields this library fills.

    Attributes
    ----------
    sequences : ndarray (B * num_return_sequences, S + generated), int64
        What ``generate`` returns without the dict.
    scores : tuple of ndarray, or None
        With ``output_scores=True``: one array per generated step, as Hugging Face's ``scores``. Greedy
        and sampling: (B * num_return_sequences, V), the processed scores the token was picked from
        (after the repetition penalty, n-gram ban, min-new-tokens and, when sampling, temperature,
        top-k and top-p). Beam search: (B * num_beams, V), each running beam's processed
        log-probabilities (log-softmax, then the processors), in the order of that step's beams
        (``beam_indices`` says which beam each returned token extended). None otherwise.
    sequences_scores : ndarray (B * num_return_sequences,) float64, or None
        Beam search with ``output_scores=True``: each returned hypothesis's score, ``sum of its
        log-probs / L ** length_penalty`` (L its generated tokens). None otherwise.
    beam_indices : ndarray (B * num_return_sequences, generated) int64, or None
        Beam search (always, as Hugging Face): at each step, the row of the ``B * num_beams`` running
        beams of ``scores`` that the hypothesis's token extended; -1 after the hypothesis ended.
        None for greedy and sampling.
    """

    sequences: np.ndarray
    scores: tuple | None = None
    sequences_scores: np.ndarray | None = None
    beam_indices: np.ndarray | None = None


class EosTokenCriteria:
    """A stopping criterion on a list of eos ids, Hugging Face's ``EosTokenCriteria``: a row is done once its
    last token is one of ``eos_token_id``. Pass it as ``generate(..., stopping_criteria=[...])``.

    Unlike ``eos_token_id=`` it only ends rows: greedy and sampling go on with real tokens in an ended
    row (no padding) until every row has ended, and beam search ranks ``2 * num_beams`` candidates
    (not ``max(2, 1 + n_eos) * num_beams``), as Hugging Face does with this criterion.

    Parameters
    ----------
    eos_token_id : int or list of int
        The ids that end a row.
    """

    def __init__(self, eos_token_id: int | list[int]):
        ids = [eos_token_id] if isinstance(eos_token_id, (int, np.integer)) else list(eos_token_id)
        if not ids or any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0 for i in ids):
            raise ValueError(f"eos_token_id must be a token id >= 0 or a non-empty list of them, got {eos_token_id!r}")
        self.eos_token_id = [int(i) for i in ids]

    def __call__(self, seq: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """(N,) bool: does each row of ``seq`` (N, T) end with an eos id? (``scores`` is not used.)"""
        return np.isin(seq[:, -1], self.eos_token_id)

    def __repr__(self) -> str:
        return f"EosTokenCriteria({self.eos_token_id})"


def resolve_length(ids, input_ids, max_new_tokens, max_length):
    """The prompts (``ids`` or Hugging Face's ``input_ids=``, exactly one) and the number of new tokens
    (``max_new_tokens``, or ``max_length`` minus the prompt's width, exactly one)."""
    if ids is not None and input_ids is not None:
        raise ValueError("pass the prompts once: ids (positional) or input_ids= (Hugging Face's name), not both")
    ids = input_ids if ids is None else ids
    if ids is None:
        raise ValueError("generate needs the prompts: pass ids (B, S) (or input_ids=)")
    if max_new_tokens is not None and max_length is not None:
        raise ValueError(f"pass one of max_new_tokens (the tokens to add) and max_length (prompt + new tokens), "
                         f"got both (max_new_tokens={max_new_tokens!r}, max_length={max_length!r})")
    if max_new_tokens is None and max_length is None:
        raise ValueError("generate needs a length: pass max_new_tokens (the tokens to add) or max_length "
                         "(prompt + new tokens)")
    if max_length is not None:
        max_length = check_positive_int(max_length, "max_length")
        width = np.shape(ids)[-1] if np.ndim(ids) else 0
        if max_length <= width:
            raise ValueError(f"max_length={max_length} counts the prompt's {width} positions (padding included) "
                             f"and leaves no room for a new token: pass max_length > {width} (or max_new_tokens)")
        max_new_tokens = max_length - width
    return ids, check_positive_int(max_new_tokens, "max_new_tokens")


class Processors:
    """Hugging Face's score processors in its order (``_get_logits_processor``): repetition penalty,
    no-repeat n-grams, min new tokens; ``__call__(scores, seq)`` -> scores (B, V)."""

    def __init__(self, prompt_width, eos, repetition_penalty=None, no_repeat_ngram_size=None, min_new_tokens=None):
        self.prompt_width, self.eos = prompt_width, eos
        self.penalty = None
        if repetition_penalty is not None:
            self.penalty = check_number(repetition_penalty, "repetition_penalty", low=0, low_open=True)
            if self.penalty == 1.0:
                self.penalty = None                                  # Hugging Face skips 1.0: no change
        self.ngram = None
        if no_repeat_ngram_size is not None and no_repeat_ngram_size != 0:
            self.ngram = check_positive_int(no_repeat_ngram_size, "no_repeat_ngram_size")
        self.min_new = 0
        if min_new_tokens is not None and min_new_tokens != 0:
            self.min_new = check_positive_int(min_new_tokens, "min_new_tokens")
            if eos is None:
                raise ValueError(f"min_new_tokens={min_new_tokens} forbids eos_token_id for that many tokens, but no "
                                 "eos_token_id is given (Hugging Face would ignore it): pass eos_token_id")

    def __call__(self, scores, seq):
        if self.penalty is not None:
            scores = repetition_penalty(scores, seq, self.penalty)
        if self.ngram is not None:
            scores = no_repeat_ngram(scores, seq, self.ngram)
        if self.min_new and seq.shape[1] - self.prompt_width < self.min_new:
            scores = suppress_tokens(scores, self.eos)
        return scores


class Hooks:
    """The streamer (or callback), the stopping criteria and the kept scores of one ``generate`` call."""

    def __init__(self, streamer=None, stopping_criteria=None, output_scores=False, return_dict_in_generate=False):
        if streamer is not None and not (hasattr(streamer, "put") and hasattr(streamer, "end")) \
                and not callable(streamer):
            raise TypeError(f"streamer must have put(tokens) and end() (Hugging Face's BaseStreamer) or be a callable "
                            f"taking each step's tokens (B,), got {streamer!r} ({type(streamer).__name__})")
        self.streamer = streamer
        if stopping_criteria is None:
            stopping_criteria = []
        elif callable(stopping_criteria):
            stopping_criteria = [stopping_criteria]
        self.criteria = list(stopping_criteria)
        for c in self.criteria:
            if not callable(c):
                raise TypeError(f"stopping_criteria must be a callable (seq, scores) -> bool or (B,) bool, or a list "
                                f"of them, got an item {c!r} ({type(c).__name__})")
        if output_scores and not return_dict_in_generate:
            raise ValueError("output_scores=True keeps the per-step scores in the output dict: pass "
                             "return_dict_in_generate=True too (Hugging Face would drop them silently)")
        self.return_dict = bool(return_dict_in_generate)
        self.scores = [] if output_scores else None

    def start(self, ids):
        if self.streamer is not None and hasattr(self.streamer, "put"):
            self.streamer.put(ids.copy())                        # Hugging Face puts the prompt first

    def keep_scores(self, scores):
        """Keep one step's processed scores (with ``output_scores``)."""
        if self.scores is not None:
            self.scores.append(scores)

    def step(self, tokens, scores):
        self.keep_scores(scores)
        if self.streamer is not None:
            (self.streamer.put if hasattr(self.streamer, "put") else self.streamer)(tokens.copy())

    def stop(self, seq, scores):
        """(N,) bool: the rows of ``seq`` (N, T) some criterion ends (Hugging Face's ``StoppingCriteriaList``:
        any of them); ``scores`` (N, V) the processed scores each row's last token was picked from (greedy
        and sampling: the B rows; beam search: the candidates)."""
        done = np.zeros(seq.shape[0], dtype=bool)
        for c in self.criteria:
            got = np.asarray(c(seq, scores))
            if got.dtype != bool or got.shape not in ((), (seq.shape[0],)):
                raise ValueError(f"stopping_criteria {c!r} must return a bool or a bool array of one entry per row of "
                                 f"the sequences it is given, shape ({seq.shape[0]},) here (True: that row is done; "
                                 f"beam search asks it of every candidate), got {got.dtype} of shape {got.shape}")
            done |= got
        return done

    def end(self):
        if self.streamer is not None and hasattr(self.streamer, "end"):
            self.streamer.end()

    def output(self, sequences):
        """Greedy and sampling: the sequences, or with ``return_dict_in_generate`` the dict."""
        if not self.return_dict:
            return sequences
        return GenerateOutput(sequences, None if self.scores is None else tuple(self.scores))

    def beam_output(self, result):
        """Beam search (a ``beam_search.BeamResult``), as Hugging Face's ``GenerateBeamDecoderOnlyOutput``:
        ``beam_indices`` always, ``scores`` and ``sequences_scores`` only with ``output_scores``."""
        if not self.return_dict:
            return result.sequences
        if self.scores is None:
            return GenerateOutput(result.sequences, beam_indices=result.beam_indices)
        return GenerateOutput(result.sequences, tuple(self.scores), result.sequences_scores, result.beam_indices)
