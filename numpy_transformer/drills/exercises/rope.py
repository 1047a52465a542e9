"""The rope drill: rotary position embeddings in either pair layout, and the backward as the transposed
rotation."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape

# (shape, first position, base, interleaved): S = 1, Dh = 2, H = 1, a decode step at an offset, both layouts
_ROPE_EDGES = [((1, 1, 4, 8), 0, 10000.0, False), ((1, 1, 4, 8), 0, 10000.0, True), ((5, 2), 3, 10000.0, False),
               ((2, 1, 1, 6), 17, 10000.0, True), ((2, 3, 5, 8), 0, 100.0, False), ((3, 6, 4), 40, 500.0, True)]


def _draw_rope(rng, i):
    if i < len(_ROPE_EDGES):
        shape, start, base, interleaved = _ROPE_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3))))
        shape = lead + (int(rng.integers(1, 7)), 2 * int(rng.integers(2, 6)))
        start, base = int(rng.choice([0, 0, int(rng.integers(1, 60))])), float(rng.choice([10000.0, 100.0, 500.0]))
        interleaved = bool(rng.integers(2))
    s = shape[-2]
    x, dy = rng.standard_normal(shape), rng.standard_normal(shape)
    positions = start + np.arange(s)
    tags = (["S=1"] if s == 1 else []) + (["Dh=2"] if shape[-1] == 2 else []) + \
        ([f"positions from {start}"] if start else [])
    return Case({"x": x, "positions": positions, "base": base, "interleaved": interleaved, "dy": dy},
                _desc(f"x {_shape(x)}", f"positions {start}..{start + s - 1}", f"base={base:g}",
                      f"interleaved={interleaved}"), tags, {"S": s, "Dh": shape[-1]})


def _run_rope(rec, c):
    y, cache = rec.pair("rope_forward", rec.call("rope_forward", c["x"], c["positions"], base=c["base"],
                                                 interleaved=c["interleaved"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("rope_backward", rec.call("rope_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_rope():
    return SimpleNamespace(
        rope_forward=lambda x, positions, base=10000.0, interleaved=False: F.rope_forward(x, positions, base,
                                                                                          interleaved),
        rope_backward=F.rope_backward)


ROPE = Exercise(
    name="rope", difficulty="medium", minutes=12,
    covers="rotary embeddings: pairs (i, i + Dh/2) or (2i, 2i+1), frequencies base^(-2i/Dh); backward R(-theta)",
    functions=("rope_forward", "rope_backward"),
    outputs=(("y", "rope_forward"), ("dx", "rope_backward")),
    library=("rope_forward", "rope_backward"),
    draw=_draw_rope, run=_run_rope, reference=_ref_rope, variant=V.rope_impl,
    n_edge=len(_ROPE_EDGES),
    mistakes=(
        Mistake("rope_wrong_layout", "the wrong pair layout (interleaved (2i, 2i+1) vs rotate-half (i, i + Dh/2))",
                "interleaved=False pairs feature i with feature i + Dh/2 (GPT-NeoX, Hugging Face Llama); "
                "interleaved=True pairs 2i with 2i + 1 (the paper, Meta's Llama). Both are rotations, but "
                "weights trained with one layout are wrong under the other.",
                "interleaved: a, b = x[..., 0::2], x[..., 1::2]; rotate half: a, b = x[..., :Dh // 2], "
                "x[..., Dh // 2:].",
                ({"layout": "swapped"}, {"layout": "half"}, {"layout": "interleaved"})),
        Mistake("rope_freq_missing_two", "frequencies base^(-i/Dh) instead of base^(-2i/Dh) (i the pair index)",
                "Pair i turns with frequency base ** (-2i / Dh): the exponents run over 0, 2, 4, ... Dh-2, "
                "so np.arange(Dh // 2) / Dh drops the 2 and leaves the slowest pair far too fast.",
                "w = base ** (-np.arange(0, Dh, 2) / Dh).",
                ({"exponent": "no_two"},)),
        Mistake("rope_sin_sign_flipped", "the sine's sign flipped (a rotation by -theta: rotate_half as cat(x2, -x1))",
                "The rotation is a' = a cos - b sin, b' = a sin + b cos (rotate_half(x) = cat(-x2, x1)). "
                "With the sign flipped every position turns backwards: still relative, but not RoPE's "
                "convention, and a checkpoint trained the usual way is read wrongly.",
                "out_a = a * cos - b * sin; out_b = a * sin + b * cos.",
                ({"sin_sign": -1.0},)),
        Mistake("rope_backward_same_rotation", "backward rotates dy by +theta (the forward again) instead of -theta",
                "The forward is linear with one rotation R(theta) per pair, so dx = R(theta)^T dy, and "
                "R(theta)^T = R(-theta): the gradient is rotated back. Applying the forward to dy is R(theta).",
                "dx: the forward's formula on dy with the sine negated (same cos, -sin).",
                ({"backward": "same_rotation"},)),
    ),
)
