"""T5's learned relative position bias, :class:`RelativePositionBias`: one learned scalar per
(bucket of ``key position - query position``, head), added to the attention scores.

(ALiBi's bias has no parameters: it is the function :func:`numpy_transformer.functional.alibi_bias`.)
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from ..utils.checks import check_grad
from .layers import Embedding
from .module import Module

__all__ = ["RelativePositionBias"]


class RelativePositionBias(Module):
    """T5's bucketed relative position bias (Raffel et al. 2020; Hugging Face's ``T5Attention``'s
    ``relative_attention_bias`` and ``compute_bias``): ``forward(s, t)`` returns the (H, S, T) bias
    ``W[bucket(j - p_i), h]`` for query i at position ``p_i`` and key j, to be added to the scaled
    scores before the softmax (broadcast over the batch; T5 computes it once and shares it across
    layers).

    Parameters
    ----------
    num_heads : int
        H.
    num_buckets : int
        NB, the rows of the table (T5: 32). See :func:`numpy_transformer.functional.relative_position_bucket`.
    max_distance : int
        Distances from here on share the last bucket (T5: 128).
    bidirectional : bool
        True (an encoder): separate buckets for keys before and after the query. False (a causal
        decoder): every future key shares bucket 0 with the query's own position (T5 masks them anyway).
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional

    Attributes
    ----------
    relative_attention_bias : Embedding
        Its ``weight`` (NB, H) is the learned table (T5's name, so the ``state_dict`` key is
        ``relative_attention_bias.weight``). Initialised N(0, 1), torch.nn.Embedding's default (what a
        torch module built the same way gets). Hugging Face's T5 re-initialises it with
        N(0, (factor * d_model ** -0.5) ** 2) in ``_init_weights``; assign ``weight.data`` for that.
    """

    def __init__(self, num_heads, num_buckets=32, max_distance=128, bidirectional=True, dtype=np.float32,
                 seed=None):
        super().__init__()
        if not isinstance(bidirectional, (bool, np.bool_)):
            raise TypeError(f"bidirectional must be True or False, got {bidirectional!r}")
        self.bidirectional = bool(bidirectional)
        F.relative_position_bucket(np.zeros(0, dtype=np.int64), self.bidirectional, num_buckets, max_distance)
        self.num_heads = F.position_bias._check_count(num_heads, "num_heads")
        self.num_buckets, self.max_distance = int(num_buckets), int(max_distance)
        self.relative_attention_bias = Embedding(self.num_buckets, self.num_heads, dtype=dtype, seed=seed)
        self.dtype = self.relative_attention_bias.dtype

    def buckets(self, s, t, offset=None):
        """(S, T) int64 bucket of every (query, key) pair; ``offset`` as in :meth:`forward`."""
        return F.relative_position_bucket(F.relative_positions(s, t, offset), self.bidirectional, self.num_buckets,
                                          self.max_distance)

    def forward(self, s, t=None, offset=None):
        """The (H, S, T) bias for S queries against T keys (default T = S).

        ``offset`` is the key position of query 0; the default ``T - S`` aligns the last query with
        the last key: a full pass (S = T) gets offset 0, Hugging Face's ``compute_bias(S, S)``, and a
        KV-cache decoding step (S = 1 against T cached keys) gets its query at position T - 1, the
        last row of the full matrix (Hugging Face's ``cache_position``). Pass ``offset=0`` for
        ``compute_bias(S, T)`` with S < T and no ``cache_position`` (query i at position i).
        """
        t = s if t is None else t
        buckets = self.buckets(s, t, offset)                                      # (S, T)
        bias, cache = F.relative_position_bias_forward(self.relative_attention_bias.weight.data, buckets)
        self._save(cache)
        return bias                                                               # (H, S, T)

    def backward(self, dbias):
        """dbias (H, S, T) -> None (s and t are not differentiable); accumulates
        ``relative_attention_bias.weight.grad`` by a scatter-add over the buckets."""
        cache = self._take()
        dbias = check_grad(dbias, "dbias", (self.num_heads,) + cache.buckets.shape, self.dtype)
        self.relative_attention_bias.weight.accumulate(F.relative_position_bias_backward(dbias, cache), owned=True)
        return None

    def extra_repr(self):
        return (f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, "
                f"bidirectional={self.bidirectional}")
