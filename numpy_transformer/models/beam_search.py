"""Beam search for :func:`numpy_transformer.models.generation.generate`: ``transformers``' algorithm
(``GenerationMixin._beam_search`` of ``transformers`` 5, its helpers ``_get_top_k_continuations``,
``_get_running_beams_for_next_iteration``, ``_update_finished_beams``, ``_check_early_stop_heuristic``),
step for step, over the stepper of ``generation.py``.

Each prompt keeps two sets of K = ``num_beams`` sequences: the **running** beams (summed log-probs,
best first) and the **finished** hypotheses (score ``sum of log-probs / L ** length_penalty``, L the
generated tokens including the last; empty slots score -1e9). One step:

1. the K*V continuations of a prompt's running beams, ranked by summed log-probability; the best
   ``keep = max(2, 1 + n_eos) * K`` are the candidates;
2. a candidate *hits a stopping criterion* when its last token is an eos, when it reaches the length
   limit, or when a user's criterion says so (each is asked of the candidates' sequences);
3. the K best candidates that hit nothing run on (hitting ones get -1e9, so they run only when fewer
   than K others exist);
4. hitting candidates among the K best (an eos ranked below them is dropped) compete with the
   finished hypotheses for the K finished slots, unless the prompt is closed: all K slots finished
   with ``early_stopping=True``, or no running beam can improve on the worst finished one;
5. that last test (Hugging Face's heuristic) takes the best running beam's sum divided by
   ``L ** length_penalty``, L its current length (``early_stopping=False``) or, with
   ``early_stopping="never"`` and a positive penalty, the longest it can reach.

The search ends when every prompt is closed, when every candidate hit a criterion, or at the length
limit. ``transformers`` computes all of this in float32; here every score is float64.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .logits_process import log_softmax

__all__ = ["beam_search", "BeamResult"]

_BIG = 1.0e9                       # Hugging Face's "very large" score offset for excluded entries


class BeamResult(NamedTuple):
    """What :func:`beam_search` returns, ``R = B * n_return`` rows, best hypothesis of each prompt first.

    sequences : (R, S + generated) int64, each hypothesis padded after its last token with ``pad``;
    sequences_scores : (R,) float64, each one's ``sum of log-probs / L ** length_penalty``;
    beam_indices : (R, generated) int64, at each step the row of the B*K running beams the token
        extended (Hugging Face's ``beam_indices``), -1 after the hypothesis ended.
    """

    sequences: np.ndarray
    sequences_scores: np.ndarray
    beam_indices: np.ndarray


def _gather(array, index):
    """``array[i, index[i, j], ...]`` for every prompt i: Hugging Face's ``_gather_beams``. (B, N, ...)"""
    return array[np.arange(array.shape[0])[:, None], index]


def _best_first(scores, k):
    """The indices of the k largest of each row, best first (ties: the earlier entry). (B, k)"""
    return np.argsort(-scores, axis=-1, kind="stable")[:, :k]


def beam_search(step, ids, n, k, eos, pad, length_penalty, early_stopping, process=None, n_return=1, hooks=None):
    """Beam search over the prompts ``ids`` (B, S), up to ``n`` new tokens with ``k`` beams (module docstring).

    ``step(seq, new)`` gives the next-token scores (B*K, V); ``process(scores, seq)`` Hugging Face's
    processors, applied to the log-probabilities; ``hooks`` (``generation_options.Hooks``) keeps each
    step's processed log-probabilities (B*K, V) and asks its stopping criteria about the candidates
    (B*keep, T+1). Returns a :class:`BeamResult`. The per-prompt state is (B, K, ...) arrays as in
    Hugging Face; the model's forward over all B*K rows is the hot path."""
    b, s = ids.shape
    n_eos = 0 if eos is None else len(set(eos))
    keep = max(2, 1 + n_eos) * k                                 # candidates per prompt and step
    in_top_k = np.arange(keep) < k                               # (keep,) only these may finish
    seq = np.repeat(ids, k, axis=0)                              # (B*K, T) the running beams
    step.repeat(k)
    running = np.zeros((b, k))
    running[:, 1:] = -_BIG                 # the K copies are one beam until the first step splits them
    running_idx = np.full((b, k, n), -1, dtype=np.int64)         # (B, K, n) beam indices so far
    fin_seq = np.full((b, k, s + n), pad, dtype=np.int64)        # (B, K, S+n) finished hypotheses
    fin_scores = np.full((b, k), -_BIG)
    fin_idx = np.full((b, k, n), -1, dtype=np.int64)
    fin_done = np.zeros((b, k), dtype=bool)                      # (B, K) slot holds a finished one
    open_ = np.ones(b, dtype=bool)                               # may a running beam still improve?
    new = seq
    for t in range(n):
        logp = log_softmax(step(seq, new))                                       # (B*K, V)
        if process is not None:
            logp = process(logp, seq)             # Hugging Face processes the log-probabilities
        if hooks is not None:
            hooks.keep_scores(logp)
        v = logp.shape[-1]
        # 1. the candidates: the keep best continuations of each prompt's K beams
        cand = (logp.reshape(b, k, v) + running[:, :, None]).reshape(b, k * v)   # (B, K*V)
        top = _best_first(cand, keep)                                            # (B, keep)
        top_scores = np.take_along_axis(cand, top, axis=-1)
        parent, token = top // v, top % v                                        # (B, keep)
        rows = parent + np.arange(b)[:, None] * k                                # (B, keep) in B*K
        cand_seq = np.concatenate([seq[rows.reshape(-1)], token.reshape(-1, 1)], axis=1)   # (B*keep, T+1)
        cand_idx = _gather(running_idx, parent)                                  # (B, keep, n)
        cand_idx[:, :, t] = rows
        # 2. which candidates hit a stopping criterion
        hits = np.full(b * keep, t == n - 1)                                     # the length limit
        if eos is not None:
            hits |= np.isin(cand_seq[:, -1], eos)
        if hooks is not None:
            hits |= hooks.stop(cand_seq, logp[rows.reshape(-1)])
        hits = hits.reshape(b, keep)
        # 3. the running beams of the next step
        run_scores = top_scores - _BIG * hits
        best = _best_first(run_scores, k)                                        # (B, K)
        next_rows = _gather(rows, best).reshape(-1)                              # (B*K,)
        running = _gather(run_scores, best)
        running_idx = _gather(cand_idx, best)
        # 4. the finished hypotheses
        finishing = hits & in_top_k                                              # (B, keep)
        scores = top_scores / (t + 1) ** length_penalty
        closed = (fin_done.all(axis=1) & (early_stopping is True)) | ~open_      # (B,)
        scores = scores - _BIG * closed[:, None] - _BIG * ~finishing
        padded = np.full((b * keep, s + n), pad, dtype=np.int64)
        padded[:, :cand_seq.shape[1]] = cand_seq
        merged = np.concatenate([fin_scores, scores], axis=1)                    # (B, K + keep)
        chosen = _best_first(merged, k)                                          # (B, K)
        fin_scores = _gather(merged, chosen)
        fin_seq = _gather(np.concatenate([fin_seq, padded.reshape(b, keep, -1)], axis=1), chosen)
        fin_idx = _gather(np.concatenate([fin_idx, cand_idx], axis=1), chosen)
        fin_done = _gather(np.concatenate([fin_done, finishing], axis=1), chosen)
        # 5. on to the next step; can any running beam still beat the worst finished one?
        seq = cand_seq[(best + np.arange(b)[:, None] * keep).reshape(-1)]         # (B*K, T+1)
        new = seq[:, -1:]
        step.reorder(next_rows)
        length = n if early_stopping == "never" and length_penalty > 0 else t + 1
        best_possible = running[:, :1] / length ** length_penalty                # (B, 1)
        worst = np.where(fin_done, fin_scores.min(axis=1, keepdims=True), -_BIG)  # (B, K)
        open_ &= (best_possible > worst).any(axis=1)
        if not open_.any() or (fin_done.all() and early_stopping is True) or hits.all():
            break
    fin_seq, fin_scores, fin_idx = fin_seq[:, :n_return], fin_scores[:, :n_return], fin_idx[:, :n_return]
    generated = int((fin_idx >= 0).sum(axis=-1).max())
    return BeamResult(fin_seq.reshape(b * n_return, -1)[:, :s + generated], fin_scores.reshape(-1),
                      fin_idx.reshape(b * n_return, -1)[:, :generated])
