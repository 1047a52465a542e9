"""The activations' classic mistakes: the sigmoid and SiLU, GELU (exact and tanh), in every exercise that
applies one (silu, gelu, and the gated feed-forwards swiglu and geglu, whose own mistakes are
``glu.py``'s).

Written from the maths, forward and backward:

* sigmoid ``s = 1 / (1 + exp(-x))``, stable form ``np.where(x >= 0, 1, e) / (1 + e)``, ``e = exp(-|x|)``:
  the branches swapped; its derivative ``s (1 - s)`` written ``s * s``, ``1 - s``, ``s (1 + s)`` or
  ``1 - s^2`` (tanh's);
* SiLU ``y = x s``: the forward without its ``x`` factor; the product rule ``y' = s + x s (1 - s)`` with
  its ``s`` term dropped, with its two factors exchanged (``x + s s'``), with its two terms multiplied
  (``s * x s'``), or forgotten altogether (``s'`` alone, the sigmoid's derivative for SiLU's);
* GELU ``y = x Phi(x)``, ``Phi(x) = (1 + erf(x / sqrt 2)) / 2``, ``phi(x) = exp(-x^2/2) / sqrt(2 pi)``:
  ``erf(x)`` for ``erf(x / sqrt 2)``; ``Phi`` without its ``(1 + .) / 2``; ``phi`` without its
  ``1/sqrt(2 pi)`` or with ``exp(-x^2)``; ``Phi`` without its ``1/2``; the product rule ``Phi + x phi``
  with its factors exchanged, its ``Phi`` term dropped, its terms multiplied, or ``phi`` alone;
* tanh GELU ``y = x/2 (1 + tanh(u))``, ``u = sqrt(2/pi) (x + 0.044715 x^3)``: ``tanh' = 1 - t^2``
  written ``1 - t``; the power rule's ``3`` of ``d(x^3)/dx`` forgotten; the constant ``sqrt(2/pi)``
  inverted or without its root; the cubic ``x^3`` with another power; the ``1/2`` of ``x/2`` dropped;
  the ``approximate`` option not honoured (the exact GELU where the tanh one was asked).

A forgotten ``dy``, a sign flip, a constant factor or the ``x * phi`` term with the wrong sign are read
off the numbers (``engine/readings.py``).
"""

from . import Family

#: the sigmoid's derivative s * (1 - s), as the solutions write it
SIG_SLOPE = r"\b(\w+) \* \(1\.0 - \1\)"
#: SiLU's slope from the product rule, s + x * s * (1 - s)
SILU_SLOPE = r"\b(\w+) \+ (\w+) \* \1 \* \(1\.0 - \1\)"
#: GELU's slope from the product rule, Phi(x) + x * phi(x)
GELU_SLOPE = r"\b(cdf) \+ (\w+) \* (pdf)\b"
#: the normal density's constant
PDF = r"np\.exp\(-0\.5 \* (\w+) \* \1\) / math\.sqrt\(2\.0 \* math\.pi\)"
#: the normal CDF through erf, as the solutions write it
ERF = r"_erf\((\w+) / math\.sqrt\(2\.0\)\)"

FAMILIES = (
    Family("sigmoid_stable_branch_swapped", "stable sigmoid with its two branches swapped",
           "With e = exp(-|x|): sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0. Swapped, "
           "the result is sigmoid(-x) = 1 - sigmoid(x).",
           "np.where(x >= 0, 1.0, e) / (1.0 + e) with e = np.exp(-np.abs(x)).",
           (((r"np\.where\((\w+) >= 0, 1\.0, (\w+)\) / \(1\.0 \+ \2\)",
               r"np.where(\1 >= 0, \2, 1.0) / (1.0 + \2)"),),)),
    Family("sigmoid_derivative_wrong", "the sigmoid's derivative written wrongly (it is s * (1 - s))",
           "s = 1 / (1 + exp(-x)) has s' = exp(-x) / (1 + exp(-x))^2 = s * (1 - s). Not s * s, not 1 - s, "
           "and not 1 - s^2 (that is tanh's derivative, 1 - tanh^2).",
           "s' = s * (1.0 - s).",
           (((SIG_SLOPE, r"\1 * \1"),),
            ((SIG_SLOPE, r"(1.0 - \1)"),),
            ((SIG_SLOPE, r"\1 * (1.0 + \1)"),),
            ((SIG_SLOPE, r"(1.0 - \1 * \1)"),))),
    Family("silu_forward_no_x", "SiLU forward returns sigmoid(x): the x factor of x * sigmoid(x) dropped",
           "SiLU (Swish) is y = x * sigmoid(x); sigmoid(x) alone is the gate without the value it gates.",
           "y = x * s with s = sigmoid(x).",
           (((r"return x \* s, \(x, s\)", "return s, (x, s)"),),
            ((r"\b(a = )g \* s\b", r"\1s"),))),
    Family("silu_backward_no_s_term", "SiLU backward: the s term of the product rule dropped (only x * s * (1 - s))",
           "y = x * s is a product: y' = 1 * s + x * s' = s + x * s * (1 - s). Without the first term only "
           "the sigmoid's change is differentiated, not the x in front.",
           "y' = s + x * s * (1 - s).",
           (((SILU_SLOPE, r"\2 * \1 * (1.0 - \1)"),),)),
    Family("act_product_rule_swapped", "product rule with its factors swapped (x + s * s' instead of s + x * s')",
           "y = x * f(x) gives y' = f(x) + x * f'(x): the first term is f itself (the derivative of x is 1), "
           "the second x times f's derivative. Exchanging x and f gives x + f * f'. (SiLU: f = sigmoid, "
           "f' = s(1 - s); GELU: f = Phi, f' = phi.)",
           "SiLU: s + x * s * (1 - s); GELU: Phi(x) + x * phi(x).",
           (((SILU_SLOPE, r"\2 + \1 * \1 * (1.0 - \1)"),),
            ((GELU_SLOPE, r"\2 + \1 * \3"),))),
    Family("gelu_erf_no_sqrt2", "GELU's CDF with erf(x) instead of erf(x / sqrt(2))",
           "The standard normal CDF is Phi(x) = (1 + erf(x / sqrt(2))) / 2: erf is the CDF of a normal of "
           "variance 1/2, so its argument is scaled by 1/sqrt(2).",
           "Phi = 0.5 * (1.0 + erf(x / math.sqrt(2.0))).",
           (((ERF, r"_erf(\1)"),),
            ((r"(?s)(def \w+_forward\(.*?)" + ERF + r"(?=.*_erf\()", r"\1_erf(\2)"),))),   # the forward only
    Family("gelu_cdf_not_shifted", "GELU's CDF taken as erf(x / sqrt(2)) itself, without (1 + .) / 2",
           "erf runs from -1 to 1; the normal CDF runs from 0 to 1: Phi(x) = (1 + erf(x / sqrt(2))) / 2.",
           "Phi = 0.5 * (1.0 + erf(x / math.sqrt(2.0))).",
           (((r"0\.5 \* \(1\.0 \+ (_erf\(\w+ / math\.sqrt\(2\.0\)\))\)", r"\1"),),)),
    Family("gelu_pdf_unnormalised", "GELU backward: the normal pdf phi missing its 1/sqrt(2 pi) normalisation",
           "The standard normal density is phi(x) = exp(-x^2 / 2) / sqrt(2 pi); without 1/sqrt(2 pi) the "
           "x * phi(x) term of GELU's slope is sqrt(2 pi) = 2.507 times too large.",
           "pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi).",
           (((PDF, r"np.exp(-0.5 * \1 * \1)"),),)),
    Family("gelu_pdf_exponent", "GELU backward: the normal pdf with exp(-x^2) instead of exp(-x^2 / 2)",
           "The standard normal density is phi(x) = exp(-x^2 / 2) / sqrt(2 pi) (variance 1).",
           "pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi).",
           (((PDF, r"np.exp(-\1 * \1) / math.sqrt(2.0 * math.pi)"),),)),
    Family("gelu_tanh_derivative_wrong", "tanh-GELU backward: tanh's derivative taken as 1 - t instead of 1 - t^2",
           "d tanh(u)/du = 1 - tanh(u)^2 = 1 - t^2 (sech^2), not 1 - t.",
           "slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du/dx.",
           (((r"\(1\.0 - (\w+) \* \1\)", r"(1.0 - \1)"),),)),
    Family("gelu_tanh_power_rule", "tanh-GELU backward: du/dx without the 3 of d(x^3)/dx = 3 x^2",
           "u = c (x + 0.044715 x^3) has du/dx = c (1 + 3 * 0.044715 x^2): the power rule brings the 3 down.",
           "du/dx = sqrt(2/pi) * (1 + 3 * 0.044715 * x * x).",
           (((r"\b3 \* 0\.044715", "0.044715"),),)),
    Family("gelu_tanh_constant_inverted", "tanh-GELU with sqrt(pi/2) instead of sqrt(2/pi)",
           "The tanh approximation is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): sqrt(2/pi) = 0.798, "
           "the slope of Phi's tanh fit at 0, not its inverse.",
           "u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3).",
           (((r"math\.sqrt\(2\.0 / math\.pi\)", "math.sqrt(math.pi / 2.0)"),),)),
    Family("act_product_rule_terms_multiplied", "the product rule's two terms multiplied instead of added "
           "(f * x f' in place of f + x f')",
           "y = x * f(x) gives y' = f(x) + x * f'(x): a SUM of two terms, one for each factor of the product "
           "(SiLU: s + x s (1 - s); GELU: Phi(x) + x phi(x)). Their product is no derivative of anything here.",
           "SiLU: s + x * s * (1 - s); GELU: Phi(x) + x * phi(x).",
           (((SILU_SLOPE, r"\1 * \2 * \1 * (1.0 - \1)"),),
            ((GELU_SLOPE, r"\1 * \2 * \3"),))),
    Family("act_derivative_of_factor_only", "the derivative of x * f(x) taken as f'(x) alone: SiLU's as the "
           "sigmoid's s (1 - s), GELU's as the density phi (the product rule forgotten)",
           "SiLU is x * sigmoid(x) and GELU x * Phi(x): each is a product with x, so y' = f + x f' "
           "(s + x s (1 - s); Phi + x phi). f' alone is the derivative of the gate f, not of y.",
           "SiLU: s + x * s * (1 - s); GELU: Phi(x) + x * phi(x).",
           (((SILU_SLOPE, r"\1 * (1.0 - \1)"),),
            ((GELU_SLOPE, r"\3"),))),
    Family("gelu_backward_no_cdf_term", "GELU backward: the Phi(x) term of the product rule dropped (only x * phi(x))",
           "y = x * Phi(x) is a product: y' = 1 * Phi(x) + x * phi(x). Without the first term only the CDF's "
           "change is differentiated, not the x in front.",
           "y' = Phi(x) + x * phi(x).",
           (((GELU_SLOPE, r"\2 * \3"),),)),
    Family("gelu_cdf_half_dropped", "GELU's normal CDF without its 1/2: (1 + erf(x / sqrt 2)) instead of "
           "(1 + erf(x / sqrt 2)) / 2",
           "Phi(x) = (1 + erf(x / sqrt(2))) / 2 runs from 0 to 1; without the 1/2 it runs from 0 to 2 and "
           "GELU's value (or slope) is off by the extra Phi.",
           "Phi = 0.5 * (1.0 + erf(x / math.sqrt(2.0))).",
           (((r"(?s)(def \w+_backward\(.*?)0\.5 \* (\(1\.0 \+ _erf\(\w+ / math\.sqrt\(2\.0\)\)\))", r"\1\2"),),
            ((r"(?s)(def \w+_forward\(.*?)0\.5 \* (\(1\.0 \+ _erf\(\w+ / math\.sqrt\(2\.0\)\)\))", r"\1\2"),),
            ((r"0\.5 \* (\(1\.0 \+ _erf\(\w+ / math\.sqrt\(2\.0\)\)\))", r"\1"),))),
    Family("gelu_tanh_constant_no_root", "tanh-GELU with the constant 2/pi instead of its square root sqrt(2/pi)",
           "The tanh approximation is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the constant is the "
           "square root of 2/pi (0.798), the slope of Phi's tanh fit at 0; 2/pi itself is 0.637.",
           "u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3).",
           (((r"math\.sqrt\(2\.0 / math\.pi\)", "(2.0 / math.pi)"),),
            ((r"(?s)(def \w+_forward\(.*?)math\.sqrt\(2\.0 / math\.pi\)", r"\1(2.0 / math.pi)"),),
            ((r"(?s)(def \w+_backward\(.*?)math\.sqrt\(2\.0 / math\.pi\)", r"\1(2.0 / math.pi)"),))),
    Family("gelu_tanh_cubic_power", "tanh-GELU: the cubic term 0.044715 x^3 written with another power (x^2)",
           "The tanh fit is u = sqrt(2/pi) (x + 0.044715 x^3): the correction is cubic, odd like x itself "
           "(GELU(x) - GELU(-x) = x), and its derivative 3 * 0.044715 x^2.",
           "u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3).",
           (((r"0\.044715 \* (\w+) \*\* 3\b", r"0.044715 * \1 ** 2"),),
            ((r"(?s)(def \w+_forward\(.*?)0\.044715 \* (\w+) \*\* 3\b", r"\g<1>0.044715 * \2 ** 2"),))),
    Family("gelu_tanh_half_dropped", "tanh-GELU: the factor 1/2 of x/2 (1 + tanh(u)) dropped (in the forward or a "
           "term of the slope)",
           "y = x/2 (1 + tanh(u)): the 1/2 multiplies everything, so both terms of the slope keep it: "
           "y' = (1 + t)/2 + x/2 (1 - t^2) du/dx.",
           "slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du/dx.",
           (((r"\+ 0\.5 \* (\w+) \* \(1\.0 - (\w+) \* \2\)", r"+ \1 * (1.0 - \2 * \2)"),),
            ((r"= 0\.5 \* \(1\.0 \+ (\w+)\) \+", r"= (1.0 + \1) +"),),
            ((r"= 0\.5 \* (\w+) \* \(1\.0 \+ np\.tanh\(", r"= \1 * (1.0 + np.tanh("),))),
    Family("gelu_approximate_ignored", "the approximate option not honoured: the exact GELU used where "
           "approximate='tanh' asks for the tanh approximation",
           "approximate is the string 'none' or 'tanh' (torch's): a test that never holds for 'tanh' (is True, "
           "a misspelt name, only in one of the two passes) silently computes the exact GELU, or a backward "
           "that does not match its forward.",
           'if approximate == "tanh": in the forward and the backward alike.',
           (((r'(?s)(def \w+_backward\(.*?)if approximate == "tanh":', r"\1if approximate is True:"),),
            ((r'(?s)(def \w+_forward\(.*?)if approximate == "tanh":', r"\1if approximate is True:"),),
            ((r'if approximate == "tanh":', "if approximate is True:"),))),
)
