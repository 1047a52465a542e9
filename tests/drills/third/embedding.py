"""Third-set mistakes for embedding."""

MISTAKES = [
    dict(label="dout flattened as (D, -1).T: its rows misaligned with the ids",
         keywords=["reshape", "flatten", "misalign"],
         patch=[("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))", "np.add.at(dW, ids.reshape(-1), dout.reshape(D, -1).T)")]),
    dict(label="ids treated as 1-based (W[ids - 1])",
         keywords=["off by one", "1-based", "off-by-one"],
         patch=[("return W[ids], (ids, W.shape)", "return W[ids - 1], (ids - 1, W.shape)")]),
    dict(label="the backward scales the gradient by sqrt(D)",
         keywords=["sqrt(d)", "scaled", "scale"],
         patch=[("dout.reshape(-1, D))", "dout.reshape(-1, D) * np.sqrt(D))")]),
    dict(label="repeated ids combined with a maximum instead of a sum (np.maximum.at)",
         keywords=["maximum", "accumulat", "sum"],
         patch=[("np.add.at(dW,", "np.maximum.at(dW,")]),
]

CORRECT = '''
import numpy as np


def embedding_forward(ids, W):
    return np.take(W, ids, axis=0), (np.asarray(ids), W.shape[0])


def embedding_backward(dout, cache):
    ids, V = cache
    onehot = (ids.reshape(-1)[:, None] == np.arange(V)[None, :]).astype(dout.dtype)   # (B*S, V)
    return onehot.T @ dout.reshape(-1, dout.shape[-1])
'''
