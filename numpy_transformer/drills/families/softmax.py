"""Softmax's classic mistakes, in every exercise with a softmax (softmax itself, every attention)."""

from . import Family

ROWSUM = r"(\w+) \* \((\w+) - np\.sum\(\2 \* \1, (?:axis=)?-1, keepdims=True\)\)"

FAMILIES = (
    Family("softmax_backward_no_rowsum", "softmax backward missing the row-sum term",
           "dx = y * dy treats softmax as elementwise. Its Jacobian is diag(y) - y y^T, so every input also "
           "receives -y_k * sum_i(dy_i y_i) (in attention: dA = P * (dP - rowsum(dP * P)); in the flash "
           "backward that row sum is delta = rowsum(dout * out)).",
           "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
           (((ROWSUM, r"\1 * \2"),),
            ((r"P \* \(dP - delta\[\.\.\., r0:r1, :\]\)", "P * dP"),))),
)
