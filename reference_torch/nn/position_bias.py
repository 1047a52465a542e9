"""The torch twins of the position biases (torch has neither): T5's relative position bias as
Hugging Face writes it, and ALiBi's slopes as the paper's reference code writes them.

* :func:`relative_position_bucket` -- ``T5Attention._relative_position_bucket`` of Hugging Face's
  ``modeling_t5.py``, transcribed line for line (float32 logarithm included).
* :class:`RelativePositionBias` -- ``T5Attention.relative_attention_bias`` (an ``nn.Embedding(NB, H)``)
  and ``compute_bias(query_length, key_length, cache_position)``, returning (H, S, T) (T5's
  ``(1, H, S, T)`` without the leading 1). The twin of ``nt.RelativePositionBias``.
* :func:`alibi_get_slopes` -- ``get_slopes`` of ofirpress/attention_with_linear_biases (fairseq's
  ``TransformerDecoder``), transcribed.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["relative_position_bucket", "RelativePositionBias", "alibi_get_slopes"]


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """Hugging Face's ``T5Attention._relative_position_bucket``, verbatim but for the docstring."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    # now relative_position is in the range [0, inf)

    # half of the buckets are for exact increments in positions
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact

    # The other half of the buckets are for logarithmically bigger bins in positions up to max_distance
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )

    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


class RelativePositionBias(nn.Module):
    """``relative_attention_bias`` and ``compute_bias`` of Hugging Face's ``T5Attention``."""

    def __init__(self, num_heads, num_buckets=32, max_distance=128, bidirectional=True):
        super().__init__()
        self.num_heads, self.num_buckets, self.max_distance = num_heads, num_buckets, max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    _relative_position_bucket = staticmethod(relative_position_bucket)

    def compute_bias(self, query_length, key_length, device=None, cache_position=None):
        """T5's, with ``bidirectional`` in place of ``not self.is_decoder``; (1, H, S, T)."""
        if cache_position is None:
            context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        else:
            context_position = cache_position[:, None].to(device)
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position  # shape (query_length, key_length)
        relative_position_bucket = self._relative_position_bucket(
            relative_position,  # shape (query_length, key_length)
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        values = self.relative_attention_bias(relative_position_bucket)  # shape (query_length, key_length, num_heads)
        values = values.permute([2, 0, 1]).unsqueeze(0)  # shape (1, num_heads, query_length, key_length)
        return values

    def forward(self, s, t=None, offset=None):
        """(H, S, T): query i at key position ``i + offset`` (default ``T - S``), via ``cache_position``."""
        t = s if t is None else t
        offset = t - s if offset is None else offset
        return self.compute_bias(s, t, cache_position=torch.arange(s) + offset)[0]


def alibi_get_slopes(n):
    """The paper's reference ``get_slopes(n)``: a list of n floats."""
    def get_slopes_power_of_2(n):
        start = (2**(-2**-(math.log2(n)-3)))
        ratio = start
        return [start*ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)      # In the paper, we only train models that have 2^a heads for some a.
    else:                                    # This function has some good properties that only occur when the
        closest_power_of_2 = 2**math.floor(math.log2(n))     # input is a power of 2. To maintain that even
        return (get_slopes_power_of_2(closest_power_of_2)    # when the number of heads is not a power of 2,
                + alibi_get_slopes(2*closest_power_of_2)[0::2][:n-closest_power_of_2])  # we use this workaround.


def alibi_bias(num_heads, s, t, dtype=torch.float64):
    """ALiBi's (H, S, T) bias ``m_h * (j - (i + T - S))`` with the paper's :func:`alibi_get_slopes` (the
    last query at the last key; above the diagonal the causal mask removes it)."""
    m = torch.tensor(alibi_get_slopes(num_heads), dtype=torch.float64)                # (H,)
    rel = torch.arange(t)[None, :] - (torch.arange(s)[:, None] + (t - s))             # (S, T)
    return (m[:, None, None] * rel).to(dtype)
