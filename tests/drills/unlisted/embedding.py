"""Unlisted mistakes for embedding."""

MISTAKES = [
    dict(label="repeated ids written once: dW[ids] += dout instead of a scatter-add",
         keywords=["repeat", "add.at", "scatter", "accumulat"],
         patch=[("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))", "dW[ids.reshape(-1)] += dout.reshape(-1, D)")]),
    dict(label="dW averaged over occurrences instead of summed",
         keywords=["mean", "average", "count", "sum"],
         patch=[("    return dW\n", "    return dW / np.maximum(np.bincount(ids.reshape(-1), minlength=V), 1)[:, None]\n")]),
    dict(label="dW divided by the number of positions B*S",
         keywords=["1/n", "factor", "mean", "b*s"],
         patch=[("    return dW\n", "    return dW / ids.size\n")]),
    dict(label="dW sign flipped",
         keywords=["sign", "negat", "flip"],
         patch=[("    return dW\n", "    return -dW\n")]),
    dict(label="scatter uses the position index instead of the token id (dW row = position)",
         keywords=["ids", "position", "index"],
         patch=[("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))",
                 "np.add.at(dW, np.arange(ids.size) % V, dout.reshape(-1, D))")]),
]

CORRECT = '''
import numpy as np


def embedding_forward(ids, W):
    out = np.take(W, ids, axis=0)
    return out, {"ids": ids, "vocab": W.shape[0]}


def embedding_backward(dout, cache):
    flat_ids = cache["ids"].ravel()
    rows = dout.reshape(flat_ids.size, -1)
    onehot = (flat_ids[None, :] == np.arange(cache["vocab"])[:, None]).astype(dout.dtype)
    return onehot @ rows
'''
