"""The functional core: every Transformer-encoder op as a forward/backward pair.

Contract (cs231n's): ``OP_forward(...) -> (out, cache)`` and ``OP_backward(dout, cache) -> grads``.
The cache is a small ``NamedTuple`` holding exactly what the backward needs. Every backward sits right
after its forward and says, in its docstring, what the forward computed and why each gradient follows.

Shape letters: B batch, S query length, T key length, D model width, H heads, Dh head width,
F feed-forward width, V vocabulary, N any leading dimensions flattened.

Everything is vectorised NumPy (no Python loop over batch, heads or positions) and keeps the dtype of
its inputs: float32 stays float32, float64 stays float64.

One file per topic; the names in each file's ``__all__`` (the pairs and their caches) are re-exported here,
found, not listed (``numpy_transformer.functional.layer_norm_forward``; a new ``functional/<topic>.py`` needs
no edit here; ``_*.py`` are private; ``dtypes.py``'s ``as_scalar`` is the package's own helper):

================================  ==============================================================
``linear.py``                     ``linear_forward/backward``
``embedding.py``                  ``embedding_forward/backward``, ``embedding_renorm_`` (max_norm)
``norms.py``                      ``layer_norm_forward/backward``, ``rms_norm_forward/backward``
``activations.py``                ``relu_*``, ``gelu_*`` (kernels in :mod:`numpy_transformer.kernels`),
                                  ``silu_*``, ``sigmoid``
``feedforward.py``                ``gated_forward/backward`` (the gated feed-forwards) and each
                                  variant's pair on top (``swiglu_*``, ``geglu_*`` ...)
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
from ..utils.lazy import reexport

__all__ = reexport(__name__, globals())
__all__ += ["erf", "erfc"]            # the kernels' double-precision erf/erfc, offered beside GELU's ops
