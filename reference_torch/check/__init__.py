"""The checks against torch: the registry's modules against ``torch.nn`` (the checker,
``python -m reference_torch.check``), your own code against torch's autograd
(``nt.check_against_torch[_module]``), and the demo's comparison.

* :mod:`.checker` -- every module of the registry (``numpy_transformer.testing.MODULES``) on random
  configurations against ``torch.nn``'s own modules (and, with ``--twins``, the hand-written twins
  with dropout active): outputs and every gradient. Its names are re-exported here
  (``from reference_torch.check import compare``); ``python -m reference_torch.check`` runs
  :func:`~.checker.main` (``check/__main__.py``).
* :mod:`.user` and :mod:`.report` -- ``nt.check_against_torch`` and ``nt.check_against_torch_module``
  (reached through :mod:`numpy_transformer.oracle`) and their report.
* :mod:`.demo` -- ``python -m numpy_transformer demo``'s PyTorch pipeline.
"""

from . import checker
from .checker import *  # noqa: F401,F403  (the checker's public names, listed in its __all__)

__all__ = list(checker.__all__)
