"""The classic mistakes of the positional_encoding drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("pe_sin_cos_swapped", "sin and cos swapped (cos on the even columns)",
            "Even columns 2i hold the sine, odd columns 2i+1 the cosine of the same angle.",
            "pe[:, 0::2] = np.sin(angle); pe[:, 1::2] = np.cos(angle).",
        [
            ('pe[:, 0::2] = np.sin(angle)',
             'pe[:, 0::2] = np.cos(angle)'),
            ('pe[:, 1::2] = np.cos(angle)',
             'pe[:, 1::2] = np.sin(angle)'),
        ]),
    Mistake("pe_concatenated", "sines and cosines concatenated [sin | cos] instead of interleaved",
            "The table interleaves: column 2i is sin, column 2i+1 is cos of the same frequency.",
            "pe[:, 0::2] = sin, pe[:, 1::2] = cos (strided assignment), not np.concatenate.",
        [
            ('pe[:, 0::2] = np.sin(angle)\n    pe[:, 1::2] = np.cos(angle)',
             'pe = np.concatenate([np.sin(angle), np.cos(angle)], axis=1)'),
        ]),
    Mistake("pe_column_exponent", "odd columns use their own index: 10000^(j/D) instead of 10000^(2i/D)",
            "Columns 2i and 2i+1 share one frequency 1/10000^(2i/D); the odd column's exponent is "
            "not (2i+1)/D.",
            "freq = 10000.0 ** (-np.arange(0, D, 2) / D), used for both columns of a pair.",
        [
            ('pe[:, 1::2] = np.cos(angle)',
             'pe[:, 1::2] = np.cos(pos * np.exp(-np.log(10000.0) * np.arange(1, D, 2) / D))'),
        ]),
    Mistake("pe_missing_factor_two", "exponent i/D instead of 2i/D (i the pair index)",
            "The frequency of pair i is 1 / 10000^(2i/D); np.arange(D // 2) / D drops the 2.",
            "freq = 10000.0 ** (-np.arange(0, D, 2) / D).",
        [
            ('np.arange(0, D, 2) / D',
             'np.arange(D // 2) / D'),
        ]),
    Mistake("pe_positions_from_one", "positions counted from 1 instead of 0",
            "The first position is pos = 0 (its row is [0, 1, 0, 1, ...]).",
            "pos = np.arange(S)[:, None].",
        [
            ('np.arange(S, dtype',
             'np.arange(1, S + 1, dtype'),
        ]),
)
