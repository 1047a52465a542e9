"""Drill: a whole Transformer decoder layer (as torch.nn.TransformerDecoderLayer, post-LN, ReLU, no
dropout, attention without biases), forward and backward.

Shape letters: B batch, S target length, T memory length, D model width, H heads, Dh = D / H,
F feed-forward width.

    h1 = LN1(tgt + SA(tgt))              SA: multi-head self-attention, mask tgt_mask
    h2 = LN2(h1 + CA(h1, memory))        CA: queries from h1, keys and values from memory
    y  = LN3(h2 + FF(h2))                FF(z) = relu(z W1^T + b1) W2^T + b2

Conventions (the grader checks them):
* params: self-attention Wq, Wk, Wv, Wo; cross-attention cWq, cWk, cWv, cWo (all (D, D), torch's
  layout y = x @ W.T, no biases); W1 (F, D), b1 (F,), W2 (D, F), b2 (D,); gamma1..3, beta1..3 (D,)
  for LN1..3 (eps 1e-5, biased variance). Each attention scales by 1/sqrt(Dh).
* tgt_mask: None or bool (S, S), True = may NOT attend (usually the causal mask);
  memory_key_padding_mask: None or bool (B, T), True = padding (every memory keeps a position).
  Cross-attention has no causal mask.
* forward returns (out, cache); backward returns (dtgt, dmemory, grads) with grads a dict with
  every key of params.
* float64; do not modify the inputs in place.

Hints:
* Write the pieces (LayerNorm, attention with separate query and key/value inputs, the
  feed-forward) with their backwards first, then chain them.
* Which inputs does each sub-layer read, and how many times?
"""

import numpy as np


def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None,
                          memory_key_padding_mask=None):
    """A post-LN decoder layer.

    Parameters
    ----------
    tgt : ndarray, shape (B, S, D)
    memory : ndarray, shape (B, T, D), the encoder's output
    params : dict of ndarray (keys above)
    num_heads : int, divides D
    tgt_mask : ndarray of bool, shape (S, S), optional
    memory_key_padding_mask : ndarray of bool, shape (B, T), optional

    Returns
    -------
    out : ndarray, shape (B, S, D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def decoder_layer_backward(dout, cache):
    """Gradients of the inputs and of every parameter.

    Parameters
    ----------
    dout : ndarray, shape (B, S, D)
    cache : what decoder_layer_forward returned

    Returns
    -------
    dtgt : ndarray, shape (B, S, D)
    dmemory : ndarray, shape (B, T, D)
    grads : dict, the same keys and shapes as params
    """
    raise NotImplementedError
