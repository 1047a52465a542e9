"""ALiBi's classic mistakes (Press et al., 2022): the per-head slopes m_h = 2^(-8h/H), h = 1..H, with
the reference code's interleaving when H is not a power of two (the p = 2^floor(log2 H) slopes, then
every other slope of the 2p sequence), and the bias m_h (j - i) on the scores."""

from . import Family

#: the geometric sequence 2^(-8 h / n), as solutions write it
_GEOM = r"2\.0 \*\* \(-8\.0 \* np\.arange\(1, (\w+) \+ 1\) / \1\)"
#: the extra slopes of a non-power-of-two H: every other slope of the 2p sequence
_EXTRA = r"_geometric\(2 \* (\w+)\)\[0::2\]\[:(\w+) - \1\]"
#: the signed distance j - i of key j from query i (the query end-aligned, at i + T - S)
_REL = r"rel = (np\.arange\(\w+\)\[None, :\] - \(np\.arange\(\w+\)\[:, None\] \+ \w+ - \w+\))"

FAMILIES = (
    Family("alibi_slopes_exponent_no_ratio", "slopes 2^(-h): the exponent's ratio 8/H dropped",
           "The slopes are the geometric sequence m_h = 2^(-8h/H), h = 1..H: its ratio 2^(-8/H) depends "
           "on the number of heads (H = 8 gives 1/2, 1/4, ..., 1/256). 2^(-h) is right only for H = 8.",
           "m = 2.0 ** (-8.0 * np.arange(1, H + 1) / H).",
           (((_GEOM, r"2.0 ** (-1.0 * np.arange(1, \1 + 1))"),),)),
    Family("alibi_slopes_exponent_no_8", "slopes 2^(-h/H): the 8 of the exponent 8h/H dropped",
           "m_h = 2^(-8h/H): the last head's slope is 2^-8 whatever H. Without the 8 every slope lies "
           "between 1/2 and 1.",
           "m = 2.0 ** (-8.0 * np.arange(1, H + 1) / H).",
           (((_GEOM, r"2.0 ** (-1.0 * np.arange(1, \1 + 1) / \1)"),),)),
    Family("alibi_slopes_exponent_not_divided", "slopes 2^(-8h): the exponent 8h not divided by H",
           "m_h = 2^(-8h/H): the exponent runs from 8/H to 8, not from 8 to 8H.",
           "m = 2.0 ** (-8.0 * np.arange(1, H + 1) / H).",
           (((_GEOM, r"2.0 ** (-8.0 * np.arange(1, \1 + 1))"),),)),
    Family("alibi_slopes_base_e", "slopes exp(-8h/H): base e instead of 2",
           "The slopes are powers of two, m_h = 2^(-8h/H); exp(-8h/H) is a different sequence.",
           "m = 2.0 ** (-8.0 * np.arange(1, H + 1) / H).",
           (((_GEOM, r"np.exp(-8.0 * np.arange(1, \1 + 1) / \1)"),),)),
    Family("alibi_slopes_reversed", "slopes assigned to the heads in reverse order (the smallest slope on head 0)",
           "Head h = 1..H gets m_h = 2^(-8h/H): the first head has the largest slope (the most local "
           "head), the last the smallest.",
           "m = 2.0 ** (-8.0 * np.arange(1, H + 1) / H), in that order.",
           (((_GEOM, r"2.0 ** (-8.0 * np.arange(\1, 0, -1) / \1)"),),
            ((r"alibi_slopes\((\w+)\)\[:, None, None\]", r"alibi_slopes(\1)[::-1, None, None]"),))),
    Family("alibi_extra_slopes_odd", "H not a power of two: the extra slopes taken at the odd places of the 2p "
           "sequence (1::2) instead of the even ones (0::2)",
           "With p = 2^floor(log2 H), the first p slopes are the p-head sequence; the other H - p are "
           "every other slope of the 2p-head sequence starting with its first, 2^(-8/(2p)) * 2^(-8k/p): "
           "the slopes that fall between the first p (the odd places repeat them).",
           "np.concatenate([geometric(p), geometric(2 * p)[0::2][:H - p]]).",
           (((_EXTRA, r"_geometric(2 * \1)[1::2][:\2 - \1]"),),)),
    Family("alibi_extra_slopes_not_interleaved", "H not a power of two: the extra slopes are the first H - p "
           "of the 2p sequence instead of every other one",
           "The extra H - p slopes are every other slope of the 2p-head sequence ([0::2]), the ones that "
           "fall between the first p; its first H - p slopes crowd the large end.",
           "np.concatenate([geometric(p), geometric(2 * p)[0::2][:H - p]]).",
           (((_EXTRA, r"_geometric(2 * \1)[:\2 - \1]"),),)),
    Family("alibi_extra_slopes_power_rounded_up", "H not a power of two: p rounded up (ceil(log2 H)) "
           "instead of down",
           "p is the largest power of two not above H, 2^floor(log2 H); its slopes come first and the "
           "other H - p are taken from the 2p sequence.",
           "p = 2 ** int(math.floor(math.log2(H))).",
           (((r"math\.floor\(math\.log2\(", "math.ceil(math.log2("),),)),
    Family("alibi_bias_absolute_distance", "bias -m |j - i|: the absolute distance (a symmetric bias) instead "
           "of the signed m (j - i)",
           "ALiBi's bias is m (j - i) with the signed distance (<= 0 for the past keys, positive for the "
           "future ones a causal mask then hides); -m |j - i| penalises the future alike.",
           "rel = np.arange(T)[None, :] - (np.arange(S)[:, None] + T - S); bias = m * rel.",
           (((_REL, r"rel = -np.abs(\1)"),),)),
    Family("alibi_bias_slopes_dropped", "bias = j - i for every head: the slopes m_h never multiplied in",
           "Each head h scales the same distance j - i by its own slope m_h: that is what makes some heads "
           "local and others global.",
           "bias = slopes[:, None, None] * rel[None].",
           (((r"alibi_slopes\((\w+)\)\[:, None, None\] \* (\w+)\[None\]",
               r"np.ones(\1)[:, None, None] * \2[None]"),),)),
)
