"""The one registry of cases: every functional op (:data:`OPS`) and every module (:data:`MODULES`).

The tests (``tests/functional/test_functional_vs_torch.py``, ``tests/nn/test_modules_vs_torch.py``), the
``gradcheck`` report, the checker ``python -m reference_torch.check`` and the drill oracle all iterate
these tables; ``reference_torch.table`` holds the torch side under the same names (``OPS[name]``:
torch's own function, the one an op's case names (``OpCase.torch``) or, for an irregular op, its
adapter; ``MODULES[name]``: how to build torch's module from one of ours).

Adding an op: the one recipe is DEVELOPERS.md, "Adding an op, step by step" (an op's case here is
its step 3). Nothing else: the tests, the report and the checker pick the new entries up.
"""

from ..utils.lazy import reexport

#: the op draws (``op_draws.linear``, ``op_draws.gelu`` ...) are reached by their module's name
__all__ = reexport(__name__, globals(), skip=("op_draws",))
