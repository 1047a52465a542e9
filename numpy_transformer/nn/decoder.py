"""The decoder: :class:`TransformerDecoderLayer` (causal self-attention, cross-attention to the
encoder's memory and feed-forward, each with residual, dropout and LayerNorm, post-LN or pre-LN) and
:class:`TransformerDecoder` (a stack of copies with their own dropout generators), as ``torch.nn``.

Shape letters here: S the target length (the queries), T the memory length (the keys of
cross-attention), B batch, D d_model, H heads. (torch's documentation calls the target length T and
the source length S; the masks' shapes are the same: ``tgt_mask`` (S, S), ``memory_mask`` (S, T).)

Incremental decoding (inference only, not in torch; Hugging Face's argument names):
``out, cache = decoder(tgt_new, memory, past_key_values=cache, use_cache=True)`` runs only the new
target positions through each layer: self-attention attends them to the keys and values cached so far
(slot ``i`` of the :class:`~numpy_transformer.nn.KVCache`), cross-attention to the memory's keys and
values, projected once on the first call (static slot ``("cross", i)``). The outputs equal the full
causal forward's at those positions (``tests/nn/test_decoder_cache.py``).
"""

from __future__ import annotations

import copy

import numpy as np

from .. import functional as F
from ..utils.checks import as_generator, check_float_input, check_mask, check_positive_int
from . import hooks
from ._init import dtype_of
from ._layout import BatchLayout
from .activations import activation_module
from .attention import MultiheadAttention
from .kv_cache import KVCache, cached_attention, resolve_use_cache
from .layers import Dropout, Linear
from .module import Module, ModuleList
from .norms import LayerNorm
from .recompute import backward_layer, run_layer
from .transformer import detect_causal_mask, reseed

__all__ = ["TransformerDecoderLayer", "TransformerDecoder"]

_NO_BACKWARD = ("{}.backward() after a cached forward (use_cache=True / past_key_values): incremental decoding "
                "is inference only and keeps nothing for a backward; train with the full forward (no cache)")


def check_decoder_inputs(tgt, memory, masks, d_model, heads, batch_first, dtype):
    """Validate ``tgt``, ``memory`` and the four masks of a decoder forward, naming each argument.

    ``masks`` is ``(tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)``. Returns
    ``(tgt, memory, masks, (B, S, T))`` with float masks in ``dtype``; B is 0 for unbatched inputs.
    """
    bf = "(B, S, D)" if batch_first else "(S, B, D)"
    tgt = check_float_input(tgt, "tgt", dtype, ndim=(2, 3), last_dim=d_model, shape_doc=bf + " or unbatched (S, D)")
    unbatched = tgt.ndim == 2
    mdoc = "(T, D) like the unbatched tgt" if unbatched else ("(B, T, D)" if batch_first else "(T, B, D)")
    memory = check_float_input(memory, "memory", dtype, ndim=tgt.ndim, last_dim=d_model,
                               shape_doc=f"{mdoc} (D = d_model = {d_model})")
    if unbatched:
        b, (s, t) = 0, (tgt.shape[0], memory.shape[0])
    else:
        bi = 0 if batch_first else 1
        b, s, t = tgt.shape[bi], tgt.shape[1 - bi], memory.shape[1 - bi]
        if memory.shape[bi] != b:
            raise ValueError(f"memory must have tgt's batch size {b} (batch_first={batch_first}), got memory "
                             f"{memory.shape} and tgt {tgt.shape}")
    if s == 0 or t == 0 or (not unbatched and b == 0):
        raise ValueError(f"tgt and memory must have a non-empty batch and sequence, got tgt {tgt.shape} and "
                         f"memory {memory.shape}")
    lead = [(heads,)] if unbatched else [(b * heads,)]
    tgt_mask, memory_mask, tgt_kpm, memory_kpm = masks
    tgt_mask = check_mask(tgt_mask, "tgt_mask", [(s, s)] + [x + (s, s) for x in lead], dtype)
    memory_mask = check_mask(memory_mask, "memory_mask", [(s, t)] + [x + (s, t) for x in lead], dtype)
    tgt_kpm = check_mask(tgt_kpm, "tgt_key_padding_mask", [(s,) if unbatched else (b, s)], dtype)
    memory_kpm = check_mask(memory_kpm, "memory_key_padding_mask", [(t,) if unbatched else (b, t)], dtype)
    return tgt, memory, (tgt_mask, memory_mask, tgt_kpm, memory_kpm), (b, s, t)


def _check_cached_call(masks, memory_is_causal, cache, b, t):
    """Refuse what the cached forward cannot honour, naming the argument: it is causal by construction
    (no ``tgt_mask``/``memory_mask``/``tgt_key_padding_mask``), and ``cache`` must hold this batch and
    this memory's length. Returns the cache to use (a new one when ``cache`` is None)."""
    for name, m in zip(("tgt_mask", "memory_mask", "tgt_key_padding_mask"), masks[:3]):
        if m is not None:
            raise ValueError(f"{name} must be None in the cached forward (use_cache=True / past_key_values): "
                             f"its self-attention is causal by construction, each new position attending the "
                             f"cached ones and itself; got a {name} of shape {np.shape(m)}")
    if memory_is_causal:
        raise ValueError("memory_is_causal=True is not supported in the cached forward (use_cache=True): "
                         "every target position attends the whole memory there")
    if cache is None:
        return KVCache()
    if cache.batch_size is not None and cache.batch_size != b:
        raise ValueError(f"tgt has batch {b} but past_key_values holds {cache.batch_size} rows")
    if ("cross", 0) in cache and cache.get_seq_length(("cross", 0)) != t:
        raise ValueError(f"memory has length {t} but past_key_values holds the cross-attention keys of a memory "
                         f"of length {cache.get_seq_length(('cross', 0))}: pass the same memory at every step")
    return cache


class TransformerDecoderLayer(Module):
    """One decoder block: self-attention, cross-attention to ``memory``, feed-forward, as
    ``torch.nn.TransformerDecoderLayer`` (same construction, ``state_dict`` keys and maths)::

        norm_first=False (post-LN):  x = norm1(x + sa(x));  x = norm2(x + mha(x, m));  x = norm3(x + ff(x))
        norm_first=True  (pre-LN):   x = x + sa(norm1(x));  x = x + mha(norm2(x), m);  x = x + ff(norm3(x))
        sa(x)     = dropout1(self_attn(x, x, x))
        mha(x, m) = dropout2(multihead_attn(x, m, m))        # queries from x, keys and values from memory
        ff(x)     = dropout3(linear2(dropout(activation(linear1(x)))))

    Parameters
    ----------
    d_model : int
        D.
    nhead : int
        H; D must be divisible by H.
    dim_feedforward : int
        F.
    dropout : float
    activation : {"relu", "gelu", "silu"} or an nt.ReLU/nt.GELU/nt.SiLU module
    layer_norm_eps : float
    batch_first : bool
        True (default here, as our encoder): (B, S, D); False: (S, B, D). **torch's default is False.**
    norm_first : bool
    bias : bool
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        Initialisation and every dropout mask derive from it.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, dtype=np.float32, seed=None):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(nhead, "nhead")
        if d_model % nhead != 0:
            raise ValueError(f"d_model must be divisible by nhead, got d_model={d_model} and nhead={nhead}")
        self.dtype = dtype_of(dtype)
        rng = as_generator(seed)
        self.d_model = d_model
        self.batch_first = bool(batch_first)
        self.norm_first = bool(norm_first)
        # the attention modules run batch-first inside the layer; the layer transposes once
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=True,
                                            dtype=self.dtype, seed=rng)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=True,
                                                 dtype=self.dtype, seed=rng)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=self.dtype, seed=rng)
        self.dropout = Dropout(dropout, seed=rng.spawn(1)[0])
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=self.dtype, seed=rng)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=self.dtype)
        self.dropout1 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.dropout2 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.dropout3 = Dropout(dropout, seed=rng.spawn(1)[0])
        self.activation = activation_module(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
                past_key_values=None, use_cache=None):
        """tgt (B, S, D), memory (B, T, D) (or (S, B, D), (T, B, D) when not batch_first; or unbatched
        (S, D), (T, D)) -> shaped like tgt.

        Masks as torch's modules (bool True = may NOT attend; float added): ``tgt_mask`` (S, S) or
        (B*H, S, S), ``memory_mask`` (S, T) or (B*H, S, T) (unbatched: (H, S, ·) for the per-head form),
        ``tgt_key_padding_mask`` (B, S), ``memory_key_padding_mask`` (B, T) (unbatched: (S,), (T,)).
        ``tgt_is_causal`` / ``memory_is_causal``: hints that ``tgt_mask`` / ``memory_mask`` is the
        causal mask (a wrong hint raises ValueError); **difference from torch:** a hint with no mask
        applies the causal mask (for memory, (S, T) with query i seeing keys 0..i), where torch raises
        "Need attn_mask if specifying the is_causal hint".

        ``past_key_values`` (an nt.KVCache) / ``use_cache``: the cached forward of incremental decoding
        (not in torch), returning ``(out, past_key_values)``: as :meth:`TransformerDecoder.forward`, for
        this one layer (slots 0 and ``("cross", 0)``).
        """
        use_cache = resolve_use_cache(use_cache, past_key_values)
        masks = (tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
        x, mem, masks, (b, s, t) = check_decoder_inputs(tgt, memory, masks, self.d_model, self.self_attn.num_heads,
                                                         self.batch_first, self.dtype)
        if use_cache:
            cache = _check_cached_call(masks, memory_is_causal, past_key_values, max(b, 1), t)
            self._save(None)                        # nothing for a backward: it refuses
            layout = BatchLayout.of(x, self.batch_first)
            (x, mem), memory_kpm = layout.to_batch_first(x, mem), layout.add_batch(masks[3])
            x = self._forward_cached(x, mem, memory_kpm, cache, 0)              # (B, S, D)
            return layout.from_batch_first(x), cache
        tgt_mask, memory_mask, tgt_kpm, memory_kpm = masks
        F.check_causal_hint(tgt_mask, tgt_is_causal, "tgt_mask", s, s)
        F.check_causal_hint(memory_mask, memory_is_causal, "memory_mask", s, t)
        layout = BatchLayout.of(x, self.batch_first)
        x, mem = layout.to_batch_first(x, mem)                                   # (B, S, D), (B, T, D)
        tgt_kpm, memory_kpm = layout.add_batch(tgt_kpm, memory_kpm)              # (B, S), (B, T)
        sa = (tgt_mask, tgt_kpm, tgt_is_causal)
        ca = (memory_mask, memory_kpm, memory_is_causal)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *sa)
            x = x + self._mha_block(self.norm2(x), mem, *ca)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, *sa))
            x = self.norm2(x + self._mha_block(x, mem, *ca))
            x = self.norm3(x + self._ff_block(x))
        self._save((x.shape, mem.shape, layout))
        return layout.from_batch_first(x)

    def _forward_cached(self, x, mem, memory_kpm, cache, i):
        """The layer on the new positions x (B, S, D), batch-first, through ``cache`` (layer index i):
        the same sub-modules and order as :meth:`forward`, self-attention over cached + new positions
        (causal), cross-attention over the memory's keys and values (projected on the first call only)."""
        def sa(y):
            return self.dropout1(cached_attention(self.self_attn, y, cache, i))                   # (B, S, D)

        def mha(y):
            return self.dropout2(cached_attention(self.multihead_attn, y, cache, ("cross", i), memory=mem,
                                                  key_padding_mask=memory_kpm))                  # (B, S, D)
        if self.norm_first:
            x = x + sa(self.norm1(x))
            x = x + mha(self.norm2(x))
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + sa(x))
        x = self.norm2(x + mha(x))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)          # (B, S, D)
        return self.dropout1(out)

    def _sa_block_backward(self, dout):
        # x fed query, key and value: their three gradients add (summed inside, in one product)
        return self.self_attn.backward(self.dropout1.backward(dout), sum_inputs=True)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        out, _ = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                     need_weights=False, is_causal=is_causal)     # (B, S, D)
        return self.dropout2(out)

    def _mha_block_backward(self, dout):
        # two paths: the queries came from x, the keys *and* the values from memory (their gradients add)
        dx, dk, dv = self.multihead_attn.backward(self.dropout2.backward(dout))   # (B, S, D), 2 x (B, T, D)
        return dx, dk + dv

    def _ff_block(self, x):
        h = self.dropout(self.activation(self.linear1(x)))                       # (B, S, F)
        return self.dropout3(self.linear2(h))                                    # (B, S, D)

    def _ff_block_backward(self, dout):
        dh = self.linear2.backward(self.dropout3.backward(dout))                 # (B, S, F)
        return self.linear1.backward(self.activation.backward(self.dropout.backward(dh)))  # (B, S, D)

    def _record_residual(self, grad, where):
        if hooks.active():
            hooks.residual(self, grad, where)

    def backward(self, dout):
        """dout shaped like the output -> ``(dtgt, dmemory)``; accumulates every parameter's gradient.

        Each residual ``y = x + f(x)`` passes ``dout`` straight to ``x`` *and* through ``f``: the two add.
        Post-LN goes through each norm's backward first. ``memory`` reaches the output only through
        cross-attention's keys and values, so ``dmemory = dK-path + dV-path`` of ``multihead_attn``.
        """
        saved = self._take()
        if saved is None:
            raise RuntimeError(_NO_BACKWARD.format(type(self).__name__))
        shape, mshape, layout = saved
        dy = layout.grad_to_batch_first(dout, shape, self.dtype)                  # (B, S, D)
        if self.norm_first:
            dh = dy + self.norm3.backward(self._ff_block_backward(dy))           # through x + ff(norm3(x))
            self._record_residual(dh, "between multihead_attn and feed-forward")
            dq, dmem = self._mha_block_backward(dh)                              # through x + mha(norm2(x), m)
            dh = dh + self.norm2.backward(dq)
            self._record_residual(dh, "between self_attn and multihead_attn")
            dx = dh + self.norm1.backward(self._sa_block_backward(dh))           # through x + sa(norm1(x))
        else:
            dh = self.norm3.backward(dy)                                         # y = norm3(h + ff(h))
            dh = dh + self._ff_block_backward(dh)
            self._record_residual(dh, "between multihead_attn and feed-forward")
            dh = self.norm2.backward(dh)                                         # h = norm2(g + mha(g, m))
            dq, dmem = self._mha_block_backward(dh)
            dh = dh + dq
            self._record_residual(dh, "between self_attn and multihead_attn")
            dx = self.norm1.backward(dh)                                         # g = norm1(x + sa(x))
            dx = dx + self._sa_block_backward(dx)
        return layout.from_batch_first(dx, dmem)


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer`` and an optional final norm, as torch.

    Like ``torch.nn.TransformerDecoder``, every layer starts with the *same* weights (copies of the
    template); each copy gets its own dropout generators (spawned from ``seed``). Every layer attends to
    the same ``memory``, so its gradient is the sum of every layer's cross-attention gradient.

    Parameters
    ----------
    decoder_layer : TransformerDecoderLayer
    num_layers : int
    norm : LayerNorm, optional
    seed : int or numpy.random.Generator, optional
        Not in torch: the copies' dropout generators.
    checkpoint : bool
        Not in torch: activation checkpointing, as :class:`~numpy_transformer.nn.TransformerEncoder`'s
        (each layer keeps its ``tgt`` input, ``memory`` and masks; the backward recomputes its forward;
        gradients bit for bit the plain path's). The cached (incremental) forward is unaffected.
    """

    def __init__(self, decoder_layer, num_layers, norm=None, seed=None, checkpoint=False):
        super().__init__()
        if not isinstance(decoder_layer, TransformerDecoderLayer):
            raise TypeError(f"decoder_layer must be an nt.TransformerDecoderLayer, got {type(decoder_layer).__name__}")
        check_positive_int(num_layers, "num_layers")
        if norm is not None and not isinstance(norm, LayerNorm):
            raise TypeError(f"norm must be an nt.LayerNorm or None, got {type(norm).__name__}")
        ss = np.random.SeedSequence(seed if not isinstance(seed, np.random.Generator)
                                    else int(seed.integers(2**63)))
        layers = []
        for _ in range(num_layers):
            layer = copy.deepcopy(decoder_layer)
            reseed(layer, ss)
            layers.append(layer)
        self.layers = ModuleList(layers)
        self.num_layers = num_layers
        self.norm = norm
        self.batch_first = decoder_layer.batch_first
        self.checkpoint = bool(checkpoint)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False,
                past_key_values=None, use_cache=None):
        """tgt (B, S, D), memory (B, T, D) -> (B, S, D); arguments as
        :meth:`TransformerDecoderLayer.forward`. ``tgt_is_causal=None`` detects a causal ``tgt_mask``
        (as torch); True is a hint (checked; with no ``tgt_mask`` it applies the causal mask, unlike
        torch, which raises).

        Incremental decoding (not in torch; Hugging Face's names)::

            out, cache = decoder(tgt[:, :1], memory, use_cache=True)             # starts a cache
            out, cache = decoder(tgt[:, 1:2], memory, past_key_values=cache)     # one more position

        past_key_values : nt.KVCache, optional
            The layers' keys and values so far (from an earlier cached call); changed in place and
            returned. Self-attention slot ``i`` grows by the new positions; cross-attention slot
            ``("cross", i)`` holds ``memory``'s keys and values, projected on the first call and reused
            (later calls must pass the same memory; its length is checked, its values are not read).
        use_cache : bool, optional
            Default: True when ``past_key_values`` is given; returns ``(out, past_key_values)``.

        With the cache ``tgt`` holds the new positions only (S >= 1: the first call may pass several)
        and the self-attention is causal by construction: ``tgt_mask``, ``memory_mask`` and
        ``tgt_key_padding_mask`` must be None, ``tgt_is_causal`` is not read, ``memory_key_padding_mask``
        applies as usual. The outputs equal the full forward's with the causal ``tgt_mask`` at the same
        positions. **Inference only**: call ``eval()`` first (in training mode dropout draws fresh
        masks, so the outputs differ from the full forward's); ``backward`` after a cached forward
        raises RuntimeError (the module stays usable).
        """
        use_cache = resolve_use_cache(use_cache, past_key_values)
        layer = self.layers[0]
        masks = (tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
        x, mem, masks, (b, s, t) = check_decoder_inputs(tgt, memory, masks, layer.d_model, layer.self_attn.num_heads,
                                                         self.batch_first, layer.dtype)
        if use_cache:
            cache = _check_cached_call(masks, memory_is_causal, past_key_values, max(b, 1), t)
            self._save(None)                        # nothing for a backward: it refuses
            layout = BatchLayout.of(x, self.batch_first)
            (x, mem), memory_kpm = layout.to_batch_first(x, mem), layout.add_batch(masks[3])
            for i, layer in enumerate(self.layers):
                x = layer._forward_cached(x, mem, memory_kpm, cache, i)          # (B, S, D)
            if self.norm is not None:
                x = self.norm(x)
            return layout.from_batch_first(x), cache
        F.check_causal_hint(masks[0], tgt_is_causal, "tgt_mask", s, s)
        F.check_causal_hint(masks[1], memory_is_causal, "memory_mask", s, t)
        if tgt_is_causal is None:
            tgt_is_causal = detect_causal_mask(masks[0])
        x, saved = tgt, []
        for layer in self.layers:                  # checkpoint: each layer keeps only its inputs
            x, kept = run_layer(layer, self.checkpoint, x, memory, *masks, tgt_is_causal=tgt_is_causal,
                                memory_is_causal=memory_is_causal)
            saved.append(kept)
        if self.norm is not None:
            x = self.norm(x)
        self._save(saved)
        return x

    def backward(self, dout):
        """dout shaped like the output -> ``(dtgt, dmemory)``; accumulates every layer's gradients.

        ``memory`` fed the cross-attention of *every* layer: its gradient is the sum of theirs.
        """
        saved = self._take()
        if saved is None:
            raise RuntimeError(_NO_BACKWARD.format(type(self).__name__))
        if self.norm is not None:
            dout = self.norm.backward(dout)
        dmemory = None
        for layer, kept in reversed(list(zip(self.layers, saved))):
            dout, dm = backward_layer(layer, kept, dout)
            dmemory = dm if dmemory is None else dmemory + dm                    # (B, T, D)
        return dout, dmemory
