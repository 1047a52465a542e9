"""The activations' classic mistakes (the stable sigmoid of SiLU and SwiGLU)."""

from . import Family

FAMILIES = (
    Family("sigmoid_stable_branch_swapped", "stable sigmoid with its two branches swapped",
           "With e = exp(-|x|): sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0. Swapped, "
           "the result is sigmoid(-x) = 1 - sigmoid(x).",
           "np.where(x >= 0, 1.0, e) / (1.0 + e) with e = np.exp(-np.abs(x)).",
           (((r"np\.where\((\w+) >= 0, 1\.0, (\w+)\) / \(1\.0 \+ \2\)",
               r"np.where(\1 >= 0, \2, 1.0) / (1.0 + \2)"),),)),
)
