"""Fresh unlisted mistakes for embedding."""

MISTAKES = [
    dict(label="dW allocated with the ids' integer dtype (the gradient truncated to integers)",
         keywords=["dtype", "int", "float"],
         patch=[("dW = np.zeros((V, D), dtype=dout.dtype)", "dW = np.zeros((V, D), dtype=ids.dtype)")]),
    dict(label="ids flattened in the transposed order, misaligned with dout's rows",
         keywords=["order", "flatten", "align", "transpos"],
         patch=[("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))", "np.add.at(dW, ids.T.reshape(-1), dout.reshape(-1, D))")]),
    dict(label="the forward scales the looked-up rows by sqrt(D)",
         keywords=["scale", "sqrt"],
         patch=[("    return W[ids], (ids, W.shape)", "    return W[ids] * np.sqrt(W.shape[1]), (ids, W.shape)")]),
    dict(label="only the first batch row scattered into dW",
         keywords=["batch", "first", "every position", "sum"],
         patch=[("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))", "np.add.at(dW, ids[0], dout[0])")]),
    dict(label="row 0 treated as padding: its gradient zeroed",
         keywords=["padding", "row 0", "zero"],
         patch=[("    return dW\n", "    dW[0] = 0.0\n    return dW\n")]),
]

CORRECT = '''
import numpy as np


def embedding_forward(ids, W):
    flat = ids.ravel()
    rows = np.take(W, flat, axis=0)
    return rows.reshape(ids.shape + (W.shape[1],)), {"ids": ids, "vocab": W.shape[0]}


def embedding_backward(dout, cache):
    ids, vocab = cache["ids"], cache["vocab"]
    width = dout.shape[-1]
    onehot = (ids.ravel()[:, None] == np.arange(vocab)[None, :]).astype(dout.dtype)
    return onehot.T @ dout.reshape(-1, width)
'''
