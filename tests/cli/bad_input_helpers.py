"""Helpers shared by the bad-input tests (tests/cli/test_bad_input_*.py; not a test module): the small sizes
the modules are built with, ``expect`` (the exception type and the needles of its message), builders, and
the hypothesis draws of values that are not positive ints, probabilities or numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

import numpy_transformer as nt

seeds = st.integers(0, 2**31 - 1)
DT = np.float64                  # the modules' dtype in this file (float32 is covered by the dtype draws)
B, S, T, D, KD, VD, H, FF, V, MAXLEN = 2, 3, 4, 6, 4, 5, 2, 12, 7, 8


def message(info):
    """The exception's message (KeyError's str() adds quotes)."""
    return info.value.args[0] if isinstance(info.value, KeyError) else str(info.value)


def expect(exc_type, fn, *needles):
    """``fn()`` raises exactly ``exc_type`` (or a subclass) whose message contains every needle."""
    with pytest.raises(Exception) as info:
        fn()
    assert isinstance(info.value, exc_type), (
        f"expected {exc_type.__name__}, got {type(info.value).__name__}: {info.value}")
    msg = message(info)
    for n in needles:
        assert str(n) in msg, f"{n!r} not in the message: {msg}"
    return msg


def _randn(rng, *shape):
    return rng.standard_normal(shape)


def _layer():
    return nt.TransformerEncoderLayer(D, H, FF, dropout=0.3, dtype=DT, seed=5)


def _dec_layer():
    return nt.TransformerDecoderLayer(D, H, FF, dropout=0.3, dtype=DT, seed=5)


not_positive_ints = st.one_of(st.integers(-5, 0), st.floats(allow_nan=True), st.text(max_size=3), st.none(),
                              st.booleans())
not_probabilities = st.one_of(st.floats().filter(lambda p: not 0 <= p <= 1), st.text(max_size=3), st.none(),
                              st.booleans())


not_numbers = st.one_of(st.text(max_size=3), st.none(), st.booleans(), st.just(float("nan")), st.just([1.0]))
