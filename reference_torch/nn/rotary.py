"""Torch twins of rotary position embeddings (torch has no RoPE of its own).

Each layout is written the way its reference code base writes it, so that the oracle is not our
formula translated to torch:

* :func:`rope_rotate_half` -- Hugging Face Llama's ``rotate_half`` / ``apply_rotary_pos_emb``:
  ``emb = cat(freqs, freqs)``, ``x * cos(emb) + rotate_half(x) * sin(emb)`` with
  ``rotate_half(x) = cat(-x2, x1)`` (pairs (i, i + Dh/2));
* :func:`rope_complex` -- Meta's Llama ``precompute_freqs_cis`` / ``apply_rotary_emb``: adjacent
  features (2i, 2i+1) read as one complex number (``torch.view_as_complex``) and multiplied by
  ``torch.polar(1, p w_i)``.

Both compute the angles in float64 and cast cos/sin (or the unit complex numbers) to x's dtype, as
``numpy_transformer.functional.rope_forward`` promises; autograd gives the gradients.
"""

from __future__ import annotations

import torch

__all__ = ["rope", "rope_rotate_half", "rope_complex", "RotaryEmbedding"]


def _angles(positions, dh, base):
    """(..., S, Dh/2) float64 angles p * base ** (-2i / Dh) (Meta's and HF's ``freqs``)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dh, 2, dtype=torch.float64)[: dh // 2] / dh))
    return positions.to(torch.float64)[..., None] * inv_freq


def rotate_half(x):
    """Rotates half the hidden dims of the input (Hugging Face's helper, verbatim)."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_rotate_half(x, positions, base=10000.0):
    """Hugging Face Llama's ``apply_rotary_pos_emb`` for one tensor (q or k)."""
    freqs = _angles(positions, x.shape[-1], base)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    return (x * cos) + (rotate_half(x) * sin)


def rope_complex(x, positions, base=10000.0):
    """Meta's Llama ``apply_rotary_emb`` for one tensor: pairs (2i, 2i+1) as complex numbers."""
    freqs = _angles(positions, x.shape[-1], base)
    cdtype = torch.complex128 if x.dtype == torch.float64 else torch.complex64
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs).to(cdtype)       # e^{i p w}
    x_ = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(x_ * freqs_cis).flatten(-2)


def rope(x, positions=None, base=10000.0, interleaved=False):
    """The table's op: ``numpy_transformer.functional.rope_forward``'s signature, either layout."""
    if positions is None:
        positions = torch.arange(x.shape[-2])
    return (rope_complex if interleaved else rope_rotate_half)(x, positions, base)


class RotaryEmbedding(torch.nn.Module):
    """The twin of ``numpy_transformer.nn.RotaryEmbedding``: no parameters, ``forward(x, positions=None)``."""

    def __init__(self, dim, base=10000.0, interleaved=False):
        super().__init__()
        self.dim, self.base, self.interleaved = dim, base, interleaved

    def forward(self, x, positions=None):
        return rope(x, positions, self.base, self.interleaved)
