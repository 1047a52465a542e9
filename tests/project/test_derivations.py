"""docs/derivations.md is executable: every ```python block there is run and checked against our code.

Convention (stated at the top of the doc): a block starts with ``# check: NAME``, runs in a fresh
namespace holding only ``np`` and ``F`` (numpy_transformer.functional), and defines functions; the
check registered under NAME (tests/project/derivation_checks_*.py) calls them on random float64
inputs and compares with the library to a normwise relative 1e-12 (the residual check uses finite differences, to 1e-8).

Meta-tests make the doc trustworthy:
* every block has a check and every check a block (no block silently skipped);
* every check *fails* when the block's outputs are perturbed by one part in a million (no check
  passes vacuously);
* every ``*_backward`` in ``functional.__all__`` is linked from the doc;
* links, excerpts, anchors and the contents: tests/project/test_derivations_doc_structure.py.
"""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

import numpy_transformer.functional as F

# the check modules fill CHECKS as they are imported
from tests.project import derivation_checks_decoder, derivation_checks_layers, derivation_checks_ops  # noqa: F401
from tests.project.derivation_registry import CHECKS, doc_blocks, doc_text, run_block

# --------------------------------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------------------------------

def test_every_block_is_checked():
    blocks = doc_blocks()
    assert blocks, "no ```python block found in docs/derivations.md"
    unlabeled = [line for label, _, line in blocks if label is None]
    assert not unlabeled, f"blocks without a '# check: NAME' first line at doc lines {unlabeled}"
    labels = [label for label, _, _ in blocks]
    dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
    assert not dupes, f"labels used by more than one block: {dupes}"
    assert set(labels) == set(CHECKS), (f"blocks without a check: {sorted(set(labels) - set(CHECKS))}; "
                                        f"checks without a block: {sorted(set(CHECKS) - set(labels))}")


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_block(label):
    CHECKS[label](run_block(label))


def _perturbed(obj, rng):
    if isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
        scale = float(np.max(np.abs(obj))) if obj.size and np.all(np.isfinite(obj)) else 1.0
        return obj + 1e-6 * (scale or 1.0) * rng.standard_normal(obj.shape)
    if isinstance(obj, (float, np.floating)) and np.isfinite(obj):
        return obj + 1e-6 * (abs(obj) or 1.0)
    if isinstance(obj, tuple):
        return tuple(_perturbed(o, rng) for o in obj)
    if isinstance(obj, list):
        return [_perturbed(o, rng) for o in obj]
    if isinstance(obj, dict):
        return {k: _perturbed(o, rng) for k, o in obj.items()}
    return obj


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_check_fails_on_perturbed_block(label):
    """Each check must notice when the block's functions return values off by one part in 1e6."""
    ns = run_block(label)
    rng = np.random.default_rng(0)
    defined = [name for name, obj in ns.items() if isinstance(obj, types.FunctionType)
               and obj.__module__ == ns["__name__"]]
    assert defined, f"block {label!r} defines no function"
    for name in defined:
        fn = ns[name]
        ns[name] = lambda *a, _fn=fn, **k: _perturbed(_fn(*a, **k), rng)
    with pytest.raises(AssertionError):
        CHECKS[label](ns)


# Backwards whose section is owed by someone else; remove the entry when the section lands.
PENDING = {}


def test_every_backward_is_documented():
    text = doc_text()
    backwards = [n for n in F.__all__ if n.endswith("_backward") and n not in PENDING]
    assert backwards
    missing = [n for n in backwards if not re.search(rf"\[`{n}`\]\(\.\./numpy_transformer/functional/\w+\.py\)", text)]
    assert not missing, f"functional backward(s) not linked from docs/derivations.md: {missing}"
