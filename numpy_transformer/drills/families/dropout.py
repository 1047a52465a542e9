"""Inverted dropout's scale."""

from . import Family

FAMILIES = (
    Family("dropout_scale_inverted", "kept elements multiplied by (1 - p) instead of divided by it",
           "Inverted dropout keeps E[y] = x by scaling the kept elements UP by 1/(1-p) at training; "
           "multiplying by (1-p) is the old evaluation-time rescaling.",
           "y = x * keep / (1 - p).",
           (((r"1\.0 / \(1\.0 - p\)", "(1.0 - p)"),),)),
)
