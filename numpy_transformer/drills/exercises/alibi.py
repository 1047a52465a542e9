"""The alibi drill: ALiBi's per-head slopes (the paper's interleaving for H not a power of two) and the
(H, S, T) bias, end-aligned for a KV-cache decode step. Forward only: the bias has no parameters, so
it needs no backward (the lesson)."""

from __future__ import annotations

from types import SimpleNamespace

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc


def _draw_alibi(rng, i):
    edges = [(8, 4, 4), (6, 3, 3), (12, 1, 7), (1, 2, 2), (5, 2, 6)]
    if i < len(edges):
        h, s, t = edges[i]
    else:
        h = int(rng.integers(1, 17))
        t = int(rng.integers(1, 9))
        s = int(rng.integers(1, t + 1))
    tags = ([] if h & (h - 1) == 0 else ["H not a power of two"]) + (["S < T (decode)"] if s < t else [])
    return Case({"num_heads": h, "S": s, "T": t}, _desc(f"H={h}", f"S={s}", f"T={t}"), tags,
                options={"H a power of two": h & (h - 1) == 0, "S < T": s < t})


def _run_alibi(rec, c):
    (slopes,) = rec.unpack("alibi_slopes", rec.call("alibi_slopes", c["num_heads"]), ["slopes"])
    rec.output("slopes", slopes)
    (bias,) = rec.unpack("alibi_bias", rec.call("alibi_bias", c["num_heads"], c["S"], c["T"]), ["bias"])
    rec.output("bias", bias)


def _ref_alibi():
    return SimpleNamespace(alibi_slopes=F.alibi_slopes, alibi_bias=lambda h, s, t: F.alibi_bias(h, s, t))


ALIBI = Exercise(
    name="alibi", difficulty="easy", minutes=10,
    covers="ALiBi: per-head slopes (H not a power of two too) and the (H, S, T) bias; no backward needed",
    functions=("alibi_slopes", "alibi_bias"),
    outputs=(("slopes", "alibi_slopes"), ("bias", "alibi_bias")),
    library=("alibi_slopes", "alibi_bias"),
    draw=_draw_alibi, run=_run_alibi, reference=_ref_alibi, variant=V.alibi_impl, n_edge=5,
    topic="position bias",
    mistakes=(
        Mistake("alibi_geometric_for_any_h", "slopes 2^(-8 i / H) for every H, also when H is not a power of two",
                "The paper's geometric sequence is for H a power of two; for other H its reference code takes the "
                "slopes of the closest lower power of two H', then every other slope of 2 H' (H = 6: 2^-2, 2^-4, "
                "2^-6, 2^-8, 2^-1, 2^-3).",
                "p = 2 ** floor(log2(H)); slopes(p), then slopes(2p)[0::2][:H - p].",
                ({"slopes": "geometric"},)),
        Mistake("alibi_slopes_from_zero", "slopes counted from i = 0: the first head's slope is 1",
                "The slopes are m_h = 2^(-8 h / H) for h = 1..H (H = 8: 1/2 ... 1/256); from 0 every head is "
                "shifted by one and the first one penalises distance by 1 per position.",
                "2.0 ** (-8.0 * np.arange(1, H + 1) / H).",
                ({"start": 0},)),
        Mistake("alibi_sign_flipped", "bias = +m (i - j): far keys are favoured instead of penalised",
                "ALiBi subtracts m_h per position of distance into the past: bias = -m_h * (i - j) <= 0 for "
                "keys j <= i.",
                "bias[h, i, j] = m_h * (j - (i + T - S)).",
                ({"sign": +1.0},)),
        Mistake("alibi_top_left_aligned", "query i placed at key position i when S < T (a decode step's one "
                "query treated as position 0)",
                "With S queries over T keys the queries are the last S positions: query i sits at key position "
                "i + T - S. A decode step (S = 1) is the last row of the full matrix, not its first.",
                "rel = np.arange(T)[None, :] - (np.arange(S)[:, None] + T - S).",
                ({"align": "top_left"},)),
    ),
)
