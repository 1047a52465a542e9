"""Softmax's classic mistakes, in every exercise with a softmax (softmax itself, every attention).

Written from the maths, forward and backward, as a textbook lists them. With ``y = softmax(x)``
along the last axis:

* forward ``y = e / rowsum(e)``, ``e = exp(x - rowmax(x))``: the normalising sum over another axis;
  the whole softmax (max and sum) over another axis;
* backward ``dx = y * (dy - rowsum(dy * y))`` (the Jacobian ``diag(y) - y y^T`` applied to ``dy``): the
  row-sum term dropped; that row sum taken over another axis; the row sum of ``dy`` alone (its weights
  ``y`` forgotten); the Jacobian's diagonal ``y (1 - y)`` alone; the outer factor ``y`` dropped
  (``dy - rowsum(dy * y)``); log-softmax's backward ``dy - y rowsum(dy)`` used for the softmax's;
  the softmax's backward skipped (``dA = dP``);
* the cache: the unnormalised exponentials ``e`` kept where the backward needs ``y = e / rowsum(e)``;
* recomputed from a saved log-sum-exp (the flash backward): ``P = exp(s - lse)`` with the sign of ``lse``
  flipped.

A sign flip of the whole backward, a constant factor and a transpose are read off the numbers
(``engine/readings.py``), not listed here.
"""

from . import Family

#: the backward's Jacobian-vector product, as solutions write it: ``y * (dy - np.sum(dy * y, -1, ...))``
ROWSUM = r"(\w+) \* \((\w+) - np\.sum\(\2 \* \1, (?:axis=)?-1, keepdims=True\)\)"
#: the same row sum on its own (softmax's, attention's ``rowsum(dP * P)``, the flash ``rowsum(dout * out)``)
ROWSUM_ONLY = r"np\.sum\((\w+) \* (\w+), (axis=)?-1, keepdims=True\)"
#: the row sum of the Jacobian-vector product itself (not the flash backward's delta = rowsum(dout * out),
#: whose (B, H, S, 1) shape the tiles' broadcast needs: another axis there is a shape error, not a value)
JVP_ROWSUM = r"np\.sum\((?!dout \* out)(\w+) \* (\w+), (axis=)?-1, keepdims=True\)"
#: the flash backward's form, the row sum computed before the tiles: ``P * (dP - delta[..., r0:r1, :])``
FLASH_DA = r"P \* \(dP - delta\[\.\.\., r0:r1, :\]\)"
#: the forward's normalising sum of the exponentials ``e``
NORM_SUM = r"\be\.sum\((axis=)?-1, keepdims=True\)"
#: the forward's row max (the stabilising shift)
ROW_MAX = r"\b(x|scores)\.max\((axis=)?-1, keepdims=True\)"

FAMILIES = (
    Family("softmax_backward_no_rowsum", "softmax backward missing the row-sum term",
           "dx = y * dy treats softmax as elementwise. Its Jacobian is diag(y) - y y^T, so every input also "
           "receives -y_k * sum_i(dy_i y_i) (in attention: dA = P * (dP - rowsum(dP * P)); in the flash "
           "backward that row sum is delta = rowsum(dout * out)).",
           "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
           (((ROWSUM, r"\1 * \2"),),
            ((FLASH_DA, "P * dP"),))),
    Family("softmax_backward_rowsum_wrong_axis",
           "softmax backward: the row sum sum_i(dy_i y_i) taken over the wrong axis",
           "Each row of the softmax is normalised on its own (the last axis), so its Jacobian couples the "
           "entries of one row only: the row sum sum_i dy_i y_i runs over the last axis, the one the "
           "forward normalised (in attention the keys, not the queries).",
           "np.sum(dy * y, axis=-1, keepdims=True).",
           (((JVP_ROWSUM, r"np.sum(\1 * \2, \g<3>-2, keepdims=True)"),),
            ((JVP_ROWSUM, r"np.sum(\1 * \2, \g<3>0, keepdims=True)"),))),
    Family("softmax_backward_rowsum_unweighted",
           "softmax backward: the row sum of dy alone (sum dy instead of sum dy * y)",
           "The Jacobian-vector product is dx_k = y_k (dy_k - sum_i dy_i y_i): the row sum is of dy weighted "
           "by the probabilities y (-y_k y_i is the off-diagonal entry), not of dy alone.",
           "np.sum(dy * y, axis=-1, keepdims=True).",
           (((ROWSUM_ONLY, r"np.sum(\1, \3-1, keepdims=True)"),),)),
    Family("softmax_backward_diagonal", "softmax backward uses only the Jacobian diagonal y(1-y)",
           "dy_i/dx_i = y_i(1 - y_i) is only the diagonal of the Jacobian; dy_i/dx_k = -y_i y_k for k != i "
           "is dropped (in attention: dA = P * (1 - P) * dP instead of P * (dP - rowsum(dP * P))).",
           "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
           (((ROWSUM, r"\1 * (1 - \1) * \2"),),
            ((FLASH_DA, "P * (1 - P) * dP"),))),
    Family("softmax_backward_skipped", "the softmax's backward skipped: dP used as the scores' gradient dA",
           "The scores reach the loss through P = softmax(A): dA = P * (dP - rowsum(dP * P)). Using dP "
           "itself as dA (in dq, dk or both) differentiates as if there were no softmax.",
           "dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)); dq = c dA k, dk = c dA^T q.",
           (((r"\b(dA = )P \* \(dP - np\.sum\(dP \* P, (?:axis=)?-1, keepdims=True\)\)", r"\1dP"),),
            ((r"\b(dA = )P \* \(dP - delta\[\.\.\., r0:r1, :\]\)", r"\1dP"),),
            ((r"(dk = .*np\.swapaxes\()dA\b", r"\1dP"),),
            ((r"(dq = .*\()dA( @)", r"\1dP\2"),))),
    Family("softmax_sum_wrong_axis", "softmax forward normalises over the wrong axis (the sum of exp)",
           "y = e / sum(e) must divide each row by its own sum over the last axis (in attention: over the "
           "keys, so each query's weights sum to 1); a sum over another axis leaves rows that do not sum "
           "to 1.",
           "y = e / e.sum(axis=-1, keepdims=True).",
           (((NORM_SUM, r"e.sum(\g<1>-2, keepdims=True)"),),
            ((NORM_SUM, r"e.sum(\g<1>0, keepdims=True)"),))),
    Family("softmax_wrong_axis", "softmax over the wrong axis (the query axis instead of the key axis)",
           "Each row (the last axis; in attention each query's weights over the keys) must sum to 1; the "
           "normalisation ran along another axis, in the forward and in the backward's row sum alike.",
           "Use axis=-1 with keepdims=True in both the max and the sum (and in the backward's row sum).",
           (((ROW_MAX, r"\1.max(\g<2>-2, keepdims=True)"), (NORM_SUM, r"e.sum(\g<1>-2, keepdims=True)")),
            ((ROW_MAX, r"\1.max(\g<2>-2, keepdims=True)"), (NORM_SUM, r"e.sum(\g<1>-2, keepdims=True)"),
             (JVP_ROWSUM, r"np.sum(\1 * \2, \g<3>-2, keepdims=True)")))),
    Family("softmax_lse_sign_flipped", "probabilities recomputed as exp(s + lse): the log-sum-exp's sign flipped",
           "With lse = log(sum_j exp(s_j)) saved by the forward, the softmax is P = exp(s - lse) = "
           "exp(s) / sum_j exp(s_j); adding lse multiplies by the sum instead of dividing.",
           "P = np.exp(s - lse[..., None]).",
           (((r"np\.exp\((\w+) - (lse\b[^)]*)\)", r"np.exp(\1 + \2)"),),)),
    Family("softmax_backward_no_outer_factor",
           "softmax backward: the outer factor y dropped (dy - rowsum(dy * y) instead of y * (dy - rowsum(dy * y)))",
           "The Jacobian-vector product is dx_k = y_k (dy_k - sum_i dy_i y_i): every entry of the bracket is "
           "multiplied by its own probability y_k (the Jacobian diag(y) - y y^T has y_k in every entry of "
           "column k). Without it the gradient of a tiny probability is as large as that of a big one.",
           "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
           (((ROWSUM, r"(\2 - np.sum(\2 * \1, axis=-1, keepdims=True))"),),
            ((FLASH_DA, "(dP - delta[..., r0:r1, :])"),))),
    Family("softmax_backward_log_softmax", "log-softmax's backward used for the softmax: dx = dy - y * rowsum(dy)",
           "log_softmax(x)_i = x_i - log sum_j exp(x_j) has the Jacobian I - 1 y^T, so its backward is "
           "dy - y * rowsum(dy). The softmax itself has the Jacobian diag(y) - y y^T: "
           "dx = y * (dy - rowsum(dy * y)).",
           "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
           (((ROWSUM, r"(\2 - \1 * np.sum(\2, axis=-1, keepdims=True))"),),)),
    Family("softmax_cache_unnormalised", "the cache keeps the unnormalised exponentials e = exp(x - max) instead of "
           "the probabilities y = e / rowsum(e)",
           "The backward dx = y * (dy - rowsum(dy * y)) needs the probabilities themselves; the exponentials "
           "before the division by their row sum are y times that sum (a different number in every row).",
           "return y, y: cache y = e / e.sum(axis=-1, keepdims=True).",
           (((r"return y, y\b", "return y, e"),),)),
)
