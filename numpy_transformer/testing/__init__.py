"""The one registry of cases: every functional op (:data:`OPS`) and every module (:data:`MODULES`).

The tests (``tests/test_functional_vs_torch.py``, ``tests/test_modules_vs_torch.py``), the
``gradcheck`` report, the checker ``python -m reference_torch.check`` and the drill oracle all iterate
these tables; ``reference_torch.table`` holds the torch side under the same names (``OPS[name]``:
torch's own function, the one an op's case names (``OpCase.torch``) or, for an irregular op, its
adapter; ``MODULES[name]``: how to build torch's module from one of ours).

Adding an op, step by step:

1. its pair ``OP_forward``/``OP_backward`` in ``numpy_transformer/functional/<topic>.py`` (re-exported in
   ``functional/__init__.py``), and its module in ``numpy_transformer/nn/<topic>.py``;
2. one :class:`~.ops.OpCase` in :data:`OPS` (``testing/ops.py``: the pair, a ``draw`` over random shapes
   and options (``testing/op_draws.py``), the report's rows, and torch's function as a dotted string,
   ``torch="torch.nn.functional.<name>"``, with ``torch_args`` mapping the arguments) and one
   :class:`~.modules.ModuleCase` in :data:`MODULES` (``testing/modules.py``: ``draw``, ``build``; inputs
   and calls in ``make_inputs``/``call`` when the module's signature is new);
3. one entry in ``reference_torch/table.py``'s ``MODULES`` (torch's module); an op needs one in its
   ``ADAPTERS`` only when torch has no function for it (or one that needs more than a mapping);
4. its derivation section in ``docs/derivations.md`` (with a ``# check:`` block);
5. its drill (``numpy_transformer/drills/exercises/``) and its drill-oracle line.

Nothing else: the tests, the report and the checker pick the new entries up.
"""

from .choosers import HypothesisChooser, RandomChooser
from .masks import CROSS_MASKS, FLASH_MASKS, SDPA_MASKS, SELF_MASKS, make_masks, sdpa_mask
from .modules import KINDS, MODULES, TWIN_KINDS, ModuleCase
from .ops import OPS, TOL, Draw, OpCase

__all__ = ["OPS", "MODULES", "KINDS", "TWIN_KINDS", "TOL", "OpCase", "ModuleCase", "Draw", "RandomChooser",
           "HypothesisChooser", "make_masks", "SELF_MASKS", "CROSS_MASKS", "SDPA_MASKS", "FLASH_MASKS", "sdpa_mask"]
