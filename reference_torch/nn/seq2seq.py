"""Twin of ``numpy_transformer/nn/seq2seq.py``: ``Transformer``, the encoder-decoder, as
``torch.nn.Transformer`` (``state_dict`` keys ``encoder.*``, ``decoder.*``), built from the encoder and
decoder twins; and its entry of the torch table.
"""

from __future__ import annotations

import warnings

from torch import nn

from . import activations
from .decoder import TransformerDecoder, TransformerDecoderLayer
from .module import ReferenceModule
from .transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = ["Transformer", "torch_modules"]


class Transformer(ReferenceModule):
    """Twin of ``torch.nn.Transformer``: ``memory = encoder(src)``; ``decoder(tgt, memory)`` (each with a
    final LayerNorm unless custom). ``custom_encoder``/``custom_decoder`` as torch."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=True, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder.stack(
            TransformerEncoderLayer(*args, **kw), num_encoder_layers,
            nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder.stack(
            TransformerDecoderLayer(*args, **kw), num_decoder_layers,
            nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)


# --------------------------------------------------------------------------------------------------
# the torch table's entry (reference_torch.table.MODULES)
# --------------------------------------------------------------------------------------------------

def _transformer(m, twin=False, build=None):
    """torch's Transformer for ours: built by its own constructor (its encoder and decoder, final norms
    included), or with ``custom_encoder``/``custom_decoder`` for ours' custom parts."""
    enc, dec = m.encoder, m.decoder
    custom_enc, custom_dec = m.custom_parts
    layer = dec.layers[0] if not custom_dec else enc.layers[0]
    cls = Transformer if twin else nn.Transformer
    with warnings.catch_warnings():    # torch: "enable_nested_tensor is True, but ... norm_first was True"
        warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
        return cls(m.d_model, m.nhead, num_encoder_layers=len(enc.layers), num_decoder_layers=len(dec.layers),
                   dim_feedforward=layer.linear1.out_features, dropout=layer.dropout.p,
                   activation=activations.activation(layer.activation),
                   custom_encoder=build(enc, twin) if custom_enc else None,
                   custom_decoder=build(dec, twin) if custom_dec else None,
                   layer_norm_eps=layer.norm1.eps, batch_first=m.batch_first, norm_first=layer.norm_first,
                   bias=layer.linear1.bias is not None)


def torch_modules(build):
    """The table's entry; ``build(np_module, twin)`` builds any sub-module (the table's builder)."""
    return {"Transformer": lambda m, twin=False: _transformer(m, twin, build)}
