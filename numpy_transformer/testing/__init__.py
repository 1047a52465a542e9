"""The one registry of cases: every functional op (:data:`OPS`) and every module (:data:`MODULES`).

The tests (``tests/functional/test_functional_vs_torch.py``, ``tests/nn/test_modules_vs_torch.py``), the
``gradcheck`` report, the checker ``python -m reference_torch.check`` and the drill oracle all iterate
these tables; ``reference_torch.table`` holds the torch side under the same names (``OPS[name]``:
torch's own function, the one an op's case names (``OpCase.torch``) or, for an irregular op, its
adapter; ``MODULES[name]``: how to build torch's module from one of ours).

Adding an op: the one recipe is DEVELOPERS.md, "Adding an op, step by step" (an op's case here is
its step 3). Nothing else: the tests, the report and the checker pick the new entries up.
"""

from .choosers import HypothesisChooser, RandomChooser
from .masks import CROSS_MASKS, FLASH_MASKS, SDPA_MASKS, SELF_MASKS, make_masks, sdpa_mask
from .modules import KINDS, MODULES, TWIN_KINDS, ModuleCase
from .ops import OPS, TOL, Draw, OpCase

__all__ = ["OPS", "MODULES", "KINDS", "TWIN_KINDS", "TOL", "OpCase", "ModuleCase", "Draw", "RandomChooser",
           "HypothesisChooser", "make_masks", "SELF_MASKS", "CROSS_MASKS", "SDPA_MASKS", "FLASH_MASKS", "sdpa_mask"]
