""":class:`Transformer`, the encoder-decoder of "Attention Is All You Need", as ``torch.nn.Transformer``:
an encoder over ``src`` (with a final LayerNorm), a decoder over ``tgt`` attending to the encoder's
output (the *memory*; with a final LayerNorm), and the hand-written backward through both.

Shape letters here: T the source length (the memory's), S the target length, B batch, D d_model
(torch's documentation uses S for the source and T for the target).
"""

from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from ..utils.checks import as_float_dtype, as_generator, check_float_input, check_mask, check_positive_int
from ._init import dtype_of, uniform
from .decoder import TransformerDecoder, TransformerDecoderLayer, check_decoder_inputs
from .module import Module
from .norms import LayerNorm
from .transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = ["Transformer"]


def _xavier_uniform_any(rng, shape, dtype):
    """torch's ``xavier_uniform_`` for any rank >= 2: U(-a, a), a = sqrt(6 / (fan_in + fan_out)),
    fan_in = size(1) * receptive field, fan_out = size(0) * receptive field."""
    receptive = math.prod(shape[2:])
    return uniform(rng, math.sqrt(6.0 / ((shape[0] + shape[1]) * receptive)), shape, dtype)


class Transformer(Module):
    """The encoder-decoder Transformer, as ``torch.nn.Transformer`` (same arguments, ``state_dict`` keys
    ``encoder.layers.{i}.*``, ``encoder.norm.*``, ``decoder.layers.{i}.*``, ``decoder.norm.*``)::

        memory = encoder(src)            # TransformerEncoder with a final LayerNorm
        out    = decoder(tgt, memory)    # TransformerDecoder with a final LayerNorm

    As torch, every parameter with two or more dimensions is (re)initialised Xavier-uniform after
    construction, custom encoder and decoder included.

    Parameters
    ----------
    d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout, activation,
    layer_norm_eps, norm_first, bias
        As torch (``activation``: "relu", "gelu", "silu" or an nt.ReLU/nt.GELU/nt.SiLU module).
    custom_encoder : nt.Module, optional
        Used instead of the encoder: ``forward(src, mask=, src_key_padding_mask=, is_causal=)`` and
        ``backward(dmemory) -> dsrc`` (an :class:`TransformerEncoder` is one).
    custom_decoder : nt.Module, optional
        Used instead of the decoder: forward as :meth:`TransformerDecoder.forward`, ``backward(dout) ->
        (dtgt, dmemory)``.
    batch_first : bool
        True (default here, as our encoder): (B, ·, D) inputs; False: (·, B, D). **torch's default is False.**
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        Initialisation and every dropout mask derive from it (not in torch).
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=True, norm_first=False, bias=True, dtype=np.float32, seed=None):
        super().__init__()
        self.dtype = dtype_of(dtype)
        rng = as_generator(seed)
        for name, m in (("custom_encoder", custom_encoder), ("custom_decoder", custom_decoder)):
            if m is not None and not isinstance(m, Module):
                raise TypeError(f"{name} must be an nt.Module with forward and backward, got {type(m).__name__}")
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                  dtype=self.dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            check_positive_int(num_encoder_layers, "num_encoder_layers")
            layer = TransformerEncoderLayer(d_model, nhead, seed=rng, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm, seed=rng.spawn(1)[0])
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            check_positive_int(num_decoder_layers, "num_decoder_layers")
            layer = TransformerDecoderLayer(d_model, nhead, seed=rng, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm, seed=rng.spawn(1)[0])
        for p in self.parameters():                                  # torch's _reset_parameters
            if p.data.ndim > 1:
                p.data[...] = _xavier_uniform_any(rng, p.shape, p.dtype)
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = bool(batch_first)
        self.custom_parts = (custom_encoder is not None, custom_decoder is not None)   # (encoder, decoder)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        """src (B, T, D), tgt (B, S, D) (or (T, B, D), (S, B, D) when not batch_first; or unbatched
        (T, D), (S, D)) -> shaped like tgt.

        Masks as torch's modules (bool True = may NOT attend; float added): ``src_mask`` (T, T) or
        (B*H, T, T), ``tgt_mask`` (S, S) or (B*H, S, S), ``memory_mask`` (S, T) or (B*H, S, T),
        ``src_key_padding_mask`` (B, T), ``tgt_key_padding_mask`` (B, S), ``memory_key_padding_mask``
        (B, T) (unbatched: no B). ``src_is_causal``/``tgt_is_causal`` None detect a causal mask, as torch;
        True is a hint (a wrong one raises ValueError; with no mask it applies the causal mask, where
        torch raises).
        """
        bf = "(B, T, D)" if self.batch_first else "(T, B, D)"
        src = check_float_input(src, "src", self.dtype, ndim=(2, 3), last_dim=self.d_model,
                                shape_doc=f"{bf} or unbatched (T, D) (D = d_model = {self.d_model})")
        tgt = check_float_input(tgt, "tgt", self.dtype, ndim=src.ndim, last_dim=self.d_model,
                                shape_doc=f"like src, (B, S, D) (D = d_model = {self.d_model})")
        bi = 0 if self.batch_first else 1
        if 0 in src.shape[:-1] or 0 in tgt.shape[:-1]:     # named here: the decoder would blame the memory
            raise ValueError(f"src and tgt must have a non-empty batch and sequence, got src {src.shape} and "
                             f"tgt {tgt.shape}")
        if src.ndim == 3 and src.shape[bi] != tgt.shape[bi]:
            raise ValueError(f"src and tgt must have the same batch size (batch_first={self.batch_first}), got "
                             f"src {src.shape} and tgt {tgt.shape}")
        t = src.shape[0] if src.ndim == 2 else src.shape[1 - bi]
        if isinstance(self.encoder, TransformerEncoder):   # name this method's arguments in the messages
            h = self.encoder.layers[0].self_attn.num_heads
            lead = [(h, t, t)] if src.ndim == 2 else [(src.shape[bi] * h, t, t)]
            check_mask(src_mask, "src_mask", [(t, t)] + lead, self.dtype)
            check_mask(src_key_padding_mask, "src_key_padding_mask", [(t,) if src.ndim == 2 else (src.shape[bi], t)],
                       self.dtype)
            F.check_causal_hint(src_mask, src_is_causal, "src_mask", t, t)
        if isinstance(self.decoder, TransformerDecoder):   # before the encoder runs: the memory is src-shaped
            layer = self.decoder.layers[0]
            masks = (tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
            _, _, masks, (_, s, _) = check_decoder_inputs(tgt, src, masks, layer.d_model, layer.self_attn.num_heads,
                                                           self.batch_first, self.dtype)
            F.check_causal_hint(masks[0], tgt_is_causal, "tgt_mask", s, s)
            F.check_causal_hint(masks[1], memory_is_causal, "memory_mask", s, t)
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        out = self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                           tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        self._save(True)
        return out

    def backward(self, dout):
        """dout shaped like the output -> ``(dsrc, dtgt)``; accumulates every parameter's gradient.

        The decoder gives ``dtgt`` and ``dmemory`` (summed over its layers' cross-attention); ``src``
        reaches the output only through the memory, so the encoder's backward of ``dmemory`` is ``dsrc``.
        """
        self._take()
        dtgt, dmemory = self.decoder.backward(dout)
        dsrc = self.encoder.backward(dmemory)
        return dsrc, dtgt

    def encode(self, src, src_mask=None, src_key_padding_mask=None, src_is_causal=None):
        """The memory of ``src``: ``self.encoder(src, mask=src_mask, ...)`` (not in torch; for decoding).

        Encode once, then decode step by step with :meth:`decode`. For training use :meth:`forward`
        and :meth:`backward` (a backward of this call alone is ``self.encoder.backward(dmemory)``).
        """
        return self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)

    def decode(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
               memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False,
               past_key_values=None, use_cache=None):
        """``self.decoder(tgt, memory, ...)`` (not in torch); with ``use_cache=True`` / ``past_key_values``
        the incremental decoding of :meth:`TransformerDecoder.forward`, returning ``(out, cache)``::

            memory = model.encode(src)
            out, cache = model.decode(tgt[:, :1], memory, use_cache=True)
            out, cache = model.decode(tgt[:, 1:2], memory, past_key_values=cache)   # and so on

        Inference only, in ``eval()`` mode; equal to ``model(src, tgt, tgt_mask=causal)`` at each
        position.
        """
        kw = {}
        if past_key_values is not None or use_cache:
            if not isinstance(self.decoder, TransformerDecoder):
                raise TypeError(f"use_cache/past_key_values need an nt.TransformerDecoder as the decoder, got a "
                                f"custom_decoder {type(self.decoder).__name__}")
            kw = dict(past_key_values=past_key_values, use_cache=use_cache)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal, **kw)

    @staticmethod
    def generate_square_subsequent_mask(sz, dtype=np.float32):
        """The (sz, sz) causal mask as torch makes it: float, ``-inf`` above the diagonal (query i may not
        attend to key j > i), 0 elsewhere. Pass it as ``tgt_mask`` (``tgt_is_causal=None`` detects it).
        torch's ``device`` argument has no meaning here; ``dtype`` defaults to float32 as torch's."""
        if isinstance(sz, bool) or not isinstance(sz, (int, np.integer)) or sz < 0:
            raise ValueError(f"sz must be a non-negative int, got {sz!r}")
        dt = as_float_dtype(dtype)
        return np.where(F.causal_mask(int(sz)), -np.inf, 0.0).astype(dt)            # (sz, sz)

    def extra_repr(self):
        return f"d_model={self.d_model}, nhead={self.nhead}, batch_first={self.batch_first}"
