"""The sinusoidal position table's classic mistakes (Vaswani et al., 2017): pe[pos, 2i] =
sin(pos / 10000^(2i/D)), pe[pos, 2i+1] = cos(pos / 10000^(2i/D)); solutions write the frequencies
10000^(-2i/D) as exp(-log(10000) 2i/D) or as a power."""

from . import Family

#: the frequencies 10000^(-2i/D), i the pair index (np.arange(0, D, 2) is 2i), as exp(-log(base) ...)
_EXP = r"np\.exp\(-np\.log\((\w+\.?\w*)\) \* np\.arange\(0, (\w+), 2\) / \2\)"
#: ... and as a power
_POW = r"(\w+\.?\w*) \*\* \(-np\.arange\(0, (\w+), 2\) / \2\)"


def _base(new):
    """The frequencies written with the base ``new`` in place of 10000."""
    return ((((r"np\.exp\(-np\.log\(10000\.0\)", f"np.exp(-np.log({new})"),),
             ((r"10000\.0 \*\* \(-np\.arange", f"{new} ** (-np.arange"),)))


FAMILIES = (
    Family("pe_exponent_sign_flipped", "positions multiplied by 10000^(2i/D) instead of divided (the "
           "exponent's sign flipped)",
           "The angle is pos / 10000^(2i/D) = pos * 10000^(-2i/D): the frequencies fall from 1 (the first "
           "pair) to 1/10000 (the last). With +2i/D they grow to 10000 and the last columns alias.",
           "freq = np.exp(-np.log(10000.0) * np.arange(0, D, 2) / D); angle = pos * freq.",
           (((_EXP, r"np.exp(np.log(\1) * np.arange(0, \2, 2) / \2)"),),
            ((_POW, r"\1 ** (np.arange(0, \2, 2) / \2)"),))),
    Family("pe_base_1000", "base 1000 instead of 10000 (a zero dropped)",
           "The wavelengths run geometrically from 2 pi to 10000 * 2 pi: the base is 10000.",
           "freq = 10000.0 ** (-np.arange(0, D, 2) / D).", _base("1000.0")),
    Family("pe_base_100000", "base 100000 instead of 10000 (a zero too many)",
           "The wavelengths run geometrically from 2 pi to 10000 * 2 pi: the base is 10000.",
           "freq = 10000.0 ** (-np.arange(0, D, 2) / D).", _base("100000.0")),
    Family("pe_log10", "log10(10000) (= 4) in exp(-log(10000) 2i/D) instead of the natural log",
           "10000^(-2i/D) = exp(-ln(10000) 2i/D): the exponential undoes the natural logarithm only.",
           "freq = np.exp(-np.log(10000.0) * np.arange(0, D, 2) / D).",
           (((r"np\.exp\(-np\.log\(", "np.exp(-np.log10("),),)),
    Family("pe_exponent_4i", "exponent 4i/D: the pair index doubled twice (2 * arange(0, D, 2))",
           "np.arange(0, D, 2) already is 2i (i the pair index): the exponent is that over D.",
           "freq = 10000.0 ** (-np.arange(0, D, 2) / D).",
           (((_EXP, r"np.exp(-np.log(\1) * 2 * np.arange(0, \2, 2) / \2)"),),
            ((_POW, r"\1 ** (-2 * np.arange(0, \2, 2) / \2)"),))),
    Family("pe_sin_everywhere", "sin on every column (the odd columns' cos forgotten)",
           "Even columns hold sin(angle), odd columns cos(angle): the pair (sin, cos) of one frequency is "
           "what lets a fixed offset act as a rotation.",
           "pe[:, 0::2] = np.sin(angle); pe[:, 1::2] = np.cos(angle).",
           (((r"pe\[:, 1::2\] = np\.cos\(", "pe[:, 1::2] = np.sin("),),)),
    Family("pe_cos_everywhere", "cos on every column (the even columns' sin forgotten)",
           "Even columns hold sin(angle), odd columns cos(angle).",
           "pe[:, 0::2] = np.sin(angle); pe[:, 1::2] = np.cos(angle).",
           (((r"pe\[:, 0::2\] = np\.sin\(", "pe[:, 0::2] = np.cos("),),)),
    Family("pe_angle_in_degrees", "angles in degrees (np.deg2rad) instead of radians",
           "sin and cos take radians: the angle is pos * 10000^(-2i/D) itself.",
           "angle = pos * freq.",
           (((r"angle = pos \* freq\b", "angle = np.deg2rad(pos * freq)"),),)),
    Family("pe_frequency_odd_index", "the frequency exponent from the odd indices 2i + 1 instead of 2i "
           "(np.arange(1, D, 2))",
           "Both columns 2i and 2i + 1 of a pair share the frequency 10000^(-2i/D): the exponent is the "
           "pair's EVEN index 2i over D (np.arange(0, D, 2) / D), the same for its sine and its cosine.",
           "freq = 10000.0 ** (-np.arange(0, D, 2) / D).",
           (((_EXP, r"np.exp(-np.log(\1) * np.arange(1, \2, 2) / \2)"),),
            ((_POW, r"\1 ** (-np.arange(1, \2, 2) / \2)"),))),
    Family("pe_positions_normalised", "positions normalised to [0, 1) (divided by the length S) instead of "
           "the integer positions 0..S-1",
           "The angle is pos * 10000^(-2i/D) with pos the integer position itself: a position's row must "
           "not depend on how long the sequence is.",
           "pos = np.arange(S, dtype=np.float64)[:, None].",
           (((r"(pos = np\.arange\((\w+)(?:, dtype=[\w.]+)?\)\[:, None\])", r"\1 / \2"),),)),
    Family("pe_positions_from_one", "positions counted from 1 instead of 0 (the first row is not sin 0, cos 0)",
           "Position 0 is the first token: pe[0] = (sin 0, cos 0, ...) = (0, 1, 0, 1, ...).",
           "pos = np.arange(S, dtype=np.float64)[:, None].",
           (((r"pos = np\.arange\((\w+)((?:, dtype=[\w.]+)?)\)\[:, None\]",
               r"pos = np.arange(1, \1 + 1\2)[:, None]"),),)),
    Family("pe_table_float32", "the table computed in float32 instead of float64 (precision lost)",
           "np.zeros((S, D)) is float64; asking for float32 rounds every entry to about 7 digits (torch's "
           "buffers are float32, but this drill compares in float64).",
           "pe = np.zeros((S, D)) (float64).",
           (((r"pe = np\.zeros\(\((\w+), (\w+)\)\)", r"pe = np.zeros((\1, \2), dtype=np.float32)"),),)),
)
