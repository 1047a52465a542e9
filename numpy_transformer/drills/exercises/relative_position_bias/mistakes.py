"""The classic mistakes of the relative_position_bias drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("rpb_repeated_buckets_dropped", "bias gradient drops repeated buckets (dW[buckets] += ...)",
            "Many (query, key) pairs share a bucket; NumPy's buffered fancy-index assignment writes each "
            "repeated index once, so dW[buckets] += dbias keeps one pair per bucket instead of their sum.",
            "np.add.at(dW, buckets.reshape(-1), dbias.reshape(H, -1).T).",
        [
            ('np.add.at(dW, buckets.reshape(-1), dbias.reshape(H, -1).T)',
             'dW[buckets.reshape(-1)] += dbias.reshape(H, -1).T'),
        ]),
    Mistake("rpb_sign_flipped", "relative position taken as query - key instead of key - query",
            "T5's relative position is memory_position - query_position: negative for keys in the past. "
            "Flipped, past and future swap buckets (bidirectional: the two halves; causal: the past "
            "collapses into bucket 0).",
            "rel = np.arange(T)[None, :] - (np.arange(S)[:, None] + T - S).",
        [
            ('rel = np.arange(T)[None, :] - query',
             'rel = query - np.arange(T)[None, :]'),
        ]),
    Mistake("rpb_halves_not_split", "bidirectional buckets not split in half (past and future)",
            "Bidirectional, the table has two halves of num_buckets // 2: the past (and the query's own "
            "position) in the first, the future, offset by num_buckets // 2, in the second; each half has "
            "its own exact and log-spaced buckets, computed with num_buckets // 2.",
            "if bidirectional: num_buckets //= 2; buckets += (rel > 0) * num_buckets; n = abs(rel).",
        [
            ('        num_buckets //= 2                              # two halves: the past and the future\n',
             ''),
        ]),
)
