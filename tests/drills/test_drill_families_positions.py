"""The position schemes' mistake families (issue 24): ALiBi's slopes and bias (``families/alibi.py``),
the sinusoid table (``sinusoid.py``), rotary embeddings (``rope.py``) and T5's buckets
(``t5_bias.py``). Each mistake below is written as a candidate would spell it, not as the family's
rewrite of the reference solution: the family names it because the numbers agree, not the text."""

from __future__ import annotations

import pytest

import numpy_transformer.drills as drills
from numpy_transformer.drills import families
from tests.drills.drill_helpers import apply_patches, check_inprocess, first_diagnosis, solution_source

#: (exercise, the op whose families it now declares)
DECLARED = [("alibi", "alibi"), ("positional_encoding", "sinusoid"), ("rope", "rope"),
            ("relative_position_bias", "t5_bias")]


@pytest.mark.parametrize("name,op", DECLARED)
def test_the_exercise_declares_its_position_op_and_every_family_applies(name, op):
    ex = drills.EXERCISES[name]
    assert op in ex.ops
    ids = {m.id for m in ex.families} | {m.id for m in ex.mistakes}   # a family, or listed under its id
    for fam in families.families_of(op):          # each classic mistake is a patch of this solution
        assert fam.id in ids, (name, fam.id)


PE_LOOP = """
import numpy as np


def positional_encoding(S, D):
    pe = np.zeros((S, D))
    for pos in range(S):
        for i in range(0, D, 2):
            {body}
    return pe
"""

CASES = [
    # ALiBi: the ratio 2^(-8/H) written as 1/2 for every H
    ("alibi", [("return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)",
                "return np.array([0.5 ** (h + 1) for h in range(n)])")], "alibi_slopes_exponent_no_ratio"),
    # ALiBi: the extra slopes of a non-power-of-two H from the odd places of the 2p sequence
    ("alibi", [("_geometric(2 * p)[0::2][:num_heads - p]", "_geometric(2 * p)[1:2 * (num_heads - p):2]")],
     "alibi_extra_slopes_odd"),
    # ALiBi: a symmetric distance
    ("alibi", [("return alibi_slopes(num_heads)[:, None, None] * rel[None]",
                "return -alibi_slopes(num_heads)[:, None, None] * np.abs(rel)[None]")],
     "alibi_bias_absolute_distance"),
    # ALiBi: the slopes in reverse order
    ("alibi", [("return _geometric(p)\n", "return _geometric(p)[::-1]\n")], "alibi_slopes_reversed"),
    # the sinusoid table, a loop: multiplied by 10000^(2i/D) instead of divided
    ("positional_encoding", None, "pe_exponent_sign_flipped",
     "a = pos * 10000 ** (i / D); pe[pos, i] = np.sin(a); pe[pos, i + 1] = np.cos(a)"),
    # ... the base 1000
    ("positional_encoding", None, "pe_base_1000",
     "a = pos / 1000 ** (i / D); pe[pos, i] = np.sin(a); pe[pos, i + 1] = np.cos(a)"),
    # ... sin on both columns of the pair
    ("positional_encoding", None, "pe_sin_everywhere",
     "a = pos / 10000 ** (i / D); pe[pos, i] = np.sin(a); pe[pos, i + 1] = np.sin(a)"),
    # rotary: the positions argument not used
    ("rope", [("theta = np.asarray(positions, dtype=np.float64)[:, None] * w",
               "theta = np.outer(np.arange(x.shape[-2]), w)")], "rope_positions_ignored"),
    # rotary: the backward returns the upstream gradient as it came
    ("rope", [("return _rotate(dy, cos, -sin, first, second)", "return dy")], "rope_backward_not_rotated"),
    # T5: unidirectional keeps the future by its absolute distance
    ("relative_position_bias", [("n = -np.minimum(rel, 0)", "n = np.where(rel < 0, -rel, rel)")],
     "t5_unidirectional_abs"),
    # T5: the log range normalised by log(max_distance) alone
    ("relative_position_bias", [("np.log(n / max_exact) / np.log(max_distance / max_exact)",
                                 "(np.log(n) - np.log(max_exact)) / np.log(max_distance)")],
     "t5_log_over_max_distance"),
    # T5: dbias flattened as (S*T, H) without moving H last
    ("relative_position_bias", [("dbias.reshape(H, -1).T", "np.reshape(dbias, (-1, H))")],
     "t5_dbias_reshaped_not_transposed"),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_position_mistake_in_the_candidates_spelling_is_named(case, tmp_path):
    name, patches, family = case[:3]
    if patches is None:
        src = PE_LOOP.format(body=case[3].replace("; ", "\n            "))
    else:
        src = apply_patches(solution_source(name), patches)
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    rc, out = check_inprocess(path, exercise=name, cases=12)
    assert rc == 1, out
    assert first_diagnosis(out) == family, out
    assert drills.EXERCISES[name].mistake(family).title in " ".join(out.split())
