"""PyTorch twin of :class:`numpy_transformer.TransformerModel`, with dropout-mask replay.

``TorchTransformerModel`` is built from ``torch.nn`` parts (``nn.Embedding``, ``nn.TransformerEncoder``
of ``nn.TransformerEncoderLayer``, ``nn.Linear``), so its ``state_dict`` has exactly the NumPy model's
keys and the weights move both ways unchanged (:func:`to_torch`, :func:`from_torch`).

``forward(ids, ..., dropout_masks=None)`` has two paths:

* ``dropout_masks=None``: torch's own modules (``nn.TransformerEncoder.forward``; dropout from torch's
  generator). With dropout off this is the independent reference for the NumPy forward.
* ``dropout_masks={name: bool keep-mask}`` (what ``nt.dropout_masks(model)`` returns after a NumPy
  forward): the same maths written out with autograd ops on the same parameters, every dropout
  replaced by ``x * (mask * 1/(1-p))`` with the NumPy model's mask. The test suite checks that this
  path equals the torch-module path when dropout is off, so replay adds nothing but the masks.

:class:`TorchTwin` wraps a twin with its torch optimizer and loss and takes training steps in lockstep
with a NumPy model (``train --check-torch``, through the Trainer callback :mod:`reference_torch.lockstep`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import numpy_transformer as nt
from numpy_transformer.models.score_bias import BIAS_POSITIONS

from ..convert import numpy_dtype, torch_dtype
from ..nn import block as RB
from ..nn.activations import activation
from ..nn.module import set_dropout_masks
from ..nn.position_bias import RelativePositionBias, alibi_bias

_activation_fn = activation    # for __init__, whose ``activation`` argument shadows the function

__all__ = ["TorchTransformerModel", "to_torch", "from_torch", "TorchTwin", "torch_dtype"]


class TorchTransformerModel(nn.Module):
    """Token ids (B, S) -> logits (B, S, V); the same constructor arguments as ``nt.TransformerModel``."""

    def __init__(self, vocab_size, d_model=512, nhead=8, num_layers=1, dim_feedforward=2048, dropout=0.1,
                 max_len=5000, activation="relu", norm_first=False, pos_encoding="sinusoidal",
                 dtype=torch.float32):
        super().__init__()
        if isinstance(dtype, (str, np.dtype, type)) and not isinstance(dtype, torch.dtype):
            dtype = torch_dtype(dtype)
        kw = dict(dtype=dtype)
        self.config = dict(vocab_size=vocab_size, d_model=d_model, nhead=nhead, num_layers=num_layers,
                           dim_feedforward=dim_feedforward, dropout=dropout, max_len=max_len,
                           activation=activation, norm_first=norm_first, pos_encoding=pos_encoding,
                           dtype=numpy_dtype(dtype).name)
        self.d_model, self.nhead, self.p = d_model, nhead, dropout
        self.embed = nn.Embedding(vocab_size, d_model, **kw)
        self.pos_kind = pos_encoding
        if pos_encoding == "learned":
            self.pos_embed = nn.Embedding(max_len, d_model, **kw)
        elif pos_encoding == "sinusoidal":
            pe = torch.from_numpy(nt.sinusoidal_table(max_len, d_model, np.float64)).to(dtype)
            self.register_buffer("pe", pe, persistent=False)
        elif pos_encoding == "relative":
            self.relative_position_bias = RelativePositionBias(nhead, bidirectional=True).to(dtype)
        self.dropout = nn.Dropout(dropout)
        if pos_encoding in BIAS_POSITIONS:       # nt.TransformerBlock layers (a bias on the scores)
            self.layers = nn.ModuleList(RB.TransformerBlock(d_model, nhead, dim_feedforward, None, dropout, activation,
                                                            "layernorm", norm_first, True, 1e-5, dtype=dtype)
                                        for _ in range(num_layers))
            self.norm = nn.LayerNorm(d_model, **kw) if norm_first else None
        else:
            layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                               activation=_activation_fn(activation), batch_first=True,
                                               norm_first=norm_first, **kw)
            self.encoder = nn.TransformerEncoder(layer, num_layers,
                                                 norm=nn.LayerNorm(d_model, **kw) if norm_first else None,
                                                 enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab_size, **kw)

    # ------------------------------------------------------------------------------------------
    def _embed(self, ids):
        s = ids.shape[1]
        x = self.embed(ids) * math.sqrt(self.d_model)
        if self.pos_kind == "learned":
            return x + self.pos_embed(torch.arange(s))
        if self.pos_kind == "sinusoidal":
            return x + self.pe[:s]
        return x

    def forward(self, ids, src_key_padding_mask=None, is_causal=False, dropout_masks=None):
        ids = torch.as_tensor(np.asarray(ids)) if not isinstance(ids, torch.Tensor) else ids
        kpm = None if src_key_padding_mask is None else torch.as_tensor(np.asarray(src_key_padding_mask))
        if self.pos_kind in BIAS_POSITIONS:
            return self._bias_forward(ids, kpm, bool(is_causal), dropout_masks)
        if dropout_masks is None:
            x = self.dropout(self._embed(ids))
            mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], dtype=x.dtype) if is_causal else None
            x = self.encoder(x, mask=mask, src_key_padding_mask=kpm, is_causal=bool(is_causal))
            return self.head(x)
        return self._replay_forward(ids, kpm, bool(is_causal), dropout_masks)

    def _bias_forward(self, ids, kpm, is_causal, masks):
        """The bias schemes' path (``layers`` of block twins, which replay their masks themselves)."""
        x = self._embed(ids)
        x = self.dropout(x) if masks is None else self._drop(x, masks, "dropout", self.p)
        b, s, _ = x.shape
        set_dropout_masks(self.layers, None if masks is None else
                          {k[len("layers."):]: v for k, v in masks.items() if k.startswith("layers.")})
        bias = const = None
        if self.pos_kind == "relative":
            bias = self.relative_position_bias(s, s)                                  # (H, S, S), learned
        elif is_causal:
            const = alibi_bias(self.nhead, s, s, x.dtype)
        else:                                          # symmetric for a bidirectional encoder: -m |i - j|
            const = -alibi_bias(self.nhead, s, s, x.dtype).abs()
        if kpm is not None:
            kp = (torch.zeros(b, s, dtype=x.dtype).masked_fill(kpm, -math.inf) if kpm.dtype == torch.bool
                  else kpm.to(x.dtype)).reshape(b, 1, 1, s)
            const = kp if const is None else const + kp
        for layer in self.layers:
            x = layer(x, attn_bias=bias, is_causal=is_causal, attn_mask=const)
        if self.norm is not None:
            x = self.norm(x)
        return self.head(x)

    # -- the same maths, written out, with given dropout masks -----------------------------------
    def _drop(self, x, masks, name, p):
        if not self.training or p == 0.0:
            return x
        if name not in masks:
            raise KeyError(f"no dropout mask for {name!r} (have {sorted(masks)})")
        m = torch.as_tensor(np.asarray(masks[name]))
        scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
        return x * (m.to(x.dtype) * scale)

    def _attention(self, attn, x, add_mask, masks, name):
        b, s, d = x.shape
        h, dh = self.nhead, d // self.nhead
        q, k, v = F.linear(x, attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)     # (B, S, D) each
        q, k, v = (t.reshape(b, s, h, dh).transpose(1, 2) for t in (q, k, v))             # (B, H, S, Dh)
        scores = (q * (1.0 / math.sqrt(dh))) @ k.transpose(-1, -2)                          # (B, H, S, S)
        if add_mask is not None:
            scores = scores + add_mask
        probs = torch.softmax(scores, dim=-1)
        probs = torch.nan_to_num(probs, nan=0.0)                   # rows with every key masked: zeros
        probs = self._drop(probs, masks, name, attn.dropout)
        ctx = (probs @ v).transpose(1, 2).reshape(b, s, d)                                 # (B, S, D)
        return attn.out_proj(ctx)

    def _layer(self, layer, x, add_mask, masks, prefix):
        p = layer.dropout.p
        act = activation(self.config["activation"])

        def sa(y):
            out = self._attention(layer.self_attn, y, add_mask, masks, f"{prefix}.self_attn")
            return self._drop(out, masks, f"{prefix}.dropout1", p)

        def ff(y):
            hdn = self._drop(act(layer.linear1(y)), masks, f"{prefix}.dropout", p)
            return self._drop(layer.linear2(hdn), masks, f"{prefix}.dropout2", p)

        if layer.norm_first:
            x = x + sa(layer.norm1(x))
            return x + ff(layer.norm2(x))
        x = layer.norm1(x + sa(x))
        return layer.norm2(x + ff(x))

    def _replay_forward(self, ids, kpm, is_causal, masks):
        x = self._drop(self._embed(ids), masks, "dropout", self.p)
        b, s, _ = x.shape
        add = None
        if is_causal:
            add = torch.zeros(s, s, dtype=x.dtype).masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), -math.inf)
        if kpm is not None:
            kp = (torch.zeros(b, s, dtype=x.dtype).masked_fill(kpm, -math.inf) if kpm.dtype == torch.bool
                  else kpm.to(x.dtype)).reshape(b, 1, 1, s)
            add = kp if add is None else add + kp
        for i, layer in enumerate(self.encoder.layers):
            x = self._layer(layer, x, add, masks, f"encoder.layers.{i}")
        if self.encoder.norm is not None:
            x = self.encoder.norm(x)
        return self.head(x)


def to_torch(model):
    """A ``TorchTransformerModel`` with ``model``'s configuration, weights and train/eval mode."""
    cfg = dict(model.config)
    twin = TorchTransformerModel(**{**cfg, "dtype": torch_dtype(cfg["dtype"])})
    twin.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()})
    twin.train(model.training)
    return twin


def from_torch(module, seed=None):
    """An ``nt.TransformerModel`` with ``module``'s configuration, weights and train/eval mode."""
    model = nt.TransformerModel(**{**module.config, "dtype": np.dtype(module.config["dtype"])}, seed=seed)
    model.load_state_dict({k: v.detach().cpu().numpy() for k, v in module.state_dict().items()})
    model.train(module.training)
    return model


class TorchTwin:
    """A torch twin of a NumPy model, trained in lockstep with it.

    Parameters
    ----------
    model : nt.TransformerModel
        Copied (weights, mode) at construction.
    optimizer : str
        ``"adam"``, ``"adamw"`` or ``"sgd"``; ``optim_kwargs`` go to the torch optimizer.
    ignore_index, label_smoothing : the loss's options.
    module, forward : optional
        Another model kind's twin (already holding ``model``'s weights) and its training forward
        ``forward(module, src, tgt, masks) -> (logits, targets)``, the masks replayed
        (:mod:`reference_torch.lockstep` passes them for ``seq2seq`` and ``gpt``). Default: the
        encoder model's twin, ``to_torch(model)``.
    """

    def __init__(self, model, optimizer, optim_kwargs, ignore_index=-100, label_smoothing=0.0, module=None,
                 forward=None):
        self.module = to_torch(model) if module is None else module
        self.forward = forward
        cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[optimizer]
        self.optimizer = cls(self.module.parameters(), **optim_kwargs)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def load_optimizer_state(self, model, optimizer):
        """Copy an ``nt.optim`` optimizer's per-parameter state (matched by parameter name), so a
        resumed run's twin continues from the same moments/momentum buffers."""
        tparams = dict(self.module.named_parameters())
        for name, p in model.named_parameters():
            s = optimizer.state.get(id(p))
            if not s:
                continue
            tp = tparams[name]
            self.optimizer.state[tp] = {
                k: (torch.tensor(float(v), dtype=torch.float32) if k == "step"
                    else torch.from_numpy(np.array(v, dtype=np.asarray(v).dtype)).to(tp.dtype))
                for k, v in s.items()}

    def step(self, ids, targets, masks, lr=None, clip=None, src_key_padding_mask=None, is_causal=False):
        """One training step on the batch the NumPy model just saw, replaying its ``masks``; returns the loss."""
        self.module.train()
        if lr is not None:
            for g in self.optimizer.param_groups:
                g["lr"] = lr
        self.optimizer.zero_grad()
        if self.forward is None:
            logits = self.module(ids, src_key_padding_mask, is_causal, dropout_masks=masks)
        else:
            logits, targets = self.forward(self.module, ids, targets, masks)
        v = logits.shape[-1]
        loss = F.cross_entropy(logits.reshape(-1, v), torch.as_tensor(np.asarray(targets)).reshape(-1),
                               ignore_index=self.ignore_index, label_smoothing=self.label_smoothing)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(self.module.parameters(), clip)
        self.optimizer.step()
        return float(loss.detach())

    def weight_errors(self, model):
        """``(max abs, max normwise relative)`` difference between the twin's and ``model``'s weights."""
        worst_abs, worst_rel = 0.0, 0.0
        ours = model.state_dict()
        for k, v in self.module.state_dict().items():
            ref = v.detach().cpu().numpy().astype(np.float64)
            diff = float(np.max(np.abs(np.asarray(ours[k], dtype=np.float64) - ref))) if ref.size else 0.0
            scale = float(np.max(np.abs(ref))) if ref.size else 0.0
            worst_abs = max(worst_abs, diff)
            worst_rel = max(worst_rel, diff / scale if scale > 0 else diff)
        return worst_abs, worst_rel
