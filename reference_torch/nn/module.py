"""The twins' base class, :class:`ReferenceModule`, and dropout-mask replay (the torch side of
``numpy_transformer/nn/module.py``).

Dropout replay
--------------
``numpy_transformer`` draws its dropout masks from NumPy generators; ``nt.dropout_masks(module)``
returns them as ``{module name: bool keep-mask}`` (``'dropout1'``, ``'self_attn'`` for the
attention-probability dropout, ``'layers.0.dropout'`` ...). Hand that dict to
:meth:`ReferenceModule.set_dropout_masks` (or :func:`set_dropout_masks`) and every twin applies
exactly the same masks as ``out = x * (mask * 1/(1-p))``, so gradients can be compared with dropout
active. Without a mask a twin draws one with torch's generator, like ``torch.nn.Dropout``.

A twin that applies dropout says so by a class attribute: ``replays_dropout = True`` (the
``Dropout`` twin, whose keep-mask is ``.mask``) or ``replays_attention_dropout = True`` (an attention
twin, whose attention-probability keep-mask is ``.dropout_mask``).
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import torch
from torch import nn

__all__ = ["ReferenceModule", "as_tensor", "set_dropout_masks", "clear_dropout_masks"]


def as_tensor(x, device=None, dtype=None):
    """``x`` (ndarray, tensor or None) as a tensor; NumPy arrays are converted without changing dtype."""
    if x is None:
        return None
    if not isinstance(x, torch.Tensor):
        x = torch.from_numpy(np.ascontiguousarray(x))
    if device is not None or dtype is not None:
        x = x.to(device=device, dtype=dtype if dtype is not None else x.dtype)
    return x


class ReferenceModule(nn.Module):
    """Base of the twins: adds dropout-mask replay to ``nn.Module``."""

    def set_dropout_masks(self, masks: Optional[Mapping], strict: bool = True):
        """Use ``masks`` (``{module name: bool keep-mask}``, as ``nt.dropout_masks``) from now on.

        See :func:`set_dropout_masks`. Returns ``self``.
        """
        set_dropout_masks(self, masks, strict=strict)
        return self

    def clear_dropout_masks(self):
        """Forget replayed masks: dropout draws fresh masks with torch's generator again."""
        clear_dropout_masks(self)
        return self


def _replay_targets(module):
    """``{name: module}`` of every sub-module that applies dropout: those that say so by a class
    attribute, ``replays_dropout`` (the :class:`~reference_torch.nn.layers.Dropout` twin: its ``mask``)
    or ``replays_attention_dropout`` (the attention twins: their ``dropout_mask``)."""
    return {name: m for name, m in module.named_modules()
            if getattr(m, "replays_dropout", False) or getattr(m, "replays_attention_dropout", False)}


def set_dropout_masks(module: nn.Module, masks: Optional[Mapping], strict: bool = True):
    """Make every dropout inside ``module`` replay the matching keep-mask of ``masks``.

    Parameters
    ----------
    module : nn.Module
        A twin (or a tree containing twins).
    masks : dict ``{name: bool ndarray or tensor}`` or None
        Names as ``module.named_modules()`` (the same names ``nt.dropout_masks`` uses, since the twins
        have the NumPy modules' layout). A ``MultiheadAttention``'s own name addresses its
        attention-probability dropout, shape (B, H, S, T). Dropouts not named get no mask (they draw
        fresh ones); ``None`` clears every mask.
    strict : bool
        Raise ``KeyError`` for a name that is no dropout of ``module`` (a typo would otherwise leave
        dropout drawing random masks and the comparison failing far from the cause).
    """
    targets = _replay_targets(module)
    masks = {} if masks is None else dict(masks)
    unknown = sorted(set(masks) - set(targets))
    if strict and unknown:
        raise KeyError(f"dropout masks for unknown modules {unknown}; this module's dropouts are "
                       f"{sorted(targets)}")
    for name, m in targets.items():
        mask = masks.get(name)
        mask = None if mask is None else as_tensor(mask)
        if mask is not None and mask.dtype != torch.bool:
            raise TypeError(f"masks[{name!r}] must be a bool keep-mask, got dtype {mask.dtype}")
        if getattr(m, "replays_dropout", False):
            m.mask = mask
        else:
            m.dropout_mask = mask


def clear_dropout_masks(module: nn.Module):
    """Remove every replayed mask inside ``module``."""
    set_dropout_masks(module, None)
