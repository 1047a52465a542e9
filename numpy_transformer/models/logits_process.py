"""The next-token score processors of :func:`numpy_transformer.models.generation.generate`, each one of
Hugging Face's ``LogitsProcessor`` classes (``transformers/generation/logits_process.py``) on NumPy
arrays: ``scores`` (B, V) float64, ``seq`` (B, T) the sequences so far (prompt, left padding and
generated tokens, as Hugging Face's ``input_ids``).

``generate`` applies them in Hugging Face's order (``GenerationMixin._get_logits_processor``):
repetition penalty, no-repeat n-grams, min new tokens; then, when sampling, temperature, top-k,
top-p. Beam search applies the same processors to the log-probabilities, as Hugging Face.
"""

from __future__ import annotations

import numpy as np

__all__ = ["log_softmax", "top_k_filter", "top_p_filter", "sample_from_logits", "repetition_penalty",
           "no_repeat_ngram", "suppress_tokens", "divide_by_temperature"]


def log_softmax(scores):
    """``scores - logsumexp(scores)`` over the last axis (rows may hold -inf, not only -inf)."""
    m = np.max(scores, axis=-1, keepdims=True)
    shifted = scores - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def top_k_filter(scores, top_k):
    """Hugging Face's ``TopKLogitsWarper``: keep the ``top_k`` largest scores of each row (and any tied
    with the k-th), set the rest to -inf. scores (B, V) -> (B, V)."""
    k = min(top_k, scores.shape[-1])
    kth = np.partition(scores, -k, axis=-1)[..., -k, None]                        # (B, 1)
    return np.where(scores < kth, -np.inf, scores)


def top_p_filter(scores, top_p, min_tokens_to_keep=1):
    """Hugging Face's ``TopPLogitsWarper`` (nucleus filtering): sort each row ascending, drop the tokens
    whose cumulative probability is ``<= 1 - top_p`` (the unlikely tail whose mass is at most
    ``1 - top_p``), always keeping the ``min_tokens_to_keep`` most likely. scores (B, V) -> (B, V)."""
    order = np.argsort(scores, axis=-1, kind="stable")                           # ascending
    sorted_scores = np.take_along_axis(scores, order, axis=-1)
    cum = np.cumsum(np.exp(log_softmax(sorted_scores)), axis=-1)                 # (B, V)
    remove_sorted = cum <= 1 - top_p
    remove_sorted[..., -min_tokens_to_keep:] = False
    remove = np.empty_like(remove_sorted)
    np.put_along_axis(remove, order, remove_sorted, axis=-1)                     # back to vocabulary order
    return np.where(remove, -np.inf, scores)


def sample_from_logits(scores, rng):
    """One token per row from ``softmax(scores)`` (B, V) by inverse CDF with one uniform draw per row;
    a token of probability 0 is never drawn.

    A row whose probabilities are not a distribution (a NaN or +inf score, or every score -inf) raises
    ValueError, as ``torch.multinomial`` refuses "probability tensor contains either inf, nan or
    element < 0" (NumPy's inverse CDF would silently draw token 0)."""
    with np.errstate(invalid="ignore"):
        probs = np.exp(log_softmax(scores))                                      # (B, V)
    bad = np.flatnonzero(~np.isfinite(probs).all(axis=-1))
    if len(bad):
        row = scores[bad[0]]
        raise ValueError(f"cannot sample: the scores of row {int(bad[0])} give no probability distribution "
                         f"(probability tensor contains either inf, nan or element < 0: the row holds "
                         f"{int(np.isnan(row).sum())} NaN, {int(np.isposinf(row).sum())} +inf and "
                         f"{int(np.isneginf(row).sum())} -inf of {row.size} scores); check the model's logits")
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random(scores.shape[0])[:, None] * cdf[:, -1:]                       # (B, 1)
    return np.argmax(cdf > u, axis=-1)                                           # first index past u


def repetition_penalty(scores, seq, penalty):
    """Hugging Face's ``RepetitionPenaltyLogitsProcessor``: the score of every token that occurs in its
    row of ``seq`` (the prompt, padding included, and the tokens generated so far) is divided by
    ``penalty`` where positive and multiplied by it where negative (so ``penalty > 1`` makes a
    repeat less likely either way). scores (B, V), seq (B, T) -> (B, V)."""
    rows = np.arange(seq.shape[0])[:, None]
    seen = np.zeros(scores.shape, dtype=bool)
    seen[rows, seq] = True                                                       # (B, V)
    penalised = np.where(scores < 0, scores * penalty, scores / penalty)
    return np.where(seen, penalised, scores)


def no_repeat_ngram(scores, seq, n):
    """Hugging Face's ``NoRepeatNGramLogitsProcessor``: a token that would complete an n-gram already
    present in its row of ``seq`` gets -inf. Every window of n tokens whose first n - 1 equal the
    row's last n - 1 tokens bans its last token (nothing is banned while the row is shorter than n).
    scores (B, V), seq (B, T) -> (B, V)."""
    t = seq.shape[1]
    if t < n:
        return scores
    windows = np.lib.stride_tricks.sliding_window_view(seq, n, axis=1)          # (B, T-n+1, n)
    prefix = seq[:, t + 1 - n:]                                                  # (B, n-1)
    matches = (windows[..., :-1] == prefix[:, None, :]).all(axis=-1)             # (B, T-n+1)
    banned = np.zeros(scores.shape, dtype=bool)
    rows, cols = np.nonzero(matches)
    banned[rows, windows[rows, cols, -1]] = True
    return np.where(banned, -np.inf, scores)


def suppress_tokens(scores, tokens):
    """``scores`` with the columns ``tokens`` set to -inf: Hugging Face's ``MinNewTokensLengthLogitsProcessor``
    while fewer than ``min_new_tokens`` tokens are generated (``tokens`` the eos ids)."""
    scores = scores.copy()
    scores[:, tokens] = -np.inf
    return scores


def divide_by_temperature(scores, temperature):
    """``scores / temperature`` (B, V), Hugging Face's ``TemperatureLogitsWarper``, or where that division
    overflows (a tiny temperature, e.g. 1e-310: ``1 / temperature`` is inf) its limit: each row shifted
    by its maximum first, ``(scores - max) / temperature``, which has the same softmax, top-k and top-p
    (all three are unchanged by adding a constant to a row) and cannot overflow: the maximum becomes 0
    and every other score a finite negative number or -inf. So as the temperature goes to 0 sampling
    becomes greedy (ties with the maximum share its probability), instead of Hugging Face's NaN
    probabilities (inf / inf), which ``torch.multinomial`` refuses."""
    with np.errstate(over="ignore"):
        scaled = scores / temperature                                            # (B, V)
    if (np.isfinite(scaled) | ~np.isfinite(scores)).all():
        return scaled               # (NaN/inf logits are left for sample_from_logits to refuse)
    with np.errstate(over="ignore"):
        return (scores - scores.max(axis=-1, keepdims=True)) / temperature       # (B, V) the limit


