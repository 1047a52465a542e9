"""The demo's oracle: the same pipeline in PyTorch, same weights and dropout masks, autograd gradients.

Used by ``python -m numpy_transformer demo`` (imported lazily there; numpy_transformer never imports torch).
"""

from __future__ import annotations

import numpy as np
import torch

import numpy_transformer as nt

from .convert import twin


def _errors(ours, ref):
    ref = ref.detach().numpy()
    abs_err = float(np.max(np.abs(ours - ref))) if ours.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return abs_err, (abs_err / scale if scale > 0 else abs_err)


def compare_demo(model, ids, dy):
    """Run ``model`` (the demo's TokenEmbedding -> PositionalEncoding -> TransformerEncoderLayer) again
    in PyTorch and compare the output and every parameter gradient with the NumPy run just made.

    ``model`` must hold the gradients of its last forward/backward (with input ``ids`` and upstream
    gradient ``dy``) and its dropout masks (``nt.dropout_masks``).

    Returns
    -------
    list of (name, max abs error, max relative error)
    """
    parts = [("embedding", model.embedding), ("pos_encoding", model.pos_encoding),
             ("encoder_block", model.encoder_block)]
    twins = {name: twin(module) for name, module in parts}
    twins["encoder_block"].set_dropout_masks(nt.dropout_masks(model.encoder_block))
    x = twins["embedding"](torch.from_numpy(np.asarray(ids)))
    x = twins["pos_encoding"](x)
    y = twins["encoder_block"](x)
    y.backward(torch.from_numpy(dy))
    ours_out = model.encoder_block_output
    rows = [("output", *_errors(ours_out, y))]
    for name, module in parts:
        ref_params = dict(twins[name].named_parameters())
        for pname, p in module.named_parameters():
            rows.append((f"{name}.{pname} (grad)", *_errors(p.grad, ref_params[pname].grad)))
    return rows
