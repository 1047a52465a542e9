"""The attention mistakes the attention drills share (scaled dot-product attention, multi-head
attention, cross attention, the encoder layer): their title, explanation and fix are written once here;
each exercise's ``mistakes.py`` lists the ones its inputs can show (the encoder layer has no causal flag,
so no causal mistakes) with :func:`shared`, giving the patch of its own ``solution.py`` that makes it."""

from __future__ import annotations

from dataclasses import replace

from ..engine.definition import Mistake, Patch

#: the mask: applied after the softmax, inverted, -1e9 instead of -inf, fully-masked rows giving NaN
ATTENTION_MASK_MISTAKES = (
    Mistake("attn_mask_after_softmax", "mask applied after the softmax",
            "Zeroing probabilities after the softmax leaves rows that no longer sum to 1; masked scores "
            "must be -inf *before* the softmax.",
            "scores = np.where(mask, -np.inf, scores) before the softmax.", ()),
    Mistake("attn_mask_inverted", "mask convention inverted (True read as 'may attend')",
            "In this drill (as torch.nn.MultiheadAttention) True means 'may NOT attend'; "
            "torch.nn.functional.scaled_dot_product_attention reads a bool mask the other way round.",
            "scores = np.where(mask, -np.inf, scores).", ()),
    Mistake("attn_masked_rows_not_zero", "fully-masked rows are not zero (a large negative fill such as -1e9)",
            "With -1e9 a row whose keys are all masked becomes a uniform average of the values; the "
            "convention here is that such a row outputs zeros and gets zero gradient.",
            "Fill with -np.inf and make the softmax return 0 for an all -inf row (max -> 0, sum -> 1).", ()),
    Mistake("attn_masked_rows_nan", "fully-masked rows give NaN (-inf - -inf in the softmax)",
            "When every key of a row is masked, the row max is -inf and exp(-inf - -inf) is NaN.",
            "m = np.where(np.isneginf(m), 0, m) before exp; divide by a sum of 1 where it is 0.", ()),
)

#: the causal flag: blocking the past instead of the future, or the diagonal too
CAUSAL_MISTAKES = (
    Mistake("attn_causal_wrong_direction", "causal mask blocks the past instead of the future",
            "Position i may attend keys j <= i: block j > i, i.e. np.triu(..., k=1).",
            "causal_block = np.triu(np.ones((S, T), dtype=bool), k=1).", ()),
    Mistake("attn_causal_blocks_diagonal", "causal mask also blocks the diagonal (a position cannot see itself)",
            "np.triu(..., k=0) includes the diagonal; position i must see key i.",
            "causal_block = np.triu(np.ones((S, T), dtype=bool), k=1).", ()),
)


_BY_ID = {m.id: m for m in ATTENTION_MASK_MISTAKES + CAUSAL_MISTAKES}


def shared(mistake_id: str, patches: Patch) -> Mistake:
    """The shared mistake ``mistake_id`` as the patch ``patches`` of one exercise's solution makes it."""
    return replace(_BY_ID[mistake_id], patches=patches)
