"""Choosers: one drawing code for a NumPy generator (the checker, the gradcheck report) and for
hypothesis (the tests, so that failures shrink to small configurations).

A registry entry draws its shapes and options through a chooser ``c`` (``c.integers(lo, hi)``,
``c.choice(options)``, ``c.boolean()``, ``c.log_uniform(lo, hi)``) and its array values from
``c.rng()``, a NumPy generator seeded by one drawn integer.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["RandomChooser", "HypothesisChooser"]


class RandomChooser:
    """Draws from a ``numpy.random.Generator``."""

    def __init__(self, rng):
        self._rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    def integers(self, lo, hi):
        """An int in [lo, hi] (both inclusive)."""
        return int(self._rng.integers(lo, hi + 1))

    def choice(self, options):
        return options[int(self._rng.integers(len(options)))]

    def boolean(self):
        return bool(self._rng.integers(2))

    def log_uniform(self, lo, hi):
        return float(10 ** self._rng.uniform(math.log10(lo), math.log10(hi)))

    def rng(self):
        """A generator for array values, seeded by one drawn integer."""
        return np.random.default_rng(self.integers(0, 2**32 - 1))


class HypothesisChooser(RandomChooser):
    """Draws through hypothesis' ``data.draw`` (hypothesis is imported only when it is used)."""

    def __init__(self, data):
        self.data = data

    def integers(self, lo, hi):
        from hypothesis import strategies as st
        return self.data.draw(st.integers(lo, hi))

    def choice(self, options):
        from hypothesis import strategies as st
        return self.data.draw(st.sampled_from(list(options)))

    def boolean(self):
        from hypothesis import strategies as st
        return self.data.draw(st.booleans())

    def log_uniform(self, lo, hi):
        from hypothesis import strategies as st
        return float(10 ** self.data.draw(st.floats(math.log10(lo), math.log10(hi))))
