"""The study tools: the trace (:mod:`.trace`, subscribed to the hooks of
:mod:`numpy_transformer.nn.hooks`), the finite-difference gradient check (the package
:mod:`.gradchecking`; ``nt.study.gradcheck`` is its function), attention maps and plots, the
ablation, the mixed-precision study.

Lazy: ``nt.study.X`` is a submodule, or a name from the ``__all__`` of the submodule that declares
it, imported on first use (:func:`numpy_transformer.utils.lazy.names_getattr`).
"""

from ..utils.lazy import names_getattr

__getattr__ = names_getattr(__name__, globals())
