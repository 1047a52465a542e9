"""Helpers shared by the gradcheck tests (tests/study/test_gradcheck_*.py; not a test module): a result that
must pass, boolean-mask draws, and values kept away from ReLU's kink.
"""

from __future__ import annotations

import numpy as np
from hypothesis.extra.numpy import arrays

from numpy_transformer.study.gradchecking import GradcheckResult


def _ok(result):
    assert isinstance(result, GradcheckResult)
    result.raise_if_failed()
    assert result.checks, "nothing was checked"
    return result


def _bool_mask(shape):
    return arrays(np.bool_, shape)


def _away_from_zero(x, margin=0.05):
    return np.where(x >= 0, x + margin, x - margin)
