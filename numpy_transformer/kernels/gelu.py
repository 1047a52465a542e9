"""GELU's elementwise kernels (run on chunks by :func:`numpy_transformer.kernels.parallel.map_chunks`),
each beside the plain formula it must equal (``gelu_naive``, ``gelu_grad_naive``; tests/kernels/test_kernels.py
compares them).

Each kernel writes into ``out`` in place, a handful of passes over a chunk that stays in cache; the
plain formulas allocate freely and are what the kernels compute."""

from __future__ import annotations

import math

import numpy as np

from .erf import erfc, pdf_chunk, phi_chunk
from .parallel import scratch

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gelu_exact_chunk(out, x):
    with np.errstate(over="ignore"):                             # x*x of huge x: inf, correctly handled
        phi_chunk(out, x)                                       # Phi(x)
    out *= x                                                     # x Phi(x)


def gelu_exact_grad_chunk(out, x, dout):
    with np.errstate(over="ignore"):
        phi_chunk(out, x)                                       # Phi(x)
        pdf = scratch(1, x)                                      # phi_chunk's scratch is slot 0
        pdf_chunk(pdf, x)                                       # phi(x) = exp(-x**2/2) / sqrt(2 pi)
    pdf *= x
    out += pdf                                                   # Phi(x) + x phi(x)
    out *= dout


_TANH_SATURATED = 1e4          # |x| beyond this: tanh(u) is exactly +-1 in float32 and float64


def gelu_tanh_chunk(out, x):
    dt = x.dtype.type
    xs = np.clip(x, dt(-_TANH_SATURATED), dt(_TANH_SATURATED))   # x**3 must not overflow; tanh is flat there
    np.multiply(xs, xs, out=out)
    out *= dt(0.044715)
    out += dt(1.0)
    out *= xs
    out *= dt(_SQRT_2_OVER_PI)                                   # u = sqrt(2/pi)(x + 0.044715 x**3)
    np.tanh(out, out=out)
    out += dt(1.0)
    out *= dt(0.5)                                               # (1 + tanh u)/2, halved before the x
    out *= x                                                     # x/2 (1 + tanh u); finite up to max


def gelu_tanh_grad_chunk(out, x, dout):
    dt = x.dtype.type
    c, k = dt(_SQRT_2_OVER_PI), dt(0.044715)
    # Beyond the clip tanh is exactly +-1, so (1 - t**2) = 0 and the clipped x changes nothing, while
    # x**2 itself could overflow and meet that 0 as inf * 0 = NaN.
    x = np.clip(x, dt(-_TANH_SATURATED), dt(_TANH_SATURATED))
    x2 = np.multiply(x, x)
    t = x2 * k
    t += dt(1.0)
    t *= x
    t *= c
    np.tanh(t, out=t)                                            # t = tanh(u)
    np.multiply(x2, dt(3.0) * k, out=x2)
    x2 += dt(1.0)
    x2 *= c                                                      # du/dx = sqrt(2/pi)(1 + 3*0.044715 x**2)
    np.multiply(t, t, out=out)
    np.subtract(dt(1.0), out, out=out)                           # 1 - t**2
    out *= x2
    out *= x
    out += t
    out += dt(1.0)
    out *= dt(0.5)                                               # (1 + t)/2 + x/2 (1 - t**2) du/dx
    out *= dout


def gelu_naive(x, approximate="none"):
    """The plain formula: ``x * Phi(x)`` with ``Phi(x) = erfc(-x / sqrt(2)) / 2``, or the tanh form."""
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))
    return x * 0.5 * erfc(-x * _INV_SQRT_2)


def gelu_grad_naive(x, approximate="none"):
    """The plain derivative: ``Phi(x) + x phi(x)``, or the tanh form's
    ``(1 + t)/2 + x/2 (1 - t**2) sqrt(2/pi) (1 + 3 * 0.044715 x**2)``."""
    if approximate == "tanh":
        t = np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    return 0.5 * erfc(-x * _INV_SQRT_2) + x * np.exp(-0.5 * x * x) * _INV_SQRT_2PI
