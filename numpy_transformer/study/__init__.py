"""The study tools: the trace (:mod:`.trace`, subscribed to the hooks of
:mod:`numpy_transformer.nn.hooks`), the finite-difference gradient check
(:mod:`.gradcheck`), attention maps and plots, the ablation, the mixed-precision study.
"""

from ..utils.lazy import submodule_getattr

__getattr__ = submodule_getattr(__name__, globals())
