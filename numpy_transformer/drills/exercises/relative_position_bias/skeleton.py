"""Drill: T5's relative position bias (Raffel et al. 2020), forward and backward.

Shape letters: H heads, S queries, T keys, NB buckets.

A learned table W (NB, H) gives every (query, key) pair one scalar per head, looked up by the
bucket of their relative position, and the (H, S, T) result is added to the attention scores.

Conventions (the grader checks them):
* relative_position = key position - query position (negative: the key is in the past). Query i
  sits at key position i + T - S (the last query at the last key; S = T: query i at position i).
  S <= T always: the S queries are the last S of the T positions (a full sequence, S = T, or the new
  positions of a decode step against a cache), as T5 / Hugging Face slice the last S rows of the
  (T, T) bias. No case has more queries than keys.
* relative_position_bucket follows T5 / Hugging Face. Bidirectional: the first num_buckets // 2
  buckets for keys in the past (and the query's own position), the other half, offset by
  num_buckets // 2, for keys in the future, each half indexed by n = |relative_position|.
  Unidirectional: n = max(-relative_position, 0) (every future key is bucket 0). Within a half
  of nb buckets: exact bucket n for n < max_exact = nb // 2, else
      min(max_exact + int(log(n / max_exact) / log(max_distance / max_exact)
                          * (nb - max_exact)), nb - 1).
  float32 or float64 logarithms both pass (the cases avoid exact bucket boundaries).
* forward returns (bias, cache); backward returns dW only (the buckets are integers); float64;
  do not modify inputs in place.

Hints:
* Build the (S, T) relative positions with broadcasting, bucket them, then one fancy index
  W[buckets] gives (S, T, H): transpose to (H, S, T).
* The forward is an embedding lookup whose "ids" are the buckets. Many pairs share a bucket (all
  pairs at one distance, all far pairs the last bucket): what does NumPy do with `a[idx] += b` when
  idx repeats?
"""

import numpy as np


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """T5's bucket of each relative position.

    Parameters
    ----------
    relative_position : ndarray of int, any shape (key position - query position)
    bidirectional : bool
    num_buckets : int
    max_distance : int

    Returns
    -------
    buckets : ndarray of int, the shape of relative_position, values in [0, num_buckets)
    """
    raise NotImplementedError


def relative_position_bias_forward(W, S, T, bidirectional, max_distance):
    """bias[h, i, j] = W[bucket(j - (i + T - S)), h].

    Parameters
    ----------
    W : ndarray, shape (NB, H), NB = num_buckets
    S, T : int
    bidirectional : bool
    max_distance : int

    Returns
    -------
    bias : ndarray, shape (H, S, T)
    cache : anything your backward needs
    """
    raise NotImplementedError


def relative_position_bias_backward(dbias, cache):
    """dL/dW given dbias = dL/dbias.

    Parameters
    ----------
    dbias : ndarray, shape (H, S, T)
    cache : what relative_position_bias_forward returned

    Returns
    -------
    dW : ndarray, shape (NB, H)
    """
    raise NotImplementedError
