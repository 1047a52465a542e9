"""The registry behind tests/project/test_derivations.py (not a test module): the ```python blocks of
docs/derivations.md, extracted and run in a fresh namespace, and ``CHECKS``, filled by the ``@check(NAME)``
functions of tests/project/derivation_checks_*.py.
"""

from __future__ import annotations

import re

import numpy as np
from _compare import assert_close
from _paths import REPO_ROOT

import numpy_transformer.functional as F

ROOT = REPO_ROOT
DOC = ROOT / "docs" / "derivations.md"
TOL = 1e-12                    # float64, normwise relative
FD_TOL = 1e-8                  # Richardson-extrapolated central differences


# --------------------------------------------------------------------------------------------------
# block extraction and execution
# --------------------------------------------------------------------------------------------------

_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_LABEL = re.compile(r"#\s*check:\s*(\w+)\s*$")


def doc_text():
    return DOC.read_text(encoding="utf-8")


def doc_blocks():
    """[(label or None, source, line number)] for every ```python block, in order."""
    text = doc_text()
    out = []
    for m in _BLOCK.finditer(text):
        src = m.group(1)
        first = src.splitlines()[0] if src.strip() else ""
        label = _LABEL.match(first.strip())
        out.append((label.group(1) if label else None, src, text.count("\n", 0, m.start(1)) + 1))
    return out


def run_block(label):
    """Execute the block named ``label`` in a fresh namespace; return the namespace."""
    matches = [(src, line) for lab, src, line in doc_blocks() if lab == label]
    assert len(matches) == 1, f"expected exactly one block '# check: {label}', found {len(matches)}"
    src, line = matches[0]
    ns = {"np": np, "F": F, "__name__": f"derivations_{label}"}
    code = compile("\n" * (line - 1) + src, str(DOC), "exec")        # tracebacks point at the doc
    exec(code, ns)
    return ns


CHECKS = {}


def check(label):
    def register(fn):
        assert label not in CHECKS, label
        CHECKS[label] = fn
        return fn
    return register


def close(context=None, tol=TOL, **pairs):
    assert_close(pairs, tol=tol, context=f"{context}: " if context else "")


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _mha_params(rng, d):
    return (rng.standard_normal((3 * d, d)) / np.sqrt(d), rng.standard_normal(3 * d),
            rng.standard_normal((d, d)) / np.sqrt(d), rng.standard_normal(d))
