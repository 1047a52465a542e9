"""The upstream gradients of the drills' cases (``dy``, ``dout``, ``dbias``), from the checkers' own stream.

An exercise's ``draw`` draws its inputs and an upstream gradient from one generator; :func:`replace_upstream`
then replaces every upstream array by :func:`upstream_gradient`, which is the one upstream draw of every
checker (:func:`numpy_transformer.study.gradchecking.upstream.upstream_gradient`) on a stream named by the case
(seed, index, exercise) and the input's slot. That stream has the checkers' spawn key, which no
``default_rng(seed)`` a user or a case draws from has, so the upstream gradient cannot coincide with the
data it multiplies, and one that comes out parallel to an input of the same shape (cosine +-1: a backward
that used the input where it should use the gradient would pass) is drawn again.
"""

from __future__ import annotations

import numpy as np

from ...study.gradchecking.upstream import PARALLEL_COSINE
from ...study.gradchecking.upstream import upstream_gradient as _checker_upstream

#: the inputs that hold an upstream gradient, in the order of their sub-stream
UPSTREAM = ("dy", "dout", "dbias")


def parallel(a, b):
    """True when the arrays ``a`` and ``b`` (same shape) are parallel or anti-parallel (cosine +-1)."""
    a, b = np.ravel(np.asarray(a, dtype=np.float64)), np.ravel(np.asarray(b, dtype=np.float64))
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return na == nb
    return abs(float(a @ b)) / (na * nb) >= PARALLEL_COSINE


def upstream_gradient(seed, index, name, slot, shape, inputs):
    """The upstream gradient of shape ``shape`` for case ``index`` of exercise ``name``.

    Parameters
    ----------
    seed, index : int
        The case's seed and index (``draw_case``'s).
    name : str
        The exercise's name.
    slot : int
        The position of the input in :data:`UPSTREAM` (each upstream input has its own sub-stream).
    shape : tuple of int
    inputs : dict
        The case's inputs: the gradient is drawn again while it is parallel to one of the same shape.

    Returns
    -------
    ndarray of float64
    """
    stream = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(index), len(name), *name.encode()],
                                    spawn_key=(int(slot),))
    return _checker_upstream(shape, stream, avoid=[v for v in inputs.values() if isinstance(v, np.ndarray)])


def replace_upstream(case, seed, index, name):
    """Replace ``case``'s upstream arrays (float arrays under the :data:`UPSTREAM` names) in place."""
    for slot, key in enumerate(UPSTREAM):
        up = case.inputs.get(key)
        if isinstance(up, np.ndarray) and up.dtype.kind == "f":
            others = {k: v for k, v in case.inputs.items() if k != key}
            case.inputs[key] = upstream_gradient(seed, index, name, slot, up.shape, others).astype(up.dtype)
    return case
