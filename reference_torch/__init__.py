"""The PyTorch oracle for ``numpy_transformer``: readable twins of its modules (autograd gradients),
weight/gradient/dropout-mask conversion, and the checker ``python -m reference_torch.check``.

Needs torch; ``numpy_transformer`` itself never imports this package (only lazily, where a CLI offers it).
"""

from .convert import (from_torch, grads_to_numpy, masks_to_torch, state_dict_to_numpy, state_dict_to_torch,
                      to_torch, twin)
from .modules import (Dropout, Encoder, EncoderBlock, FeedForward, MultiHeadAttention, PositionalEncoding,
                      ReferenceModule, TokenEmbedding, attention, clear_dropout_masks, merge_masks,
                      set_dropout_masks)

__all__ = [
    "Dropout", "Encoder", "EncoderBlock", "FeedForward", "MultiHeadAttention", "PositionalEncoding",
    "ReferenceModule", "TokenEmbedding", "attention", "clear_dropout_masks", "merge_masks", "set_dropout_masks",
    "from_torch", "grads_to_numpy", "masks_to_torch", "state_dict_to_numpy", "state_dict_to_torch", "to_torch",
    "twin",
]
