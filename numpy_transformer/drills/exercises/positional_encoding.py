"""The positional_encoding drill: the sinusoidal table, vectorised."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc


def _draw_positional(rng, i):
    edges = [(1, 2), (1, 8), (6, 2), (50, 16), (7, 6)]
    if i < len(edges):
        s, d = edges[i]
    else:
        s, d = int(rng.integers(1, 51)), 2 * int(rng.integers(1, 17))
    return Case({"S": s, "D": d}, _desc(f"S={s}", f"D={d}"))


def _run_positional(rec, c):
    (pe,) = rec.unpack("positional_encoding", rec.call("positional_encoding", c["S"], c["D"]), ["pe"])
    rec.output("pe", pe)


def _ref_positional():
    from ... import sinusoidal_table
    return SimpleNamespace(positional_encoding=lambda S, D: sinusoidal_table(S, D, np.float64))


POSITIONAL = Exercise(
    name="positional_encoding", difficulty="easy", minutes=8,
    covers="the sinusoidal table pe[pos, 2i] = sin(pos / 10000^(2i/D)), pe[pos, 2i+1] = cos(...), vectorised",
    functions=("positional_encoding",),
    outputs=(("pe", "positional_encoding"),),
    library=(),
    draw=_draw_positional, run=_run_positional, reference=_ref_positional, variant=V.positional_encoding_impl,
    n_edge=5, reference_name="numpy_transformer.nn.sinusoidal_table (verified)",
    mistakes=(
        Mistake("pe_sin_cos_swapped", "sin and cos swapped (cos on the even columns)",
                "Even columns 2i hold the sine, odd columns 2i+1 the cosine of the same angle.",
                "pe[:, 0::2] = np.sin(angle); pe[:, 1::2] = np.cos(angle).",
                ({"swap": True},)),
        Mistake("pe_concatenated", "sines and cosines concatenated [sin | cos] instead of interleaved",
                "The table interleaves: column 2i is sin, column 2i+1 is cos of the same frequency.",
                "pe[:, 0::2] = sin, pe[:, 1::2] = cos (strided assignment), not np.concatenate.",
                ({"layout": "concat"},)),
        Mistake("pe_column_exponent", "odd columns use their own index: 10000^(j/D) instead of 10000^(2i/D)",
                "Columns 2i and 2i+1 share one frequency 1/10000^(2i/D); the odd column's exponent is "
                "not (2i+1)/D.",
                "freq = 10000.0 ** (-np.arange(0, D, 2) / D), used for both columns of a pair.",
                ({"exponent": "column"},)),
        Mistake("pe_missing_factor_two", "exponent i/D instead of 2i/D (i the pair index)",
                "The frequency of pair i is 1 / 10000^(2i/D); np.arange(D // 2) / D drops the 2.",
                "freq = 10000.0 ** (-np.arange(0, D, 2) / D).",
                ({"exponent": "no_two"},)),
        Mistake("pe_positions_from_one", "positions counted from 1 instead of 0",
                "The first position is pos = 0 (its row is [0, 1, 0, 1, ...]).",
                "pos = np.arange(S)[:, None].",
                ({"first_position": 1},)),
    ),
)
