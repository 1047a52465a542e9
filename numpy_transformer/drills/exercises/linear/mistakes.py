"""The classic mistakes of the linear drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("linear_untransposed_weight", "W used as (Din, Dout): x @ W instead of x @ W.T",
            "The weight has torch's layout (Dout, Din); x @ W only runs when W is square, and then "
            "computes a different map.",
            "y = x @ W.T + b; dx = dy @ W; dW = dy2.T @ x2.",
        [
            ('y = x @ W.T + b',
             'y = x @ W + b'),
            ('dx = dy @ W ',
             'dx = dy @ W.T '),
            ('dW = dy2.T @ x2',
             'dW = x2.T @ dy2'),
        ]),
    Mistake("linear_dW_transposed", "dW transposed: x^T dy is (Din, Dout), W is (Dout, Din)",
            "A parameter's gradient has the parameter's shape: dW[o, i] = sum_n dy[n, o] x[n, i].",
            "dW = dy2.T @ x2 with dy2, x2 the inputs flattened to 2-D.",
        [
            ('dW = dy2.T @ x2',
             'dW = x2.T @ dy2'),
        ]),
    Mistake("linear_db_mean", "db averaged over rows instead of summed",
            "b is added to every row, so each row's gradient flows into it: a sum, not a mean.",
            "db = dy.reshape(-1, Dout).sum(axis=0).",
        [
            ('db = dy2.sum(axis=0)',
             'db = dy2.mean(axis=0)'),
        ]),
)
