"""The random upstream gradient ``dout`` of every checker, drawn from a stream of its own.

Every checker here (``nt.gradcheck``, ``nt.gradcheck_module``, ``nt.check_against_torch[_module]``, the
``gradcheck`` report, the drill grader) differentiates ``L = sum(dout * f(x))`` for a random ``dout``.
Where that ``dout`` comes from matters. The natural choice, ``np.random.default_rng(seed)`` with the
default ``seed=0``, is the very stream a user (and these docs) draw their inputs from: with ``x =
np.random.default_rng(0).standard_normal(shape)`` and an output of ``x``'s shape, ``dout == x`` bit for
bit. A backward that uses ``x`` where it should use ``dout`` then returns the right numbers, and so
does a transposed weight gradient (``dout.T @ x`` is symmetric when ``dout == x``): the check passes
on a wrong backward.

So ``dout`` is drawn from ``SeedSequence(seed, spawn_key=(UPSTREAM_SPAWN_KEY,))``: a child stream of
``seed`` that ``default_rng(seed)`` (whose spawn key is empty) never produces. And since a user's data
may come from anywhere, a draw that is parallel to an input of the same shape (cosine ``±1``, or
equal) is drawn again.
"""

from __future__ import annotations

from typing import Iterable, Optional, Union

import numpy as np

__all__ = ["UPSTREAM_SPAWN_KEY", "checker_rng", "upstream_gradient"]

#: The spawn key of the checkers' stream (any fixed number would do; this one spells "dout").
UPSTREAM_SPAWN_KEY = 0x646F7574

#: ``|cos(dout, x)|`` at or above this is "parallel": ``dout`` is drawn again.
PARALLEL_COSINE = 1.0 - 1e-6

_MAX_DRAWS = 64

Seed = Union[None, int, np.integer, list, np.random.SeedSequence, np.random.Generator]


def checker_rng(seed: Seed) -> np.random.Generator:
    """The checkers' generator for ``seed``: ``default_rng(SeedSequence(seed, spawn_key=(UPSTREAM_SPAWN_KEY,)))``.

    Parameters
    ----------
    seed : int, list of int, SeedSequence, None or numpy.random.Generator
        An int (or a list of them, or None: fresh entropy) names the stream; a ``Generator`` is used as
        it is (the caller chose its state).

    Returns
    -------
    numpy.random.Generator
        For an int ``seed``, a stream that no ``np.random.default_rng(seed)`` the user makes can repeat.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        entropy, key = seed.entropy, tuple(seed.spawn_key)
    else:
        entropy, key = seed, ()
    bad = isinstance(entropy, (bool, np.bool_)) or not (
        entropy is None or (isinstance(entropy, (int, np.integer)) and entropy >= 0)
        or (isinstance(entropy, (list, tuple)) and entropy and all(
            isinstance(e, (int, np.integer)) and not isinstance(e, bool) and e >= 0 for e in entropy)))
    if bad:
        raise TypeError(f"seed must be a non-negative int (or a list of them), a numpy Generator or None, "
                        f"got {seed!r}")
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key + (UPSTREAM_SPAWN_KEY,)))


def _parallel(dout: np.ndarray, x: np.ndarray) -> bool:
    """True when ``dout`` equals ``x`` or, for two or more elements, ``|cos(dout, x)| >= PARALLEL_COSINE``."""
    if np.array_equal(dout, x):
        return True
    if dout.size < 2:
        return False                        # any two scalars are "parallel": only equality is a trap
    a, b = dout.ravel(), np.asarray(x, dtype=np.float64).ravel()
    if not np.all(np.isfinite(b)):
        b = np.where(np.isfinite(b), b, 0.0)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return nb > 0 and abs(float(a @ b)) >= PARALLEL_COSINE * na * nb


def upstream_gradient(shape, seed: Seed = 0, avoid: Iterable = (), *,
                      rng: Optional[np.random.Generator] = None) -> np.ndarray:
    """The random upstream gradient ``dout ~ N(0, 1)`` of shape ``shape`` (float64) for a check.

    Parameters
    ----------
    shape : tuple of int
        The output's shape.
    seed : int, None or numpy.random.Generator
        Names the stream through :func:`checker_rng` (so ``upstream_gradient(s, 0)`` is never the first
        draw of ``np.random.default_rng(0)``); ignored when ``rng`` is given.
    avoid : iterable of ndarray
        The check's inputs (and weights): a draw parallel to (or equal to) one of the same shape is
        rejected and drawn again, so that a backward using that array in place of ``dout`` cannot pass.
    rng : numpy.random.Generator, optional
        Draw from this generator (a checker's own :func:`checker_rng`, which then goes on to draw its
        directions and subsets) instead of a fresh one for ``seed``.

    Returns
    -------
    ndarray of float64

    Raises
    ------
    RuntimeError
        Every one of 64 draws was parallel to an input (impossible unless an input is built from this
        very stream).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((3, 4))
    >>> dout = upstream_gradient(x.shape, 0, avoid=[x])
    >>> dout.shape, bool(np.array_equal(dout, x))
    ((3, 4), False)
    """
    gen = checker_rng(seed) if rng is None else rng
    shape = tuple(int(n) for n in shape)
    same = [a for a in avoid if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.shape == shape]
    for _ in range(_MAX_DRAWS):
        dout = gen.standard_normal(shape)
        if not any(_parallel(dout, a) for a in same):
            return dout
    raise RuntimeError(f"upstream_gradient: {_MAX_DRAWS} draws of shape {shape} were all parallel to an input; "
                       "the inputs seem to be drawn from the checker's own stream")
