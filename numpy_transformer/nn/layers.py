"""The basic layers: :class:`Linear`, :class:`Embedding`, :class:`Dropout`, and the seed design's input
layers :class:`TokenEmbedding` (embedding scaled by sqrt(D)), :class:`PositionalEncoding` (adds
the fixed :func:`sinusoidal_table`) and :class:`LearnedPositionalEmbedding` (adds a trained table).
"""

from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from ..utils.checks import (
    as_generator,
    check_float_array,
    check_float_input,
    check_grad,
    check_ids,
    check_number,
    check_positive_int,
    check_probability,
)
from ._init import dtype_of, uniform
from .module import Module, Parameter

__all__ = ["Linear", "Embedding", "Dropout", "TokenEmbedding", "sinusoidal_table", "PositionalEncoding",
           "LearnedPositionalEmbedding"]


class Linear(Module):
    """``y = x W^T + b``, as ``torch.nn.Linear`` (same init: U(-1/sqrt(in), 1/sqrt(in)) for W and b).

    Parameters
    ----------
    in_features, out_features : int
    bias : bool
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
    """

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, seed=None):
        super().__init__()
        self.in_features = check_positive_int(in_features, "in_features")
        self.out_features = check_positive_int(out_features, "out_features")
        self.dtype = dtype_of(dtype)
        rng = as_generator(seed)
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(uniform(rng, bound, (out_features, in_features), self.dtype))
        self.register_parameter("bias", Parameter(uniform(rng, bound, (out_features,), self.dtype)) if bias else None)

    def forward(self, x):
        """x (..., in_features) -> (..., out_features)."""
        x = check_float_input(x, "input", self.dtype, last_dim=self.in_features, shape_doc="(..., in_features)")
        out, cache = F.linear_forward(x, self.weight.data, self.bias.data if self.bias is not None else None)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., out_features) -> dx (..., in_features); accumulates weight.grad and bias.grad."""
        cache, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        dx, dw, db = F.linear_backward(dout, cache)
        self.weight.accumulate(dw, owned=True)
        if self.bias is not None:
            self.bias.accumulate(db, owned=True)
        return dx

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """Lookup table, as ``torch.nn.Embedding`` (init N(0, 1); ``padding_idx`` row zero and frozen).

    Parameters
    ----------
    num_embeddings : int
        V, the vocabulary size.
    embedding_dim : int
        D.
    padding_idx : int, optional
        This row gets no gradient (and starts at zero, unless the table is given); negative counts
        from the end, as torch.
    max_norm : float, optional
        Before each lookup, every looked-up row whose ``norm_type``-norm exceeds ``max_norm`` is
        rescaled *in place* to norm ``max_norm`` (``row *= max_norm / (norm + 1e-7)``, as torch),
        so ``weight`` changes during the forward, in eval mode too. The gradient is then taken with
        respect to the renormed table: the in-place renorm is an edit of the weight's value, outside
        the differentiated function (see :func:`numpy_transformer.functional.embedding_forward`).
        Must be > 0 (torch accepts any number; zero or a negative bound only zeroes or flips rows).
    norm_type : float
        The p of the p-norm for ``max_norm`` (default 2; ``np.inf``: the largest absolute entry).
        Must be > 0 (torch does not check).
    scale_grad_by_freq : bool
        Divide each row's gradient by the number of times its id occurs in the batch.
    sparse : bool
        Only False: sparse gradients are not supported (``sparse=True`` raises ValueError).
    _weight : ndarray (V, D), optional
        Use this array as the table (torch's private argument, what :meth:`from_pretrained` passes);
        its padding row is kept as it is.
    _freeze : bool
        With ``_weight``: ``weight.requires_grad = False``.
    dtype, seed : see :class:`Linear`
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, dtype=np.float32, seed=None):
        super().__init__()
        self.num_embeddings = check_positive_int(num_embeddings, "num_embeddings")
        self.embedding_dim = check_positive_int(embedding_dim, "embedding_dim")
        if padding_idx is not None:
            if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)) \
                    or not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx must be an int in [-{num_embeddings}, {num_embeddings}), "
                                 f"got {padding_idx!r}")
            padding_idx = padding_idx % num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = None if max_norm is None else check_number(max_norm, "max_norm", low=0, low_open=True)
        self.norm_type = check_number(norm_type, "norm_type", low=0, low_open=True, allow_inf=True)
        if not isinstance(scale_grad_by_freq, (bool, np.bool_)):
            raise TypeError(f"scale_grad_by_freq must be True or False, got {scale_grad_by_freq!r}")
        self.scale_grad_by_freq = bool(scale_grad_by_freq)
        if sparse is not False:
            raise ValueError(f"sparse={sparse!r} is not supported: numpy_transformer's gradients are dense "
                             "arrays; use sparse=False (the same gradient, as a dense (V, D) array)")
        self.sparse = False
        if _weight is None:
            self.dtype = dtype_of(dtype)
            w = as_generator(seed).standard_normal((num_embeddings, embedding_dim)).astype(self.dtype)
            if padding_idx is not None:
                w[padding_idx] = 0
        else:
            w = check_float_array(_weight, "_weight")
            if w.shape != (self.num_embeddings, self.embedding_dim):
                raise ValueError(f"_weight must have shape (num_embeddings, embedding_dim) = "
                                 f"{(self.num_embeddings, self.embedding_dim)}, got {w.shape}")
            self.dtype = w.dtype
        self.weight = Parameter(w, requires_grad=not (_weight is not None and _freeze))

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose table is ``embeddings`` (V, D), as ``torch.nn.Embedding.from_pretrained``.

        The array itself becomes ``weight`` (no copy, as torch shares the tensor: an optimizer step or
        a ``max_norm`` renorm writes into it; pass ``embeddings.copy()`` to keep the original), and its
        dtype (float32 or float64) is the module's. ``freeze=True`` (the default) makes the weight
        frozen, ``weight.requires_grad = False``: the backward gives it no gradient and the
        optimizers leave it unchanged. ``padding_idx`` keeps its row's pretrained values (it only
        stops that row's gradient). The other arguments are the constructor's.
        """
        embeddings = check_float_array(embeddings, "embeddings")
        if embeddings.ndim != 2:
            raise ValueError(f"embeddings must be a 2-D array (num_embeddings, embedding_dim), got shape "
                             f"{embeddings.shape}")
        if not embeddings.flags.writeable:
            raise ValueError("embeddings is read-only; from_pretrained uses the array itself as the weight "
                             "(optimizers and max_norm write into it): pass embeddings.copy()")
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=embeddings, _freeze=freeze)

    def forward(self, ids):
        """ids (...) integer in [0, V) -> (..., D); with ``max_norm``, renormalises looked-up rows first."""
        ids = check_ids(ids, "input", self.num_embeddings)
        out, cache = F.embedding_forward(ids, self.weight.data, self.padding_idx, max_norm=self.max_norm,
                                         norm_type=self.norm_type, scale_grad_by_freq=self.scale_grad_by_freq)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., D) -> None (ids have no gradient); accumulates weight.grad by scatter-add (none when frozen)."""
        cache, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        if self.weight.requires_grad:
            self.weight.accumulate(F.embedding_backward(dout, cache), owned=True)
        return None

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        return s


class Dropout(Module):
    """Inverted dropout with the module's own seeded generator; the identity in eval mode.

    After a training-mode forward, ``last_mask`` holds the bool keep-mask used (so a reference
    implementation can replay it); ``backward`` uses the same mask. A Dropout used several times in
    one forward pass (``Seq2SeqModel``'s, on both embeddings) keeps every use's mask in ``masks``, in
    the order of the uses (reset by the next pass).
    """

    def __init__(self, p=0.5, seed=None):
        super().__init__()
        self.p = check_probability(p)
        self.rng = as_generator(seed)
        self.last_mask = None
        self.masks, self._masks_pass = [], None

    def forward(self, x):
        x = check_float_array(x, "input")
        out, cache = F.dropout_forward(x, self.p, self.training, self.rng)
        self.last_mask = cache.mask
        tag = self._last_tag                   # this forward's pass (nn.module): a new pass starts a new list
        if tag is None or tag[0] != self._masks_pass:
            self.masks, self._masks_pass = [], None if tag is None else tag[0]
        self.masks.append(cache.mask)
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        cache, shape, dtype = self._take()
        dout = check_grad(dout, "dout", shape, dtype)
        return F.dropout_backward(dout, cache)

    def extra_repr(self):
        return f"p={self.p}"


class TokenEmbedding(Module):
    """The seed design's token embedding: ``embedding(ids) * sqrt(d_model)``.

    Weights are drawn from N(0, 1/d_model) so the scaled output has unit variance (the seed design's
    health check: embedding std near 1).

    Parameters
    ----------
    vocab_size : int
        V.
    d_model : int
        D.
    dtype, seed : see :class:`Linear`
    """

    def __init__(self, vocab_size, d_model, dtype=np.float32, seed=None):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.dtype = dtype_of(dtype)
        self.embedding = Embedding(vocab_size, d_model, dtype=self.dtype, seed=seed)
        self.embedding.weight.data *= self.dtype.type(1.0 / math.sqrt(d_model))
        self.scale = self.dtype.type(math.sqrt(d_model))

    def forward(self, ids):
        """ids (B, S) -> (B, S, D)."""
        return self.embedding(ids) * self.scale                                  # (B, S, D)

    def backward(self, dout):
        """``y = E[ids] * sqrt(D)``: the gradient reaching the table is ``dout * sqrt(D)``."""
        return self.embedding.backward(dout * self.scale)


def sinusoidal_table(max_len, d_model, dtype=np.float64):
    """The fixed table ``pe[pos, 2i] = sin(pos / 10000^(2i/D))``, ``pe[pos, 2i+1] = cos(same)``: (max_len, D)."""
    position = np.arange(max_len, dtype=np.float64)[:, None]                     # (max_len, 1)
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))  # (ceil(D/2),)
    pe = np.zeros((max_len, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(position * div_term)                                    # even columns
    pe[:, 1::2] = np.cos(position * div_term[: d_model // 2])                    # odd columns
    return pe.astype(dtype)


class PositionalEncoding(Module):
    """Adds the fixed sinusoidal table: ``y = x + pe[:S]``. ``pe`` is a buffer (not in ``state_dict``,
    never a parameter, never given a gradient).

    Parameters
    ----------
    d_model : int
    max_len : int
        The longest sequence accepted; longer input raises ValueError.
    dtype : np.float32 or np.float64
    """

    def __init__(self, d_model, max_len=5000, dtype=np.float32):
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.max_len = check_positive_int(max_len, "max_len")
        self.dtype = dtype_of(dtype)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, self.dtype), persistent=False)

    def forward(self, x):
        """x (B, S, D) -> (B, S, D)."""
        x = check_float_input(x, "x", self.dtype, ndim=3, last_dim=self.d_model, shape_doc="(B, S, D)")
        s = x.shape[1]
        if s > self.max_len:
            raise ValueError(f"sequence length {s} exceeds PositionalEncoding max_len={self.max_len}; "
                             "build the model with a larger max_len")
        self._save(x.shape)
        return x + self.pe[:s]                                                   # (B, S, D) + (S, D)

    def backward(self, dout):
        """``y = x + pe``: pe is a constant, so ``dx = dout`` and the table gets nothing."""
        shape = self._take()
        return check_grad(dout, "dout", shape, self.dtype)


class LearnedPositionalEmbedding(Module):
    """Adds a trained table of positions: ``y[b, s] = x[b, s] + weight[offset + s]`` (GPT-2's ``wpe``,
    BERT's position embeddings; torch has no such class: an ``nn.Embedding`` looked up with
    ``arange(S)`` and added).

    Parameters
    ----------
    max_len : int
        The longest sequence (with ``offset``: the last position + 1) accepted; longer raises ValueError.
    d_model : int
    dtype : np.float32 or np.float64
    seed : int or numpy.random.Generator, optional
        ``weight`` is drawn from N(0, 1), as ``torch.nn.Embedding`` (the same draws as
        ``Embedding(max_len, d_model, seed=seed)``).

    Attributes
    ----------
    weight : Parameter (max_len, d_model)
        Row s is position s's vector; ``state_dict`` key ``weight``.
    """

    def __init__(self, max_len, d_model, dtype=np.float32, seed=None):
        super().__init__()
        self.max_len = check_positive_int(max_len, "max_len")
        self.d_model = check_positive_int(d_model, "d_model")
        self.dtype = dtype_of(dtype)
        self.weight = Parameter(as_generator(seed).standard_normal((max_len, d_model)).astype(self.dtype))

    def forward(self, x, offset=0):
        """x (B, S, D) -> x + weight[offset:offset + S] (B, S, D). ``offset``: the first position's index
        (a decoding step after ``offset`` cached positions)."""
        x = check_float_input(x, "x", self.dtype, ndim=3, last_dim=self.d_model, shape_doc="(B, S, D)")
        if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"offset must be a non-negative int, got {offset!r}")
        s = x.shape[1]
        if offset + s > self.max_len:
            raise ValueError(f"sequence length {s}" + (f" at offset {offset}" if offset else "")
                             + f" exceeds LearnedPositionalEmbedding max_len={self.max_len}; "
                             "build the module with a larger max_len")
        self._save((x.shape, int(offset)))
        return x + self.weight.data[offset:offset + s]                           # (B, S, D) + (S, D)

    def backward(self, dout):
        """``y[b, s] = x[b, s] + W[offset + s]``: ``dx = dout``, and W's row is broadcast over the batch, so
        its gradient is the batch sum ``dW[offset + s] = sum_b dout[b, s]`` (zero in the rows not used);
        accumulates ``weight.grad``."""
        shape, offset = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        dweight = np.zeros(self.weight.shape, dtype=self.dtype)                  # (max_len, D)
        dweight[offset:offset + shape[1]] = dout.sum(axis=0)                     # (S, D): shared by the batch
        self.weight.accumulate(dweight, owned=True)
        return dout

    def extra_repr(self):
        return f"max_len={self.max_len}, d_model={self.d_model}"
