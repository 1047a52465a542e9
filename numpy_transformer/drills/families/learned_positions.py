"""A learned position table's classic mistakes (GPT-2's ``wpe``), from its maths: y = x + W[o:o+S]
(o the offset of a decode step), so

    dx = dy,    dW[o + s] = sum over the batch b of dy[b, s]  (s = 0..S-1),  every other row 0

a sum over the batch only (each position s has its own row), into the rows the forward read.
"""

from . import Family

#: the backward's scatter of the batch sum into the rows the forward read
_ROWS = r"dW\[offset:offset \+ (\w+)\] = dy\.sum\(axis=0\)"

FAMILIES = (
    Family("lpe_grad_summed_over_positions", "dW summed over the positions too: one row (the sum over batch "
           "and positions) repeated at every used row",
           "Each position s read its own row W[o + s]; only the batch rows share it. dW[o + s] is the sum "
           "over the batch of dy[:, s], a different row per position.",
           "dW[offset:offset + S] = dy.sum(axis=0).",
           (((_ROWS, r"dW[offset:offset + \1] = dy.sum(axis=(0, 1))"),),)),
    Family("lpe_grad_one_position_only", "dW from one position's rows only (dy[:, -1] or dy[:, 0]) broadcast "
           "to every position",
           "Every position s contributes its own gradient dy[:, s] to its row: the sum runs over the batch "
           "for EVERY position, not for the last (or first) one.",
           "dW[offset:offset + S] = dy.sum(axis=0).",
           (((_ROWS, r"dW[offset:offset + \1] = dy[:, -1].sum(axis=0)"),),
            ((_ROWS, r"dW[offset:offset + \1] = dy[:, 0].sum(axis=0)"),))),
    Family("lpe_grad_rows_ignore_offset", "the backward's rows ignore the offset: dW[0:S] filled instead of "
           "dW[offset:offset + S]",
           "The forward read rows o..o+S-1 of the table; their gradients go back to those same rows "
           "(rows 0..S-1 were not used on a decode step).",
           "dW[offset:offset + S] = dy.sum(axis=0).",
           (((r"dW\[offset:offset \+ (\w+)\] =", r"dW[:\1] ="),),)),
    Family("lpe_dx_not_passed", "dx = 0: the addition's identity path to x forgotten",
           "y = x + W[...]: the addition passes dy to x unchanged, dx = dy (the table's gradient is the "
           "other output).",
           "return dy.copy(), dW.",
           (((r"return dy\.copy\(\), dW", "return np.zeros_like(dy), dW"),),)),
)
