"""The demo's oracle: the same pipeline in PyTorch, same weights and dropout masks, autograd gradients.

Used by ``python -m numpy_transformer demo`` (imported lazily there; numpy_transformer never imports torch).
"""

from __future__ import annotations

import numpy as np
import torch

import numpy_transformer as nt

from ..nn.layers import Dropout
from ..nn.module import set_dropout_masks
from ..table import torch_module, twin


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


def torch_decoder_layer(block):
    """``torch.nn.TransformerDecoderLayer`` with ``block``'s weights, in its mode. With dropout its
    attention and dropout modules are replaced by the twins (``torch.nn.MultiheadAttention``'s and
    ``Dropout``'s, which replay ``block``'s last masks); the layer's own forward (residuals, norms,
    order) stays torch's. Returns ``(module, description)``."""
    tm = torch_module(block, "torch.nn")
    if block.dropout.p == 0:
        return tm, "torch.nn.TransformerDecoderLayer, torch's own modules (dropout 0)"
    for name in ("self_attn", "multihead_attn"):
        setattr(tm, name, twin(getattr(block, name)))
    for name in ("dropout", "dropout1", "dropout2", "dropout3"):
        setattr(tm, name, Dropout(getattr(block, name).p))
    set_dropout_masks(tm, nt.dropout_masks(block))
    return tm, ("torch.nn.TransformerDecoderLayer, its attention and dropouts the twins that replay our "
                "dropout masks")


def compare_decoder_demo(model, ids, memory, dy):
    """The decoder demo (TokenEmbedding -> PositionalEncoding -> TransformerDecoderLayer with the causal
    ``tgt_mask``, over ``memory``) again in PyTorch: compare the output, dL/dtgt (the block's target
    input), dL/dmemory and every parameter's gradient with the NumPy run just made.

    ``model`` must hold the gradients of its last forward/backward (inputs ``ids``, ``memory``,
    upstream gradient ``dy``) and its dropout masks.

    Returns
    -------
    (list of (name, max abs error, max relative error), the oracle's description)
    """
    block, oracle_name = torch_decoder_layer(model.decoder_block)
    parts = [("embedding", model.embedding, twin(model.embedding)),
             ("pos_encoding", model.pos_encoding, twin(model.pos_encoding)),
             ("decoder_block", model.decoder_block, block)]
    x = parts[1][2](parts[0][2](torch.from_numpy(np.asarray(ids))))
    x.retain_grad()                                                              # dL/dtgt
    mem = torch.from_numpy(np.array(memory)).requires_grad_(True)
    s = x.shape[1]
    causal = torch.nn.Transformer.generate_square_subsequent_mask(s, dtype=x.dtype)
    y = block(x, mem, tgt_mask=causal, tgt_is_causal=True)
    y.backward(torch.from_numpy(dy))
    rows = [("output", *_errors(model.decoder_block_output, y)),
            ("dL/dtgt (the block's target input)", *_errors(model.dtgt, x.grad)),
            ("dL/dmemory", *_errors(model.dmemory, mem.grad))]
    for name, module, ref in parts:
        ref_params = dict(ref.named_parameters())
        for pname, p in module.named_parameters():
            rows.append((f"{name}.{pname} (grad)", *_errors(p.grad, ref_params[pname].grad)))
    return rows, oracle_name
