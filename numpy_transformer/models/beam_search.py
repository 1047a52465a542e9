"""Beam search for :func:`numpy_transformer.models.generation.generate`: ``transformers``' algorithm
(``BeamSearchScorer`` / ``BeamHypotheses``), over the stepper of ``generation.py``."""

from __future__ import annotations

import numpy as np

from .logits_process import log_softmax

__all__ = ["beam_search"]


class _BeamHypotheses:
    """A prompt's finished hypotheses: the ``num_beams`` best by ``sum_logprobs / L ** length_penalty``
    (``transformers``' ``BeamHypotheses``)."""

    def __init__(self, num_beams, length_penalty, early_stopping, max_new_tokens):
        self.num_beams, self.length_penalty = num_beams, length_penalty
        self.early_stopping, self.max_new_tokens = early_stopping, max_new_tokens
        self.beams = []                     # (score, tokens)
        self.worst_score = 1e9

    def add(self, tokens, sum_logprobs, generated_len):
        score = sum_logprobs / generated_len ** self.length_penalty
        if len(self.beams) < self.num_beams or score > self.worst_score:
            self.beams.append((score, tokens))
            if len(self.beams) > self.num_beams:
                ranked = sorted((s, i) for i, (s, _) in enumerate(self.beams))
                del self.beams[ranked[0][1]]
                self.worst_score = ranked[1][0]
            else:
                self.worst_score = min(score, self.worst_score)

    def is_done(self, best_sum_logprobs, generated_len):
        """Can no live beam beat the worst of ``num_beams`` finished hypotheses any more?"""
        if len(self.beams) < self.num_beams:
            return False
        if self.early_stopping is True:
            return True
        if self.early_stopping == "never" and self.length_penalty > 0:
            generated_len = self.max_new_tokens                  # the longest a live beam can get
        return self.worst_score >= best_sum_logprobs / generated_len ** self.length_penalty


def beam_search(step, ids, n, k, eos, pad, length_penalty, early_stopping, process=None, n_return=1):
    """Beam search, ``transformers``' algorithm: every step ranks the K*V continuations of a prompt's K
    beams by summed log-probability and keeps the ``max(2, 1 + n_eos) * K`` best (``n_eos`` the number of
    eos ids; Hugging Face's ``beams_to_keep``); an eos among the K best finishes a hypothesis, the K
    best others continue. Each beam contributes at most ``n_eos`` eos continuations, so the kept ones
    always hold K that are not an eos (2K, as older ``transformers``, falls short when several eos ids
    rank high: the search would go on from filler rows). The per-prompt bookkeeping loops over B (not a
    hot path: the model's forward over all B*K rows is)."""
    b, s = ids.shape
    seq = np.repeat(ids, k, axis=0)                                              # (B*K, S)
    step.repeat(k)
    beam_scores = np.zeros((b, k))
    beam_scores[:, 1:] = -1e9                 # the K copies are one beam until the first step splits them
    beam_scores = beam_scores.reshape(-1)                                        # (B*K,)
    hyps = [_BeamHypotheses(k, length_penalty, early_stopping, n) for _ in range(b)]
    keep = max(2, 1 + (0 if eos is None else len(set(eos)))) * k     # ranked candidates per prompt and step
    done = np.zeros(b, dtype=bool)
    new = seq
    for _ in range(n):
        logp = log_softmax(step(seq, new))                                       # (B*K, V)
        if process is not None:
            logp = process(logp, seq)         # Hugging Face processes the log-probabilities
        v = logp.shape[-1]
        cand = (logp + beam_scores[:, None]).reshape(b, k * v)                   # (B, K*V)
        top = np.argsort(-cand, axis=-1, kind="stable")[:, :keep]                # (B, keep) best first
        top_scores = np.take_along_axis(cand, top, axis=-1)
        generated = seq.shape[1] + 1 - s      # tokens generated once this step's token is appended
        next_scores, next_tokens = np.zeros((b, k)), np.full((b, k), pad, dtype=np.int64)
        next_rows = np.repeat(np.arange(b)[:, None] * k, k, axis=1)              # (B, K) done prompts: row 0
        for i in range(b):
            if done[i]:
                continue
            j = 0
            for rank in range(top.shape[1]):
                token, score, row = top[i, rank] % v, top_scores[i, rank], i * k + top[i, rank] // v
                if eos is not None and token in eos:
                    if rank < k:                                  # an eos below the K best is dropped
                        hyps[i].add(np.append(seq[row], token), score, generated)   # with its own eos
                else:
                    next_scores[i, j], next_tokens[i, j], next_rows[i, j] = score, token, row
                    j += 1
                if j == k:
                    break
            done[i] = hyps[i].is_done(top_scores[i, 0], generated)
        rows = next_rows.reshape(-1)
        beam_scores = next_scores.reshape(-1)
        new = next_tokens.reshape(-1, 1)
        seq = np.concatenate([seq[rows], new], axis=1)                           # (B*K, T+1)
        step.reorder(rows)
        if done.all():
            break
    for i in range(b):                        # the live beams of unfinished prompts compete too
        if not done[i]:
            for j in range(k):
                hyps[i].add(seq[i * k + j], beam_scores[i * k + j], seq.shape[1] - s)
    best = [tokens for h in hyps                      # each prompt's n_return best, best first
            for _, tokens in sorted(h.beams, key=lambda e: -e[0])[:n_return]]
    out = np.full((len(best), max(len(t) for t in best)), pad, dtype=np.int64)
    for i, tokens in enumerate(best):         # a finished hypothesis ends with the eos it produced
        out[i, :len(tokens)] = tokens
    return out
