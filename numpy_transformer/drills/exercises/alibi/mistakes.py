"""The classic mistakes of the alibi drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("alibi_geometric_for_any_h", "slopes 2^(-8 i / H) for every H, also when H is not a power of two",
            "The paper's geometric sequence is for H a power of two; for other H its reference code takes the "
            "slopes of the closest lower power of two H', then every other slope of 2 H' (H = 6: 2^-2, 2^-4, "
            "2^-6, 2^-8, 2^-1, 2^-3).",
            "p = 2 ** floor(log2(H)); slopes(p), then slopes(2p)[0::2][:H - p].",
        [
            ('    if p == num_heads:\n        return _geometric(p)\n',
             '    return _geometric(num_heads)\n'),
        ]),
    Mistake("alibi_slopes_from_zero", "slopes counted from i = 0: the first head's slope is 1",
            "The slopes are m_h = 2^(-8 h / H) for h = 1..H (H = 8: 1/2 ... 1/256); from 0 every head is "
            "shifted by one and the first one penalises distance by 1 per position.",
            "2.0 ** (-8.0 * np.arange(1, H + 1) / H).",
        [
            ('np.arange(1, n + 1) / n',
             'np.arange(0, n) / n'),
        ]),
    Mistake("alibi_sign_flipped", "bias = +m (i - j): far keys are favoured instead of penalised",
            "ALiBi subtracts m_h per position of distance into the past: bias = -m_h * (i - j) <= 0 for "
            "keys j <= i.",
            "bias[h, i, j] = m_h * (j - (i + T - S)).",
        [
            ('return alibi_slopes(num_heads)[:, None, None] * rel[None]',
             'return -alibi_slopes(num_heads)[:, None, None] * rel[None]'),
        ]),
    Mistake("alibi_top_left_aligned", "query i placed at key position i when S < T (a decode step's one "
            "query treated as position 0)",
            "With S queries over T keys the queries are the last S positions: query i sits at key position "
            "i + T - S. A decode step (S = 1) is the last row of the full matrix, not its first.",
            "rel = np.arange(T)[None, :] - (np.arange(S)[:, None] + T - S).",
        [
            ('(np.arange(s)[:, None] + t - s)',
             'np.arange(s)[:, None]'),
        ]),
)
