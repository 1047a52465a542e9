"""Helpers the layers share for their construction: the dtype argument's validation and the
torch-matching uniform and Xavier-uniform initialisations (drawn from the module's generator).
"""

from __future__ import annotations

import math

from ..utils.checks import as_float_dtype


def dtype_of(dtype):
    return as_float_dtype(dtype)


def uniform(rng, bound, shape, dtype):
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def xavier_uniform(rng, shape, dtype):
    fan_out, fan_in = shape
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(rng, bound, shape, dtype)


def xavier_normal(rng, shape, dtype):
    """torch's ``xavier_normal_``: N(0, 2 / (fan_in + fan_out)), with torch's fans for any rank
    (fan_in = size(1) * receptive field, fan_out = size(0) * receptive field; for (1, 1, E) both are E)."""
    receptive = math.prod(shape[2:])
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    return (rng.standard_normal(shape) * math.sqrt(2.0 / (fan_in + fan_out))).astype(dtype)
