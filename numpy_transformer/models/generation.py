"""Generation for any model with a cached forward: greedy, sampling (temperature, top-k, top-p) and
beam search, with Hugging Face's argument names and semantics (``transformers``' ``generate``).

A model is usable when it follows the protocol :class:`numpy_transformer.GPT` does:

* ``model(ids)`` -> logits (B, S, V), a full forward;
* ``model(ids, past_key_values=cache, use_cache=True)`` -> ``(logits, cache)``: the new positions
  ``ids`` after the cached ones (``cache=None`` starts one); the cache has ``reorder_cache(rows)``;
* optionally ``model.max_len`` (the most positions it accepts);
* for a left-padded batch, ``attention_mask=`` (B, T) over all T positions so far, in both calls.

Every step takes the logits of the last position (cast to float64 for the processing below), picks
the next token of every row and feeds it back: with the cache, only that token; without it, the
whole sequence again (the same tokens: ``tests/models/test_generation.py``).
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from ..nn.modes import eval_mode
from ..nn.module import Module
from ..utils.checks import as_generator, check_attention_mask, check_number, check_positive_int, check_token_batch
from .beam_search import beam_search
from .generation_options import GenerateOutput, Hooks, Processors, resolve_length
from .logits_process import divide_by_temperature, log_softmax, sample_from_logits, top_k_filter, top_p_filter

__all__ = ["generate", "GenerateOutput", "top_k_filter", "top_p_filter", "sample_from_logits", "log_softmax"]


def _check_prompts(ids):
    """The prompts (B, S): what :func:`~numpy_transformer.utils.checks.check_token_batch` checks, an
    empty batch or prompt refused in generation's own words (the model checks the ids' range)."""
    ids = np.asarray(ids)
    if ids.ndim == 2 and ids.shape[0] == 0:
        raise ValueError(f"ids holds no prompt (shape {ids.shape}): pass at least one row (B >= 1)")
    if ids.ndim == 2 and ids.shape[1] == 0:
        raise ValueError(f"ids is an empty prompt (shape {ids.shape}): generation needs at least one token per "
                         "row to condition on (e.g. a start-of-sequence id)")
    return check_token_batch(ids, "ids", shape_doc="(B, S) (one row per prompt; ids[None] for a single prompt)"
                             ).astype(np.int64)


def _token_list(value, name, vocab_size):
    if value is None:
        return None
    try:
        values = [value] if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else list(value)
    except TypeError:
        raise ValueError(f"{name} must be a token id or a list of ids, got {value!r}") from None
    if not values:
        raise ValueError(f"{name} must be a token id or a non-empty list of ids, got {value!r} (pass None for "
                         "no such token)")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 or (vocab_size and v >= vocab_size):
            where = f"in [0, {vocab_size})" if vocab_size else ">= 0"
            raise ValueError(f"{name} must be a token id (or a list of ids) {where}, got {value!r}")
    return [int(v) for v in values]


def generate(model, ids=None, max_new_tokens=None, do_sample=False, temperature=1.0, top_k=None, top_p=None,
             num_beams=1, eos_token_id=None, pad_token_id=None, length_penalty=1.0, early_stopping=False, seed=None,
             use_cache=True, attention_mask=None, *, input_ids=None, max_length=None, min_new_tokens=None,
             repetition_penalty=None, no_repeat_ngram_size=None, num_return_sequences=1, output_scores=False,
             return_dict_in_generate=False, streamer=None, stopping_criteria=None):
    """Continue the prompts ``ids`` (B, S) by up to ``max_new_tokens`` tokens, as ``transformers``' ``generate``.

    Parameters
    ----------
    model : a model with the cached-forward protocol (module docstring), e.g. :class:`numpy_transformer.GPT`
        An ``nt.nn.Module`` runs in eval mode (dropout off) during generation (:func:`~numpy_transformer.nn.eval_mode`):
        afterwards each submodule is back in its own mode (a frozen block left in eval stays so); any
        other model runs in the mode it is in.
    ids : ndarray (B, S), integer
        One prompt per row, S >= 1; prompts of unequal length are padded on the left (any id) and
        marked in ``attention_mask``. ``input_ids=`` (Hugging Face's name) is the same; pass one.
    max_new_tokens : int
        Or ``max_length``, Hugging Face's total: the prompt's width S (padding included) + the new
        tokens, so ``max_new_tokens = max_length - S``. Pass exactly one of them.
        How many tokens to add (>= 1). Generation may run past the model's ``max_len``
        (block_size): the model then sees only each row's last ``max_len`` positions (nanoGPT's
        crop), for every kind of positions (learned ones cannot go further; rotary, ALiBi and none
        follow the same rule), and the KV cache is rebuilt from that window at each step. A prompt
        longer than ``max_len`` is cropped the same way; the returned rows keep every token.
    do_sample : bool
        False: greedy (``num_beams=1``) or beam search. True: sample from the filtered distribution.
    temperature, top_k, top_p : sampling only
        Applied in Hugging Face's order: logits / temperature, then top-k (the k largest, ties with the
        k-th kept), then top-p (the smallest set of most likely tokens whose probability reaches
        ``top_p``). ``top_k=None`` and ``top_p=None`` (or 1.0) filter nothing (Hugging Face's
        ``GenerationConfig`` defaults ``top_k`` to 50). Setting them without ``do_sample`` raises.
        ``temperature`` must be > 0; one so small that ``logits / temperature`` overflows (e.g. 1e-310)
        gives its limit, the argmax (ties share the probability), where Hugging Face's division gives
        inf and NaN probabilities. Logits that make no distribution (a NaN or +inf, or a row of -inf)
        raise ValueError when sampling, as ``torch.multinomial`` does.
    num_beams : int
        > 1: beam search (sampling with beams is not implemented: ValueError).
    eos_token_id : int or list of int, optional
        A row that produced it (any id of the list) is finished: later positions get ``pad_token_id``;
        generation stops when every row is finished (so the result may be shorter than S +
        max_new_tokens). Beam search ranks ``max(2, 1 + len(eos)) * num_beams`` candidates per step, as
        Hugging Face, and a finished hypothesis ends with the eos it produced. An empty list raises.
    pad_token_id : int, optional
        Default ``eos_token_id`` (as Hugging Face, which warns).
    length_penalty : float
        Beam search: a finished hypothesis scores ``sum of log-probs / L ** length_penalty``, L its
        number of generated tokens including the eos (``transformers`` >= 4.36's ``BeamSearchScorer``).
    early_stopping : {False, True, "never"}
        Beam search, Hugging Face's meanings (``transformers`` 5): True stops a prompt's search once
        ``num_beams`` hypotheses are finished; False (default) also stops it when the best *running*
        beam (just-finished ones excluded) cannot beat the worst finished one under the heuristic bound
        ``its sum / current length ** length_penalty``; "never" uses the exact bound (the longest
        possible length when ``length_penalty > 0``). (``transformers`` 4.x's bound also counted the
        hypotheses finishing at that step, so it could search on where 5.x stops.)
    seed : None, int or numpy.random.Generator
        Sampling's random draws (one uniform per row and step): the same seed gives the same tokens.
    use_cache : bool or None
        Feed each new token through the KV cache (True; None means the default, True) or re-run the
        whole sequence (False): the same tokens. Anything else (``"no"``, 0) raises TypeError.
    attention_mask : ndarray (B, S) of 0/1, optional
        Hugging Face's mask for prompts of unequal length: 1 = a real token, 0 = padding, which must
        come first (**left** padding, as Hugging Face's decoder-only models expect; a 0 after a 1
        raises ValueError, where Hugging Face only warns). Padded positions are never attended to
        and each row's positions count from its first real token (``cumsum(attention_mask) - 1``),
        so every row gets exactly the logits it gets alone, hence the same greedy and beam-search
        tokens (sampling draws one uniform per row and step: a batch's draws differ from a lone
        prompt's); generated tokens are real (the mask grows by 1s). A row of only 0s is an empty prompt
        (ValueError). Default: every token real.
    input_ids, max_length : see ``ids`` and ``max_new_tokens``.
    repetition_penalty : float > 0, optional
        Hugging Face's ``RepetitionPenaltyLogitsProcessor``: the score of every token already in the
        row (prompt and padding included, as Hugging Face's ``input_ids``) is divided by it where
        positive, multiplied where negative. 1.0 (or None) changes nothing.
    no_repeat_ngram_size : int, optional
        Hugging Face's ``NoRepeatNGramLogitsProcessor``: no n-gram of this size occurs twice in a row
        (prompt included). 0 or None: off.
    min_new_tokens : int, optional
        Hugging Face's ``MinNewTokensLengthLogitsProcessor``: every eos id gets -inf until this many
        tokens are generated. Needs ``eos_token_id`` (ValueError; Hugging Face ignores it silently).
        The three processors run in Hugging Face's order (repetition, n-grams, min new tokens) on the
        logits, then temperature, top-k and top-p when sampling; beam search applies them to the
        log-probabilities, as Hugging Face.
    num_return_sequences : int
        Sampling: each prompt is repeated this many times (consecutive rows, each its own draws).
        Beam search: the best ``num_return_sequences <= num_beams`` hypotheses of each prompt, best
        first. Greedy refuses > 1 (as Hugging Face: every copy would be the same).
    output_scores, return_dict_in_generate : bool
        ``return_dict_in_generate=True`` returns a :class:`GenerateOutput` (``.sequences``, ``.scores``;
        with beams also ``.beam_indices``, always, and ``.sequences_scores``); ``output_scores=True``
        fills ``.scores`` with each step's processed scores: greedy and sampling (B, V), beam search
        (B * num_beams, V), each running beam's processed log-probabilities, and then
        ``.sequences_scores`` (each returned hypothesis's ``sum / L ** length_penalty``), as Hugging
        Face's ``GenerateBeamDecoderOnlyOutput``. ``output_scores`` without the dict raises.
    streamer : object with ``put`` and ``end``, or a callable, optional
        Hugging Face's streamer protocol: ``put(prompts)`` (B, S) first, then ``put(tokens)`` (B,) at each
        step, then ``end()``. A plain callable receives each step's tokens (B,). Not with beams
        (ValueError, as Hugging Face).
    stopping_criteria : callable or list of callables, optional
        ``criterion(seq, scores)`` (the sequences so far (B, T), this step's processed scores (B, V)) ->
        a bool or (B,) bool: True ends that row, as Hugging Face's ``StoppingCriteriaList`` (any of
        them); :class:`~numpy_transformer.models.generation_options.EosTokenCriteria` ends a row on a
        list of eos ids. An ended row continues with ``pad_token_id`` when ``eos_token_id`` is given, and as
        Hugging Face keeps generating real tokens otherwise, until every row has ended. Beam search
        asks them of every candidate (``seq`` (B * keep, T), ``scores`` each candidate's beam's
        processed log-probabilities): a candidate they end is treated as an eos one (finished if it
        ranks among the ``num_beams`` best, dropped otherwise), and the search stops when every
        candidate of a step is ended; a hypothesis they end early is padded with ``pad_token_id``
        (Hugging Face fills with -1 when no ``eos_token_id`` is given).

    Returns
    -------
    ndarray (B * num_return_sequences, S + generated), int64, or GenerateOutput
        The prompts (padding included) and their continuations; with ``return_dict_in_generate``,
        inside a :class:`GenerateOutput`.
    """
    max_len = getattr(model, "max_len", None)
    vocab_size = getattr(model, "vocab_size", None)
    ids, max_new_tokens = resolve_length(ids, input_ids, max_new_tokens, max_length)
    ids = _check_prompts(ids)
    mask = None
    if attention_mask is not None:
        mask = check_attention_mask(attention_mask, ids.shape)
        empty = np.flatnonzero(~mask.any(axis=1))
        if len(empty):
            raise ValueError(f"attention_mask row {int(empty[0])} is all 0: an empty prompt; generation needs at "
                             "least one real token per row to condition on (e.g. a start-of-sequence id)")
        if mask.all():
            mask = None                       # nothing padded: the plain path, the same tokens
    temperature = check_number(temperature, "temperature", low=0, low_open=True)
    if top_k is not None:
        top_k = check_positive_int(top_k, "top_k")
    if top_p is not None:
        top_p = check_number(top_p, "top_p", low=0, high=1, low_open=True)
    num_beams = check_positive_int(num_beams, "num_beams")
    if not do_sample and (top_k is not None or (top_p is not None and top_p < 1) or temperature != 1.0):
        raise ValueError("temperature, top_k and top_p shape the sampling distribution: pass do_sample=True "
                         f"(got do_sample=False with temperature={temperature}, top_k={top_k}, top_p={top_p})")
    if do_sample and num_beams > 1:
        raise ValueError("do_sample=True with num_beams > 1 (beam sampling) is not implemented; use one of them")
    eos = _token_list(eos_token_id, "eos_token_id", vocab_size)
    pad = _token_list(pad_token_id, "pad_token_id", vocab_size)
    pad = pad[0] if pad is not None else (eos[0] if eos is not None else 0)
    if early_stopping not in (True, False, "never"):
        raise ValueError(f"early_stopping must be True, False or 'never', got {early_stopping!r}")
    length_penalty = check_number(length_penalty, "length_penalty")
    rng = as_generator(seed)
    use_cache = _check_use_cache(use_cache)
    process = Processors(ids.shape[1], eos, repetition_penalty, no_repeat_ngram_size, min_new_tokens)
    hooks = Hooks(streamer, stopping_criteria, output_scores, return_dict_in_generate)
    n_ret = check_positive_int(num_return_sequences, "num_return_sequences")
    if num_beams > 1 and streamer is not None:
        raise ValueError("streamer works with greedy search and sampling, not with beam search (num_beams > 1), as "
                         "Hugging Face: a beam's tokens are not final until the search ends")
    if n_ret > 1 and not do_sample and num_beams == 1:
        raise ValueError(f"num_return_sequences={n_ret} with greedy search would return the same sequence "
                         f"{n_ret} times: pass do_sample=True or num_beams >= {n_ret} (as Hugging Face)")
    if n_ret > num_beams > 1:
        raise ValueError(f"num_return_sequences={n_ret} must be <= num_beams={num_beams}: beam search keeps "
                         f"{num_beams} hypotheses per prompt")
    if do_sample and n_ret > 1:
        ids = np.repeat(ids, n_ret, axis=0)                                      # (B*n, S)
        mask = None if mask is None else np.repeat(mask, n_ret, axis=0)
    with eval_mode(model) if isinstance(model, Module) else nullcontext():
        step = _Stepper(model, use_cache, mask, max_len)
        if num_beams > 1:
            return hooks.beam_output(beam_search(step, ids, max_new_tokens, num_beams, eos, pad, length_penalty,
                                                 early_stopping, process, n_ret, hooks))

        def warp(scores, seq):
            scores = process(scores, seq)
            if not do_sample:
                return scores
            scores = divide_by_temperature(scores, temperature)
            if top_k is not None:
                scores = top_k_filter(scores, top_k)
            if top_p is not None and top_p < 1:
                scores = top_p_filter(scores, top_p)
            return scores

        def pick(scores):
            return sample_from_logits(scores, rng) if do_sample else np.argmax(scores, axis=-1)
        return hooks.output(_decode(step, ids, max_new_tokens, warp, pick, eos, pad, hooks))


def _check_use_cache(use_cache):
    """``use_cache`` True, False or None (the default, True, as Hugging Face's ``GenerationConfig``)."""
    if use_cache is None:
        return True
    if not isinstance(use_cache, (bool, np.bool_)):
        raise TypeError(f"use_cache must be a bool or None (True, the default: feed each new token through the KV "
                        f"cache; False: re-run the whole sequence), got {use_cache!r} ({type(use_cache).__name__})")
    return bool(use_cache)


class _Stepper:
    """The next-token scores (B, V) float64 of each row, with or without the cache; ``mask`` (B, S) bool
    (True = real) for a left-padded batch, grown by one real column per generated token."""

    def __init__(self, model, use_cache, mask=None, max_len=None):
        self.model, self.use_cache, self.cache, self.mask = model, bool(use_cache), None, mask
        self.max_len = max_len

    def __call__(self, seq, new):
        """``seq`` (B, T) the whole sequences so far, ``new`` (B, n) their last n tokens (not yet seen).

        Once a row holds more than ``max_len`` (block_size) real tokens, the model sees only the last
        ``max_len`` columns (nanoGPT's crop, ``idx[:, -block_size:]``; left padding inside them stays
        masked, so each row sees what it would alone): every position then shifts by one at each step, so no cached key
        or value holds any more (learned positions are absolute); the cache is rebuilt from the
        cropped window, one full forward of ``max_len`` positions per step."""
        kwargs = {}
        if self.mask is not None:
            grown = seq.shape[1] - self.mask.shape[1]                            # generated since the last call
            self.mask = np.concatenate([self.mask, np.ones((seq.shape[0], grown), dtype=bool)], axis=1)
            kwargs["attention_mask"] = self.mask                                 # (B, T), Hugging Face's way
        longest = seq.shape[1] if self.mask is None else int(self.mask.sum(axis=1).max())   # real tokens
        if self.max_len is not None and longest > self.max_len:
            seq = new = seq[:, -self.max_len:]                                   # (B, max_len) the crop
            self.cache = None                                                    # rebuilt from the window
            if self.mask is not None:
                kwargs["attention_mask"] = self.mask[:, -self.max_len:]
        if self.use_cache:
            logits, self.cache = self.model(new, past_key_values=self.cache, use_cache=True, **kwargs)
        else:
            logits = self.model(seq, **kwargs)
        return np.asarray(logits[:, -1], dtype=np.float64)                       # (B, V)

    def repeat(self, k):
        """Each row k times (beam search's B*K rows), before the first step."""
        if self.mask is not None:
            self.mask = np.repeat(self.mask, k, axis=0)                          # (B*K, S)

    def reorder(self, rows):
        if self.cache is not None:
            self.cache.reorder_cache(rows)
        if self.mask is not None:
            self.mask = self.mask[rows]


def _decode(step, ids, n, warp, pick, eos, pad, hooks):
    """Greedy or sampling: one token per row and step; finished rows (eos seen, or a stopping criterion
    when there is an eos) continue with ``pad``; as Hugging Face's ``_sample``."""
    seq, new = ids, ids
    unfinished = np.ones(ids.shape[0], dtype=bool)
    hooks.start(ids)
    for _ in range(n):
        scores = warp(step(seq, new), seq)                                       # (B, V) processed
        tok = pick(scores)                                                       # (B,)
        if eos is not None:
            tok = np.where(unfinished, tok, pad)
        hooks.step(tok, scores)
        new = tok[:, None].astype(np.int64)
        seq = np.concatenate([seq, new], axis=1)                                 # (B, T+1)
        if eos is not None:
            unfinished &= ~np.isin(tok, eos)
        unfinished &= ~hooks.stop(seq, scores)
        if not unfinished.any():
            break
    hooks.end()
    return seq
