"""Inverted dropout's classic mistakes, from its definition: in training y = x * keep / (1 - p) with
keep = (u >= p) for u uniform, P(keep) = 1 - p (p is the probability of DROPPING); the backward reuses
that very mask and scale, dx = dy * keep / (1 - p); in evaluation dropout is the identity. The mask can
be inverted, the scale inverted, taken as 1/p, or lost in the backward, the mask lost in the backward,
and evaluation rescaled."""

from . import Family

BACKWARD = r"return dy \* keep \* scale"

FAMILIES = (
    Family("dropout_scale_inverted", "kept elements multiplied by (1 - p) instead of divided by it",
           "Inverted dropout keeps E[y] = x by scaling the kept elements UP by 1/(1-p) at training; "
           "multiplying by (1-p) is the old evaluation-time rescaling.",
           "y = x * keep / (1 - p).",
           (((r"1\.0 / \(1\.0 - p\)", "(1.0 - p)"),),)),
    Family("dropout_keep_mask_inverted", "keep mask inverted: keep = u < p keeps each element with probability p",
           "p is the probability of dropping: an element is kept when u >= p, with probability 1 - p "
           "(u < p keeps the ones that should be dropped).",
           "keep = rng.random(x.shape) >= p.",
           (((r"keep = rng\.random\(x\.shape\) >= p", "keep = rng.random(x.shape) < p"),),)),
    Family("dropout_scale_one_over_p", "kept elements scaled by 1/p instead of 1/(1 - p)",
           "The kept fraction is 1 - p, so E[x * keep] = (1 - p) x: dividing by 1 - p restores E[y] = x.",
           "scale = 1 / (1 - p).",
           (((r"1\.0 / \(1\.0 - p\)", "1.0 / p"),),)),
    Family("dropout_backward_no_mask", "the backward forgets the mask (dy scaled everywhere, dropped "
           "elements included)",
           "A dropped element's output is 0 whatever x is: its gradient is 0. dx = dy * keep / (1 - p), the "
           "forward's mask and scale.",
           "return dy * keep * scale.",
           (((BACKWARD, "return dy * scale"),),)),
    Family("dropout_backward_identity", "the backward passes dy through unchanged (neither mask nor scale)",
           "In training y = x * keep / (1 - p): its derivative is that same factor, so dx = dy * keep / (1 - p); "
           "only in evaluation is dropout the identity.",
           "return dy * keep * scale.",
           (((BACKWARD, "return dy.copy()"),),)),
    Family("dropout_eval_rescaled", "evaluation multiplies by (1 - p) (the old, non-inverted dropout's "
           "rescaling)",
           "With inverted dropout the training-time 1/(1 - p) already keeps E[y] = x: evaluation is the "
           "plain identity, y = x.",
           "if not training: return x.copy(), None.",
           (((r"return x\.copy\(\), None", "return x * (1.0 - p), None"),),)),
    Family("dropout_mask_broadcast", "one mask drawn for a smaller shape and broadcast (the same pattern for "
           "every row), not one draw per element",
           "Every element is dropped independently: the mask has x's own shape, rng.random(x.shape). A "
           "mask drawn over the last axis (or all axes but the first) repeats one pattern for every row.",
           "keep = rng.random(x.shape) >= p.",
           (((r"rng\.random\(x\.shape\)", "rng.random(x.shape[-1:])"),),
            ((r"rng\.random\(x\.shape\)", "rng.random(x.shape[1:])"),))),
    Family("dropout_training_flag_inverted", "the training flag inverted (drops in evaluation, identity in "
           "training)",
           "Dropout is active only while training: training=True draws the mask and scales; evaluation "
           "(training=False) is the identity.",
           "if not training: return x.copy(), None.",
           (((r"if not training:", "if training:"),),)),
)
