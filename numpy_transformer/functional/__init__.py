"""The functional core: every Transformer-encoder op as a forward/backward pair.

Contract (cs231n's): ``OP_forward(...) -> (out, cache)`` and ``OP_backward(dout, cache) -> grads``.
The cache is a small ``NamedTuple`` holding exactly what the backward needs. Every backward sits right
after its forward and says, in its docstring, what the forward computed and why each gradient follows.

Shape letters: B batch, S query length, T key length, D model width, H heads, Dh head width,
F feed-forward width, V vocabulary, N any leading dimensions flattened.

Everything is vectorised NumPy (no Python loop over batch, heads or positions) and keeps the dtype of
its inputs: float32 stays float32, float64 stays float64.

One file per topic (each re-exported here, so ``numpy_transformer.functional.layer_norm_forward``
is the import path):

================================  ==============================================================
``linear.py``                     ``linear_forward/backward``
``embedding.py``                  ``embedding_forward/backward``, ``embedding_renorm_`` (max_norm)
``norms.py``                      ``layer_norm_forward/backward``, ``rms_norm_forward/backward``
``activations.py``                ``relu_*``, ``gelu_*`` (kernels in :mod:`numpy_transformer.kernels`),
                                  ``silu_*``, ``sigmoid``
``feedforward.py``                ``swiglu_forward/backward`` (the gated feed-forward)
``softmax.py``                    ``softmax_forward/backward``
``loss.py``                       ``cross_entropy_forward/backward`` (torch's layout: class axis at dim 1)
``dropout.py``                    ``dropout_forward/backward``
``masks.py``                      ``causal_mask``, ``module_to_sdpa_mask``, ``merge_masks``
``attention.py``                  ``scaled_dot_product_attention_forward/backward``
``multi_head_attention.py``       ``multi_head_attention_forward/backward``
``tiled_attention.py``            ``flash_attention_forward/backward`` (memory linear in S)
``rope.py``                       ``rope_forward/backward``, ``rope_cos_sin``, ``rope_apply`` (rotary)
``position_bias.py``              ``alibi_bias``, ``alibi_slopes`` (no backward: no parameters),
                                  ``relative_position_bucket``, ``relative_position_bias_forward/backward``
================================  ==============================================================
"""

from ..kernels.erf import erf, erfc
from ._dtypes import _scalar
from .activations import GeluCache, ReluCache, gelu_backward, gelu_forward, relu_backward, relu_forward
from .activations import SiluCache, sigmoid, silu_backward, silu_forward
from .attention import (AttentionCache, _softmax_grad_rows, scaled_dot_product_attention_backward,
                        scaled_dot_product_attention_forward)
from .dropout import DropoutCache, dropout_backward, dropout_forward
from .embedding import EmbeddingCache, embedding_backward, embedding_forward, embedding_renorm_
from .feedforward import SwigluCache, swiglu_backward, swiglu_forward
from .linear import LinearCache, linear_backward, linear_forward
from .loss import CrossEntropyCache, cross_entropy_backward, cross_entropy_forward, log_softmax
from .masks import _additive, causal_mask, check_causal_hint, is_causal_mask, merge_masks, module_to_sdpa_mask
from .multi_head_attention import (MultiHeadAttentionCache, _merge_heads, _split_heads,
                                   multi_head_attention_backward, multi_head_attention_forward)
from .norms import (LayerNormCache, RMSNormCache, layer_norm_backward, layer_norm_forward, rms_norm_backward,
                    rms_norm_forward)
from .rope import RopeCache, rope_apply, rope_backward, rope_cos_sin, rope_forward
from .position_bias import (RelativePositionBiasCache, alibi_bias, alibi_slopes, relative_position_bias_backward,
                            relative_position_bias_forward, relative_position_bucket, relative_positions)
from .softmax import SoftmaxCache, _softmax_inplace, softmax_backward, softmax_forward
from .tiled_attention import FlashAttentionCache, flash_attention_backward, flash_attention_forward

__all__ = [
    "linear_forward", "linear_backward",
    "embedding_forward", "embedding_backward", "embedding_renorm_",
    "layer_norm_forward", "layer_norm_backward",
    "rms_norm_forward", "rms_norm_backward",
    "softmax_forward", "softmax_backward", "log_softmax",
    "cross_entropy_forward", "cross_entropy_backward",
    "relu_forward", "relu_backward",
    "gelu_forward", "gelu_backward",
    "silu_forward", "silu_backward", "sigmoid",
    "swiglu_forward", "swiglu_backward",
    "dropout_forward", "dropout_backward",
    "scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward",
    "multi_head_attention_forward", "multi_head_attention_backward",
    "flash_attention_forward", "flash_attention_backward",
    "rope_forward", "rope_backward", "rope_cos_sin", "rope_apply",
    "alibi_slopes", "alibi_bias", "relative_positions", "relative_position_bucket",
    "relative_position_bias_forward", "relative_position_bias_backward",
    "merge_masks", "causal_mask", "module_to_sdpa_mask", "is_causal_mask", "check_causal_hint", "erf", "erfc",
]
