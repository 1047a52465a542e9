"""Splitting and merging attention heads, in every multi-head exercise (multi-head attention,
cross-attention, the encoder and decoder layers): (B, S, D) -> (B, S, H, Dh) -> (B, H, S, Dh) and back."""

from . import Family

_SPLIT = (r"\.reshape\((\w+), (\w+), H, (\w+) // H\)\.transpose\(0, 2, 1, 3\)", r".reshape(\1, H, \2, \3 // H)")
#: the merge, as solutions spell its target shape: (B, S, H * Dh) or (B, S, D)
_MERGE = (r"(\w+)\.transpose\(0, 2, 1, 3\)\.reshape\((\w+), (\w+), H \* Dh\)", r"\1.reshape(\2, \3, H * Dh)")
_MERGE_D = (r"\.transpose\(0, 2, 1, 3\)\.reshape\((\w+), (\w+), (\w+)\)", r".reshape(\1, \2, \3)")

FAMILIES = (
    Family("heads_split_without_transpose", "heads split with a reshape only (no transpose)",
           "(B, S, D) -> (B, H, S, Dh) is a reshape to (B, S, H, Dh) *then* a transpose moving H before S; "
           "reshaping straight to (B, H, S, Dh) cuts the sequence, not the features, into heads.",
           "x.reshape(B, S, H, D // H).transpose(0, 2, 1, 3) (and merge with .transpose(0, 2, 1, 3) first).",
           ((_SPLIT,), (_SPLIT, _MERGE), (_SPLIT, _MERGE_D))),    # the merge too: often forgotten alike
    Family("heads_merge_without_transpose", "heads merged without the transpose",
           "(B, H, S, Dh) -> (B, S, D) must move H back after S *before* the reshape; reshaping alone "
           "interleaves positions and heads.",
           "x.transpose(0, 2, 1, 3).reshape(B, S, H * Dh).",
           ((_MERGE,), (_MERGE_D,))),
)
