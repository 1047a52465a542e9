"""Vectorised ``erf`` and ``erfc`` for NumPy arrays, accurate to double-precision rounding.

NumPy has no error function, and the textbook Abramowitz-Stegun formula (7.1.26) is only good to
about 1e-7, far too coarse for a float64 oracle comparison. This module ports the rational
approximations of Sun Microsystems' fdlibm ``s_erf.c`` (the same algorithm behind most C libraries'
``erf``), which is accurate to within one unit in the last place over the whole real line.

The real line is split into five intervals, each with its own rational approximation:

=====================  ===========================================================
``|x| < 0.84375``      ``erf(x) = x + x * R(x**2)``
``0.84375 <= |x| < 1.25``  ``erf(x) = erx + P(|x|-1) / Q(|x|-1)``   (erx = erf(1) rounded)
``1.25 <= |x| < 1/0.35``   ``erfc(x) = exp(-x**2 - 0.5625 + R(1/x**2)/S(1/x**2)) / x``
``1/0.35 <= |x| < 28``     same form, other coefficients
``|x| >= 28``              ``erfc(x)`` underflows to 0
=====================  ===========================================================

In the two tail intervals ``exp(-x*x)`` is evaluated as ``exp(-z*z) * exp((z-x)*(z+x))`` where ``z``
is ``x`` with the low half of its mantissa cleared: ``z*z`` is then exact, so the rounding error of
``x*x`` (which ``exp`` would amplify by ``x**2``) never enters.

All branches are evaluated with ``np.where``-style selection on whole arrays (no Python loop over
elements). float32 input is computed in float32 with the same coefficients (plenty for float32).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["erf", "erfc", "erf_naive", "erfc_naive"]

# Coefficients of fdlibm s_erf.c (decimal values; the hex words in the fdlibm source match them).
_ERX = 8.45062911510467529297e-01
_EFX = 1.28379167095512586316e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)


def _poly(coeffs, z):
    """Horner evaluation of ``c0 + c1*z + c2*z**2 + ...`` keeping ``z``'s dtype."""
    acc = np.full_like(z, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc *= z
        acc += z.dtype.type(c)
    return acc


def _truncate_low_bits(a):
    """``a`` with the low half of its mantissa cleared, so that ``z*z`` is exact."""
    if a.dtype == np.float64:
        return (a.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
    return (a.view(np.uint32) & np.uint32(0xFFFFF000)).view(np.float32)


def _tail_erfc(ax, lo=None):
    """``erfc(ax)`` for ``1.25 <= ax < 28`` (``ax`` positive): the two tail intervals.

    ``lo``, optional, is a low-order part of the argument (``erfc(ax + lo)`` for a double-double
    ``ax + lo``): first-order corrections ``exp(-2 ax lo)`` and ``1/(ax + lo) = (1 - lo/ax)/ax``.
    """
    one = ax.dtype.type(1.0)
    s = one / (ax * ax)
    near = ax < 1 / 0.35
    ratio = np.where(near, _poly(_RA, s) / _poly(_SA, s), _poly(_RB, s) / _poly(_SB, s))
    z = _truncate_low_bits(ax)
    if lo is None:
        return np.exp(-z * z - ax.dtype.type(0.5625)) * np.exp((z - ax) * (z + ax) + ratio) / ax
    return (np.exp(-z * z - 0.5625) * np.exp((z - ax) * (z + ax) - 2.0 * ax * lo + ratio) / ax
            * (1.0 - lo / ax))


def _as_float_array(x):
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    return a


def erf(x):
    """Error function ``erf(x) = 2/sqrt(pi) * integral_0^x exp(-t**2) dt``, elementwise.

    Parameters
    ----------
    x : array_like
        float32 or float64 (other numeric types are computed in float64).

    Returns
    -------
    numpy.ndarray
        Same shape and floating dtype as ``x``; accurate to about one ulp in float64.
    """
    x = _as_float_array(x)
    ax = np.abs(x)
    out = np.empty_like(x)
    small = ax < 0.84375
    mid = (ax >= 0.84375) & (ax < 1.25)
    tail = (ax >= 1.25) & (ax < 6.0)
    big = ax >= 6.0
    if small.any():
        xs = x[small]
        z = xs * xs
        out[small] = xs + xs * (_poly(_PP, z) / _poly(_QQ, z))
    if mid.any():
        s = ax[mid] - 1
        r = x.dtype.type(_ERX) + _poly(_PA, s) / _poly(_QA, s)
        out[mid] = np.copysign(r, x[mid])
    if tail.any():
        out[tail] = np.copysign(1 - _tail_erfc(ax[tail]), x[tail])
    if big.any():
        out[big] = np.copysign(x.dtype.type(1.0), x[big])
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.nan
    return out


def erfc(x):
    """Complementary error function ``erfc(x) = 1 - erf(x)``, accurate also where it is tiny.

    Parameters
    ----------
    x : array_like
        float32 or float64 (other numeric types are computed in float64).

    Returns
    -------
    numpy.ndarray
        Same shape and floating dtype as ``x``. For large positive ``x`` it keeps full relative
        accuracy down to underflow (``1 - erf(x)`` would cancel to 0).
    """
    x = _as_float_array(x)
    ax = np.abs(x)
    out = np.empty_like(x)
    small = ax < 0.84375
    mid = (ax >= 0.84375) & (ax < 1.25)
    tail = (ax >= 1.25) & (ax < 28.0)
    big = ax >= 28.0
    if small.any():
        xs = x[small]
        z = xs * xs
        y = xs * (_poly(_PP, z) / _poly(_QQ, z))
        # For |x| >= 1/4 fdlibm computes 0.5 - (x*y + (x - 0.5)) to keep the last bits.
        quarter = np.abs(xs) < 0.25
        out[small] = np.where(quarter, 1 - (xs + y), 0.5 - (y + (xs - 0.5)))
    if mid.any():
        s = ax[mid] - 1
        pq = _poly(_PA, s) / _poly(_QA, s)
        xm = x[mid]
        out[mid] = np.where(xm >= 0, (1 - x.dtype.type(_ERX)) - pq, 1 + (x.dtype.type(_ERX) + pq))
    if tail.any():
        r = _tail_erfc(ax[tail])
        out[tail] = np.where(x[tail] > 0, r, 2 - r)
    if big.any():
        out[big] = np.where(x[big] > 0, 0.0, 2.0)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.nan
    return out


_SQRT_HALF = 0.7071067811865476            # 1/sqrt(2) rounded to double ...
_SQRT_HALF_LO = -4.833646656726457e-17      # ... and what the rounding lost
_INV_SQRT_2PI = 0.3989422804014327
_SPLIT = 134217729.0                        # 2**27 + 1, Dekker's splitter for doubles


def _two_product(a, b):
    """``a*b`` as an unevaluated sum ``p + e`` (Dekker): ``p = fl(a*b)`` and ``e`` its exact rounding error."""
    p = a * b
    t = a * _SPLIT
    ah = t - (t - a)
    al = a - ah
    t = b * _SPLIT
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _phi_far(x):
    """``Phi(x)`` for float64 ``x`` with ``|x/sqrt(2)| >= 0.84375``, keeping full relative accuracy in the
    left tail.

    There ``Phi(x) = erfc(w) / 2`` with ``w = -x/sqrt(2)`` large, and erfc's condition number is about
    ``2 w**2``: the single rounding of ``w`` would cost ``x**2`` ulps (1000 ulps at x = -32). So ``w`` is
    carried as a double-double ``wh + wl``, and fdlibm's tail formula gets the first-order corrections
    ``exp(-2 wh wl)`` (in the exponent) and ``1 / (wh + wl) = (1 - wl/wh) / wh``.
    """
    wh = -(x * _SQRT_HALF)
    out = 0.5 * erfc(wh)
    tail = (wh >= 1.25) & (wh < 28.0)
    if tail.any():
        xt = x[tail]                                # |x| < 40 here: Dekker's split cannot overflow
        p, e = _two_product(xt, _SQRT_HALF)
        out[tail] = 0.5 * _tail_erfc(-p, -(e + xt * _SQRT_HALF_LO))
    return out


# float32's Phi near 0: Phi(x) = 1/2 + x A(x**2) with A(w) = erf(x / sqrt(2)) / (2 x), for
# |x / sqrt(2)| < 0.84375, as a degree-5 polynomial in w = x**2 (in x directly, so that no rounding of
# x / sqrt(2) enters). fdlibm's rational function (two polynomials and a division, built for float64's
# 1e-17) takes 11 passes more than float32 needs. The coefficients are float32 numbers, fitted one at
# a time (each rounded to float32, the rest refitted: least squares at 600 Chebyshev nodes against
# mpmath) on A's relative error weighted by how much 1/2 + x A cancels on the negative side (up to
# 3.3x at x = -1.19, Phi = 0.117): the weighted error is 5.9e-9, a tenth of float32's half-ulp.
_A32 = (0.3989422619342804, -0.066490039229393, 0.00997176393866539, -0.001183212618343532,
        0.00011073191126342863, -6.759753432561411e-06)
_W32_NEAR = (0.84375 / _SQRT_HALF) ** 2            # |u| < 0.84375  <=>  x**2 < 1.4238...


# float32's Phi away from 0, |x| >= 1.19: with a = |x| and Q(a) = Phi(-a), Q(a) = phi(a) h(a) / a, where
# h(a) = a Q(a) / phi(a) (a times the Mills ratio) falls smoothly from 0.71 at a = 1.19 to 1 as a grows.
# h is a degree-10 polynomial in z = 3.543... / (1 + a/2) - 1.221..., the map of u = 1 / (1 + a/2) onto
# [-1, 1] for a in [1.19, 30] (the substitution that Abramowitz & Stegun 26.2.17 uses; in 1/a or 1/a**2
# the same degree is 100x and 1000x less accurate). Fitted with numpy's chebfit, relative weights,
# against the float64 kernel at 400,000 points: 1.4e-9 relative for a < 14.5 (beyond it float32's Phi(-a)
# underflows to 0), a twentieth of float32's half-ulp or less. Evaluated in float64 on the gathered
# elements: 31 passes, where fdlibm's erfc with the double-double argument (the float64 kernel's) takes
# about 200.
_H32 = (0.9417299981199301, -0.12441719544139503, -0.0894413003545904, -0.02217184460354418,
        0.0016180151500077124, 0.0015714868063200127, -0.00018375238032977928, -0.00012867739023712023,
        3.591381983871536e-05, 8.021736148680057e-06, -4.49623634225991e-06)
_H32_SCALE, _H32_SHIFT = 3.5432141617493924, -1.221450885109337


def _phi_far_f32(x):
    """``Phi(x)`` for float64 ``x`` holding float32 values with ``|x| >= 1.19`` (NaN and inf too), to
    float32 accuracy: ``Q = phi(a) h(a) / a`` (see ``_H32``), ``Phi = Q`` for ``x < 0``, ``1 - Q`` else.
    ``exp(-a**2 / 2)`` in float64: the rounding of ``a**2`` (1e-16 relative) costs at most 1e-14."""
    a = np.abs(x)
    z = np.add(a, 2.0)                                            # z = scale / (1 + a/2) + shift
    np.divide(2.0 * _H32_SCALE, z, out=z)
    z += _H32_SHIFT
    h = np.full_like(z, _H32[-1])
    for c in _H32[-2::-1]:                                        # Horner: h(z)
        h *= z
        h += c
    q = np.multiply(a, a)
    q *= -0.5
    np.exp(q, out=q)
    q *= h
    with np.errstate(invalid="ignore", divide="ignore"):
        q /= a                                                    # inf: 0 / inf = 0
    q *= _INV_SQRT_2PI                                            # Q(a) = phi(a) h(a) / a
    return np.where(x < 0, q, 1.0 - q)                            # NaN: 1 - NaN


def _phi_chunk_f32(out, x):
    """``out[:] = Phi(x)`` for a float32 chunk: ``Phi(x) = 1/2 + x A(x**2)`` (see ``_A32``) on the whole
    chunk (13 passes, into a per-thread scratch array, no allocation), then the elements with
    ``|x / sqrt(2)| >= 0.84375`` (NaN too) recomputed by :func:`_phi_far_f32` in float64 (31 passes on
    about 5% of the elements; it was fdlibm's erfc, ~200 passes and, at 16K-element chunks, more time
    than the whole polynomial). tests/kernels/test_kernels.py bounds its error against the float64 kernel in
    float32 ulps.
    """
    from .parallel import scratch
    f = np.float32
    w = np.multiply(x, x, out=scratch(0, x))                      # w = x**2
    np.multiply(w, f(_A32[-1]), out=out)
    for c in _A32[-2::-1]:                                         # Horner: A(w)
        out += f(c)
        if c is not _A32[0]:
            out *= w
    out *= x
    out += f(0.5)                                                  # 1/2 + x A(w) = (1 + erf(u)) / 2
    far = np.flatnonzero(~(w < f(_W32_NEAR)))                      # NaN lands here too
    if far.size:
        out[far] = _phi_far_f32(x[far].astype(np.float64))


def phi_chunk(out, x):
    """``out[:] = Phi(x)``, the standard normal CDF ``erfc(-x/sqrt(2)) / 2``, for a 1-D chunk.

    Most activations satisfy ``|x/sqrt(2)| < 0.84375``, where ``erfc(-u) = 1 + u + u R(u**2)`` (fdlibm's
    first interval). That formula is evaluated on the whole chunk, without gathering; the few other
    elements are then recomputed by :func:`_phi_far` (in float64 also for float32 input). In place,
    so temporaries stay in cache. float32 takes the shorter :func:`_phi_chunk_f32`.
    """
    if x.dtype == np.float32:
        return _phi_chunk_f32(out, x)
    dt = x.dtype.type
    u = x * dt(_SQRT_HALF)                                     # u = x / sqrt(2)
    z = u * u
    num = np.multiply(z, dt(_PP[-1]))
    for c in _PP[-2::-1]:
        num += dt(c)
        if c is not _PP[0]:
            num *= z
    den = np.multiply(z, dt(_QQ[-1]))
    for c in _QQ[-2:0:-1]:
        den += dt(c)
        den *= z
    den += dt(1.0)
    with np.errstate(over="ignore", invalid="ignore"):       # large |u|: overwritten below
        np.divide(num, den, out=num)                           # R(u**2)
    num += dt(1.0)
    num *= u                                                   # u (1 + R) = erf(u)
    np.multiply(num, dt(0.5), out=out)
    out += dt(0.5)                                             # (1 + erf(u)) / 2
    far = np.flatnonzero(~(np.abs(u) < 0.84375))               # NaN lands here too
    if far.size:
        out[far] = _phi_far(x[far].astype(np.float64))


def pdf_chunk(out, x):
    """``out[:] = phi(x) = exp(-x**2/2) / sqrt(2 pi)``, accurate also where ``x**2`` is large.

    ``exp`` multiplies the relative error of its argument by the argument's size, so for ``|x| > 2``
    the square is formed exactly: ``x = xh + xl`` with ``xh`` holding the high half of the mantissa
    (``xh**2`` is exact), and ``exp(-x**2/2) = exp(-xh**2/2) exp(-(2 xh xl + xl**2)/2)``.
    """
    dt = x.dtype.type
    np.multiply(x, x, out=out)
    out *= dt(-0.5)
    np.exp(out, out=out)
    out *= dt(_INV_SQRT_2PI)
    far = np.flatnonzero(~(np.abs(x) <= 2.0))
    if far.size:
        xf = x[far].astype(np.float64)
        xh = _truncate_low_bits(xf)
        xl = xf - xh
        out[far] = np.exp(-0.5 * xh * xh) * np.exp(-0.5 * (2.0 * xh * xl + xl * xl)) * _INV_SQRT_2PI


def phi(x):
    """Standard normal CDF ``Phi(x) = erfc(-x / sqrt(2)) / 2``, elementwise, same dtype as ``x``.

    Accurate to a few ulp everywhere, the left tail included. Large arrays are processed in
    cache-sized chunks on the thread pool of :mod:`numpy_transformer.kernels.parallel`.
    """
    from .parallel import map_chunks
    x = np.ascontiguousarray(_as_float_array(x))
    out = np.empty_like(x)
    return map_chunks(phi_chunk, out, x)


def erf_naive(x):
    """The plain reference: Python's ``math.erf`` element by element (slow; for the tests)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def erfc_naive(x):
    """The plain reference: Python's ``math.erfc`` element by element (slow; for the tests)."""
    return np.vectorize(math.erfc, otypes=[np.float64])(x)
