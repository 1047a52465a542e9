"""A linear layer's classic mistakes, from its maths: y = x W^T + b over every leading position n, so

    dx = dy @ W,    dW = sum_n dy_n^T x_n = dy2^T @ x2,    db = sum_n dy_n

(dy2, x2: the leading axes flattened into one of N rows). The parameters are shared by every row, so
their gradients are SUMS over all the leading positions (not means, not the first batch element's);
the bias is part of the forward. (dW transposed and db averaged are the linear exercise's own list.)
"""

from . import Family

DW = r"dW = dy2\.T @ x2"
LEAD = r"(\w+)2 = \1\.reshape\(-1, \1\.shape\[-1\]\)"

FAMILIES = (
    Family("linear_dW_mean", "dW averaged over the rows (divided by N) instead of summed",
           "W is used by every one of the N rows, and each row's gradient adds into it: dW = dy2^T x2 is a "
           "sum over the rows. (A mean over the rows belongs to the loss, whose gradient dy already "
           "carries the 1/N.)",
           "dW = dy2.T @ x2, undivided.",
           (((DW, "dW = dy2.T @ x2 / x2.shape[0]"),),)),
    Family("linear_db_mean", "db averaged over rows instead of summed",
           "b is added to every row, so each row's gradient flows into it: a sum, not a mean.",
           "db = dy.reshape(-1, Dout).sum(axis=0).",
           (((r"db = dy2\.sum\(axis=0\)", "db = dy2.mean(axis=0)"),),)),
    Family("linear_first_batch_only", "dW and db from the first batch element only: the leading axes not "
           "flattened and summed",
           "With x of shape (B, S, Din) every one of the B * S rows uses W and b: flatten all the leading "
           "axes into one, dW = dy2^T x2 and db = dy2.sum(0) over the B * S rows, not the S rows of the "
           "first element.",
           "x2 = x.reshape(-1, x.shape[-1]); dy2 = dy.reshape(-1, dy.shape[-1]).",
           (((LEAD, r"\g<1>2 = \1[(0,) * (\1.ndim - 2)]"),),
            ((DW, "dW = dy[(0,) * (dy.ndim - 2)].T @ x[(0,) * (x.ndim - 2)]"),))),
    Family("linear_bias_forgotten", "the bias left out of the forward (y = x W^T)",
           "y = x W^T + b: every row gets b added.",
           "y = x @ W.T + b.",
           (((r"y = x @ W\.T \+ b", "y = x @ W.T"),),)),
)
