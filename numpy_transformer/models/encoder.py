"""A whole sequence model: token embedding, positional encoding, a Transformer encoder and a vocabulary head.

``TransformerModel`` maps token ids (B, S) to logits (B, S, V)::

    x = embed(ids) * sqrt(D) + pos[:S]          # the embedding table is drawn from N(0, 1/D): unit std after scaling
    x = dropout(x)
    x = encoder(x, src_key_padding_mask, is_causal)   # num_layers blocks (+ a final LayerNorm when norm_first)
    logits = head(x)                            # (B, S, V)

Its ``state_dict`` keys are ``embed.weight``, ``pos_embed.weight`` (learned positions only),
``encoder.layers.{i}.…`` / ``encoder.norm.…`` exactly as ``torch.nn.TransformerEncoder``, and
``head.weight`` / ``head.bias``; :mod:`reference_torch.models.encoder` builds the PyTorch twin from it.
"""

from __future__ import annotations

import math

import numpy as np

from .. import functional as F
from ..nn import (
    Dropout,
    Embedding,
    LayerNorm,
    LearnedPositionalEmbedding,
    Linear,
    Module,
    ModuleList,
    PositionalEncoding,
    RelativePositionBias,
    TransformerBlock,
    TransformerEncoder,
    TransformerEncoderLayer,
    hooks,
)
from ..nn.activations import ACTIVATION_NAMES
from ..nn.recompute import backward_layer, run_layer
from ..utils.checks import (
    as_float_dtype,
    as_generator,
    check_grad,
    check_mask,
    check_positive_int,
    check_probability,
    check_token_batch,
)
from .score_bias import BIAS_POSITIONS, alibi_encoder_bias, position_scores, with_padding

__all__ = ["TransformerModel", "POS_ENCODINGS", "ACTIVATIONS", "alibi_encoder_bias", "check_model_options"]

#: the position schemes the encoder implements (the vocabulary of ``pos_encoding=``)
POS_ENCODINGS = ("sinusoidal", "learned", "relative", "alibi", "none")
ACTIVATIONS = ACTIVATION_NAMES              # the activations' one vocabulary (numpy_transformer.nn.activations)


def check_model_options(d_model, nhead, dropout, activation, pos_encoding, pos_encodings=POS_ENCODINGS):
    """The checks every whole model makes of its shared options; returns the validated ``dropout``.
    ``pos_encodings``: the schemes this model supports."""
    dropout = check_probability(dropout)
    if d_model % nhead != 0:
        raise ValueError(f"d_model must be divisible by nhead, got d_model={d_model} and nhead={nhead}")
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    if pos_encoding not in pos_encodings:
        raise ValueError(f"pos_encoding must be one of {pos_encodings}, got {pos_encoding!r}")
    return dropout


class ModelBase(Module):
    """What a whole model (:class:`TransformerModel`, :class:`~numpy_transformer.GPT`,
    :class:`~numpy_transformer.Seq2SeqModel`) adds to a Module: its size, and the generators its
    dropout masks come from (saved in checkpoints, so a resumed run draws the same masks)."""

    def num_parameters(self):
        return int(sum(p.data.size for p in self.parameters()))

    def generators(self):
        """``{module name: Generator}`` for every module that draws dropout masks (for exact resume)."""
        return {name: m.__dict__["rng"] for name, m in self.named_modules()
                if isinstance(m.__dict__.get("rng"), np.random.Generator)}

    @property
    def checkpoint(self):
        """Activation checkpointing of the layers (:mod:`numpy_transformer.nn.recompute`): the forward
        keeps each layer's input only, the backward recomputes the layer's forward; the gradients are
        the plain path's bit for bit. Set it at any time; it applies from the next forward."""
        return self.__dict__.get("_checkpoint", False)

    @checkpoint.setter
    def checkpoint(self, on):
        if not isinstance(on, (bool, np.bool_)):
            raise TypeError(f"checkpoint must be True or False, got {on!r}")
        object.__setattr__(self, "_checkpoint", bool(on))
        for stack in self._stacks():
            stack.checkpoint = bool(on)

    def _stacks(self):
        """The encoder/decoder stacks whose own ``checkpoint`` follows the model's (none: the model
        runs its layers itself)."""
        return ()


class TransformerModel(ModelBase):
    """Token ids (B, S) -> vocabulary logits (B, S, V) through an encoder stack.

    Parameters
    ----------
    vocab_size : int
        V.
    d_model : int
        D.
    nhead : int
        H; D must be divisible by H.
    num_layers : int
        Encoder blocks. Each block is initialised independently (torch's ``TransformerEncoder`` copies
        one template; independent draws train better and change nothing else).
    dim_feedforward : int
        F.
    dropout : float
        On the embedding sum and everywhere inside the encoder (including attention probabilities).
    max_len : int
        Longest sequence accepted (size of the positional table).
    activation : {"relu", "gelu", "silu"}
    norm_first : bool
        Pre-LN blocks, followed by a final LayerNorm (``encoder.norm``, or ``norm`` with a bias scheme).
    pos_encoding : {"sinusoidal", "learned", "relative", "alibi", "none"}
        The fixed sine/cosine table (a buffer, not in ``state_dict``), a trained table
        ``pos_embed.weight`` (max_len, D) drawn from N(0, 1) like the scaled token embedding (an
        :class:`~numpy_transformer.nn.LearnedPositionalEmbedding`), T5's
        learned relative bias on the attention scores (bidirectional buckets, one table
        ``relative_position_bias.*`` shared by the layers), ALiBi's fixed bias (symmetric,
        ``-slope * |i - j|``, for a bidirectional encoder; ``-slope * (i - j)`` with ``is_causal``), or
        nothing. The two bias schemes need a bias on the scores, which torch's encoder layer does not
        take: their layers are :class:`~numpy_transformer.nn.TransformerBlock` s (``layers.{i}.*``, the
        same maths as ``TransformerEncoderLayer`` with q/k/v/o projections; ``norm`` when pre-LN).
    dtype : np.float32 or np.float64
    seed : None, int or numpy.random.Generator
        Initialisation and every dropout mask derive from it.
    checkpoint : bool
        Activation checkpointing (not in torch's modules; ``torch.utils.checkpoint``'s idea): each layer
        keeps only its input and recomputes its forward in the backward. Same gradients bit for bit,
        about one layer's activations of memory instead of ``num_layers``, one more forward of time.
        Also an attribute (:attr:`ModelBase.checkpoint`); not part of ``config`` (it changes no result).
    """

    model_kind = "encoder"          # what a checkpoint records (numpy_transformer.training.kinds)

    def __init__(self, vocab_size, d_model=512, nhead=8, num_layers=1, dim_feedforward=2048, dropout=0.1,
                 max_len=5000, activation="relu", norm_first=False, pos_encoding="sinusoidal",
                 dtype=np.float32, seed=None, checkpoint=False):
        super().__init__()
        vocab_size = check_positive_int(vocab_size, "vocab_size")
        d_model = check_positive_int(d_model, "d_model")
        nhead = check_positive_int(nhead, "nhead")
        num_layers = check_positive_int(num_layers, "num_layers")
        dim_feedforward = check_positive_int(dim_feedforward, "dim_feedforward")
        max_len = check_positive_int(max_len, "max_len")
        dropout = check_model_options(d_model, nhead, dropout, activation, pos_encoding)
        self.dtype = as_float_dtype(dtype)
        self.config = dict(vocab_size=vocab_size, d_model=d_model, nhead=nhead, num_layers=num_layers,
                           dim_feedforward=dim_feedforward, dropout=dropout, max_len=max_len,
                           activation=activation, norm_first=bool(norm_first), pos_encoding=pos_encoding,
                           dtype=self.dtype.name)
        self.vocab_size, self.d_model, self.max_len = vocab_size, d_model, max_len
        self.pos_kind = pos_encoding
        rng = as_generator(seed)
        dt = self.dtype

        self.embed = Embedding(vocab_size, d_model, dtype=dt, seed=rng)
        self.embed.weight.data *= dt.type(1.0 / math.sqrt(d_model))      # N(0, 1/D): unit std once scaled
        self.scale = dt.type(math.sqrt(d_model))
        if pos_encoding == "learned":
            self.pos_embed = LearnedPositionalEmbedding(max_len, d_model, dtype=dt, seed=rng)
        elif pos_encoding == "sinusoidal":
            self.pos_encoding = PositionalEncoding(d_model, max_len=max_len, dtype=dt)
        elif pos_encoding == "relative":
            self.relative_position_bias = RelativePositionBias(nhead, bidirectional=True, dtype=dt, seed=rng)
        self.dropout = Dropout(dropout, seed=rng.spawn(1)[0])

        if pos_encoding in BIAS_POSITIONS:
            self.layers = ModuleList(TransformerBlock(d_model, nhead, dim_feedforward, dropout=dropout, ffn=activation,
                                                      norm_first=norm_first, dtype=dt, seed=rng)
                                     for _ in range(num_layers))
            self.norm = LayerNorm(d_model, dtype=dt) if norm_first else None
        else:
            def block():
                return TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                               batch_first=True, norm_first=norm_first, dtype=dt, seed=rng)
            template = block()
            self.encoder = TransformerEncoder(template, num_layers,
                                              norm=LayerNorm(d_model, dtype=dt) if norm_first else None,
                                              seed=rng.spawn(1)[0])
            for layer in list(self.encoder.layers)[1:]:          # independent draws for layers 1..L-1
                layer.load_state_dict(block().state_dict())
        self.head = Linear(d_model, vocab_size, dtype=dt, seed=rng)
        self.checkpoint = checkpoint

    def _stacks(self):
        return (self.encoder,) if self.pos_kind not in BIAS_POSITIONS else ()

    # ------------------------------------------------------------------------------------------
    def _check_ids(self, ids):
        ids = check_token_batch(ids, "ids", self.vocab_size)
        if ids.shape[1] > self.max_len:
            raise ValueError(f"sequence length {ids.shape[1]} exceeds max_len={self.max_len}; "
                             "build the model with a larger max_len")
        return ids

    def forward(self, ids, src_key_padding_mask=None, is_causal=False):
        """ids (B, S) integer in [0, V) -> logits (B, S, V).

        ``src_key_padding_mask``: (B, S), True = that position is padding (no query attends to it);
        ``is_causal``: position i attends only to positions <= i.
        """
        ids = self._check_ids(ids)
        b, s = ids.shape
        src_key_padding_mask = check_mask(src_key_padding_mask, "src_key_padding_mask", [(b, s)], self.dtype)
        x = self.embed(ids) * self.scale                                         # (B, S, D)
        if hooks.active():
            hooks.embedding(self.embed, x)           # "embed * sqrt(d_model)": std ~1 expected
        if self.pos_kind == "learned":
            x = self.pos_embed(x)                                                # (B, S, D) + (S, D)
        elif self.pos_kind == "sinusoidal":
            x = self.pos_encoding(x)                                             # (B, S, D)
        x = self.dropout(x)
        saved = None
        if self.pos_kind in BIAS_POSITIONS:
            x, saved = self._bias_layers(x, src_key_padding_mask, bool(is_causal))
        else:
            x = self.encoder(x, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        logits = self.head(x)                                                    # (B, S, V)
        self._save((logits.shape, saved))
        return logits

    def _bias_layers(self, x, src_key_padding_mask, is_causal):
        """The layers of a bias scheme: every layer adds the same (H, S, S) bias to its scores."""
        s = x.shape[1]
        bias, const = position_scores(self.pos_kind, self.config["nhead"], s, is_causal=is_causal,
                                      relative=getattr(self, "relative_position_bias", None), dtype=self.dtype)
        if src_key_padding_mask is not None:                  # True (or -inf) = padding: no query attends it
            keep = F.module_to_sdpa_mask(np.asarray(src_key_padding_mask))      # bool True = takes part
            const = with_padding(const, keep, self.dtype)                        # (B, 1, 1, S) or (B, H, S, S)
        saved = []
        for layer in self.layers:                      # checkpoint: each layer keeps only its input
            x, kept = run_layer(layer, self.checkpoint, x, attn_bias=bias, is_causal=is_causal, attn_mask=const)
            saved.append(kept)                                                   # x: (B, S, D)
        return (x if self.norm is None else self.norm(x)), saved

    def _bias_layers_backward(self, dx, saved):
        dx = dx if self.norm is None else self.norm.backward(dx)
        dbias = 0
        for layer, kept in reversed(list(zip(self.layers, saved))):
            if self.pos_kind == "relative":    # one table feeds every layer: the layers' gradients add
                dx, db = backward_layer(layer, kept, dx)
                dbias = dbias + db                                               # (H, S, S)
            else:
                dx = backward_layer(layer, kept, dx)
        if self.pos_kind == "relative":
            self.relative_position_bias.backward(dbias)
        return dx

    def backward(self, dlogits):
        """dlogits (B, S, V) -> None; accumulates every parameter's gradient."""
        shape, saved = self._take()
        dlogits = check_grad(dlogits, "dlogits", shape, self.dtype)
        dx = self.head.backward(dlogits)                                         # (B, S, D)
        dx = self._bias_layers_backward(dx, saved) if self.pos_kind in BIAS_POSITIONS else self.encoder.backward(dx)
        dx = self.dropout.backward(dx)
        if self.pos_kind == "learned":
            dx = self.pos_embed.backward(dx)                                     # dP: the batch sum
        elif self.pos_kind == "sinusoidal":
            dx = self.pos_encoding.backward(dx)
        self.embed.backward(dx * self.scale)                                     # y = E[ids] * sqrt(D)
        return None

    def extra_repr(self):
        c = self.config
        return (f"vocab_size={c['vocab_size']}, d_model={c['d_model']}, nhead={c['nhead']}, "
                f"num_layers={c['num_layers']}, pos_encoding={c['pos_encoding']!r}, dtype={c['dtype']}")
