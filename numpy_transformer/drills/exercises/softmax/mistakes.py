"""The classic mistakes of the softmax drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("softmax_wrong_axis", "softmax over the wrong axis",
            "Each row (the last axis) must sum to 1; the normalisation ran along another axis.",
            "Use axis=-1 with keepdims=True in both the max and the sum (and in the backward's sum).",
        [
            ('x.max(axis=-1, keepdims=True)',
             'x.max(axis=0, keepdims=True)'),
            ('e.sum(axis=-1, keepdims=True)',
             'e.sum(axis=0, keepdims=True)'),
            ('np.sum(dy * y, axis=-1, keepdims=True)',
             'np.sum(dy * y, axis=0, keepdims=True)'),
        ],
        also=([
                  ('x.max(axis=-1, keepdims=True)',
                   'x.max(axis=-2, keepdims=True)'),
                  ('e.sum(axis=-1, keepdims=True)',
                   'e.sum(axis=-2, keepdims=True)'),
                  ('np.sum(dy * y, axis=-1, keepdims=True)',
                   'np.sum(dy * y, axis=-2, keepdims=True)'),
              ],)),
    Mistake("softmax_unstable", "no max subtraction: exp overflows",
            "exp(1000) is inf in float64, and inf/inf is NaN. Softmax is unchanged by subtracting a "
            "constant from a row, so the max is subtracted first.",
            "e = np.exp(x - x.max(axis=-1, keepdims=True)).",
        [
            ('z = x - x.max(axis=-1, keepdims=True)',
             'z = x'),
        ]),
    Mistake("softmax_backward_no_rowsum", "softmax backward missing the row-sum term",
            "dx = y * dy treats softmax as elementwise. Its Jacobian is diag(y) - y y^T, so every "
            "input also receives -y_k * sum_i(dy_i y_i).",
            "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
        [
            ('return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))',
             'return y * dy'),
        ]),
    Mistake("softmax_backward_diagonal", "softmax backward uses only the Jacobian diagonal y(1-y)",
            "dy_i/dx_i = y_i(1 - y_i) is only the diagonal; dy_i/dx_k = -y_i y_k for k != i is dropped.",
            "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
        [
            ('return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))',
             'return y * (1 - y) * dy'),
        ]),
)
