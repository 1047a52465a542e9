"""The classic mistakes of the causal_attention_kv_cache drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("kv_attend_before_append", "the new position's own key left out (attended to the old cache before appending)",
            "A new position attends to itself too (the diagonal of the causal mask): its own key and value "
            "must be among the keys it attends. Attending to the old cache before appending leaves them "
            "out (and an empty cache has nothing to attend to at the first step).",
            "concatenate first, K = np.concatenate([k_cache, k_new], axis=2) (and V), then attend over K "
            "and V.",
        [
            ('(q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh))',
             '(q @ np.swapaxes(k_cache, -1, -2)) / np.sqrt(Dh))'),
            ('blocked = np.triu(np.ones((S, N), dtype=bool), k=N - S + 1)',
             'blocked = np.triu(np.ones((S, N - S), dtype=bool), k=N - S + 1)'),
            ('return P @ V, K, V',
             'return P @ v_cache, K, V'),
        ]),
    Mistake("kv_causal_top_left", "causal mask aligned top-left: the new query treated as position 0",
            "np.triu(ones((S, T + S)), 1) is the mask of queries at positions 0..S-1 (torch's is_causal=True "
            "when S != T does the same): a single new query then sees only the first cached key. The new "
            "positions are the LAST S rows of the full causal mask: position T + i sees keys j <= T + i.",
            "blocked = np.triu(np.ones((S, N), bool), k=N - S + 1) with N = T + S (nothing masked for S = 1).",
        [
            ('k=N - S + 1)',
             'k=1)'),
        ]),
    Mistake("kv_no_causal_mask_in_chunk", "no causal mask among the new positions of a chunk (S > 1)",
            "With one new position nothing needs masking, but in a chunk of S > 1 new positions position "
            "T + i must not see the new positions after it.",
            "blocked = np.triu(np.ones((S, N), bool), k=N - S + 1) with N = T + S.",
        [
            ('np.where(blocked, -np.inf, (q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh))',
             '(q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh)'),
        ]),
    Mistake("kv_cache_returned_stale", "the cache returned without the new keys and values",
            "The new entries were used for this step but the cache handed to the next step lacks them: the "
            "next token would not see this one.",
            "return out, K, V with K = [k_cache ; k_new] and V = [v_cache ; v_new].",
        [
            ('return P @ V, K, V',
             'return P @ V, k_cache, v_cache'),
        ],
        also=([('return P @ V, K, V', 'return P @ V, K, v_cache')],)),
    Mistake("kv_appended_in_front", "new keys and values put in front of the cache",
            "The cache is in position order, oldest first: the new entries go at the end. In front, the "
            "next steps' causal masks (and rotary positions) no longer match.",
            "np.concatenate([k_cache, k_new], axis=2), cache first.",
        [
            ('np.concatenate([k_cache, k_new], axis=2)',
             'np.concatenate([k_new, k_cache], axis=2)'),
            ('np.concatenate([v_cache, v_new], axis=2)',
             'np.concatenate([v_new, v_cache], axis=2)'),
        ]),
)
