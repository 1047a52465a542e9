"""Mixed precision, as ``torch.amp``: :class:`GradScaler` (dynamic loss scaling) and
:class:`MixedPrecision` (a float16 working copy of a float32 model: float32 master weights in the
optimizer, the norms, the softmax and the loss in float32). See docs/mixed-precision.md.
"""

from ..utils.lazy import reexport

__all__ = reexport(__name__, globals())         # GradScaler, MixedPrecision, Float32Norm: the files' __all__
