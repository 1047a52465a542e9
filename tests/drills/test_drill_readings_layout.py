"""Generic readings (``drills/engine/readings.py``, ``engine/layout.py``) name mistakes that no
exercise lists and no family spells, from the numbers alone: results returned in the wrong order, the
right values reversed along an axis or laid out by a reshape that needed a transpose, an integer or
float32 dtype, a mask read with the opposite polarity. Each patch is written here, in a candidate's own
spelling (none is a patch of the held-out sets), and was unnamed before these readings; three of them
are named by families written since (a family's name comes first), which is tested here too."""

from __future__ import annotations

import numpy as np
import pytest

from numpy_transformer.drills.engine import layout, readings
from tests.drills.test_drill_diagnosis import check_patched

VERIFIED = "no listed mistake, but the error reads (verified on your arrays)"


def diagnosis(out):
    """The diagnosis block of a flattened report."""
    return out.split("diagnosis:", 1)[1].split("gradient check", 1)[0]


@pytest.mark.parametrize("name,patches,needle", [
    # the backward's two results returned in each other's places (their shapes differ)
    ("learned_positions", [("    return dy.copy(), dW", "    dx = dy + 0.0\n    return dW, dx")],
     "the results are returned in the wrong order"),
    # the ids read column by column, the rows reshaped back in the (B, S) order
    ("embedding", [("return W[ids], (ids, W.shape)",
                    "return W[ids.T.reshape(-1)].reshape(ids.shape + W.shape[1:]), (ids, W.shape)")],
     "a reshape that needed a transpose first"),
    # the gradient allocated with an integer dtype
    ("learned_positions", [("dW = np.zeros(shape)", "dW = np.zeros(shape, dtype=np.int64)")],
     "the integer dtype int64"),
])
def test_a_generic_reading_heads_the_diagnosis(tmp_path, name, patches, needle):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc != 0, out
    first = diagnosis(out).split(" * ")[1]
    assert first.startswith(VERIFIED), first
    assert needle in first, first


@pytest.mark.parametrize("name,patches,family", [
    ("alibi", [("return alibi_slopes(num_heads)[:, None, None] * rel[None]",
                "return np.flip(alibi_slopes(num_heads))[:, None, None] * rel[None]")], "alibi_slopes_reversed"),
    ("positional_encoding", [("    return pe", "    return pe.astype(np.float32)")], "pe_table_float32"),
    ("decoder_layer", [("pad = memory_key_padding_mask[:, None, None, :]",
                        "pad = np.logical_not(memory_key_padding_mask)[:, None, None, :]")], "attn_mask_inverted"),
])
def test_what_a_reading_found_first_a_family_now_names(tmp_path, name, patches, family):
    """The reversed slopes, the float32 table and the inverted mask were read generically first; the op's
    families now name them (a family's name comes before a reading's), in the candidate's spelling too."""
    rc, out = check_patched(tmp_path, name, patches)
    assert rc != 0 and f"known mistake [{family}]" in diagnosis(out).split("* ", 2)[1], out


def test_the_results_swapped_reading_needs_every_value_equal():
    refs = {"dx": np.arange(6.0).reshape(2, 3), "dW": np.arange(4.0) + 1.0}
    assert layout.returned_swapped("dx", refs["dW"].copy(), refs)[0] == "swapped:dW"
    assert layout.returned_swapped("dx", refs["dW"] + 1e-6, refs) is None


def test_a_reversal_is_not_read_where_the_axis_is_symmetric():
    ref = np.array([[1.0, 2.0, 1.0], [3.0, 5.0, 3.0]])
    assert layout.reversed_axis(ref[::-1].copy(), ref)[0] == "reversed:0"
    assert layout.reversed_axis(ref.copy(), ref) is None          # reversed along axis 1 it is itself


def test_a_mask_is_negated_once_per_array():
    mask = np.array([[True, False], [False, False]])
    assert readings._negated(mask) is readings._negated(mask)
    assert np.array_equal(readings._negated(mask), ~mask)


def test_the_backward_read_at_the_forward_output():
    """A sigmoid's backward evaluated at y = sigmoid(x) (a cache keeping y for x) is read as such."""
    class Case:
        inputs = {"x": np.linspace(-2.0, 2.0, 7), "dy": np.linspace(1.0, 2.0, 7)}

    def reference(inputs):
        s = 1.0 / (1.0 + np.exp(-inputs["x"]))
        return {"y": s, "dx": inputs["dy"] * s * (1.0 - s)}

    refs = reference(Case.inputs)
    at_y = reference(dict(Case.inputs, x=refs["y"]))["dx"]
    assert readings.wrong_point(Case, "dx", at_y, reference, refs)[0] == "point:x->y"
    assert readings.wrong_point(Case, "dx", at_y * 1.001, reference, refs) is None
