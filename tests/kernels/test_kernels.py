"""Every fast kernel against the plain formula beside it (numpy_transformer/kernels, the head views).

The kernels (fdlibm erf, GELU's in-place chunk passes on a thread pool, row blocks, strided head
views) exist for speed only; each must compute what its one-line reference computes.
"""

from __future__ import annotations

import math

import numpy as np
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer.functional as F
from numpy_transformer.functional.multi_head_attention import (
    _merge_heads_naive,
    _split_heads_naive,
    merge_heads,
    split_heads,
)
from numpy_transformer.kernels import erf as kerf
from numpy_transformer.kernels import gelu as kgelu
from numpy_transformer.kernels import parallel

shapes = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)
dtypes = st.sampled_from([np.float64, np.float32])


def _x(seed, shape, scale, dtype):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


@given(st.integers(0, 2**31 - 1), shapes, st.sampled_from([0.5, 3.0, 10.0]))
def test_erf_erfc_match_math_module(seed, shape, scale):
    x = _x(seed, shape, scale, np.float64)
    assert_close({"erf": (kerf.erf(x), kerf.erf_naive(x))}, tol=1e-15)
    # erfc spans hundreds of orders of magnitude: compare elementwise-relative where it is not 0
    got, ref = kerf.erfc(x), kerf.erfc_naive(x)
    nz = ref != 0
    assert np.all(np.abs(got[nz] - ref[nz]) <= 4 * np.finfo(np.float64).eps * np.abs(ref[nz]))
    assert np.all(got[~nz] == 0)


def test_erf_naive_is_math_erf():
    x = np.array([-3.0, -0.5, 0.0, 0.25, 2.0])
    assert kerf.erf_naive(x).tolist() == [math.erf(v) for v in x]


@given(st.integers(0, 2**31 - 1), shapes, dtypes, st.sampled_from(["none", "tanh"]))
def test_gelu_chunk_kernels_match_the_plain_formula(seed, shape, dtype, approximate):
    x = _x(seed, shape, 3.0, dtype)
    y, cache = F.gelu_forward(x, approximate)
    dy = _x(seed + 1, shape, 1.0, dtype)
    dx = F.gelu_backward(dy, cache)
    ref_y = kgelu.gelu_naive(x.astype(np.float64), approximate)
    ref_dx = dy.astype(np.float64) * kgelu.gelu_grad_naive(x.astype(np.float64), approximate)
    tol = 1e-13 if dtype == np.float64 else 2e-5              # float32: a few ulps over ~30 passes
    assert y.dtype == dtype and dx.dtype == dtype
    # Judged on the O(1) scale of x and dy: where y or y' is near 0 (the left tail; y' crosses 0 at
    # x = -0.75) the last digits come from cancellation in the formula itself (1 + tanh(u) near -1,
    # Phi(x) + x phi(x) near 0), not from the kernel.
    assert_close({"y": (y, ref_y), "dx": (dx, ref_dx)}, tol=tol, floor=1.0)


def test_gelu_kernels_on_arrays_larger_than_a_chunk():
    """Several chunks on the thread pool: each chunk's result lands in its own place."""
    x = _x(0, (parallel.CHUNK * 2 + 12345,), 3.0, np.float64)
    y, cache = F.gelu_forward(x)
    assert_close({"y": (y, kgelu.gelu_naive(x))}, tol=1e-14)
    dx = F.gelu_backward(np.ones_like(x), cache)
    assert_close({"dx": (dx, kgelu.gelu_grad_naive(x))}, tol=1e-14)


def _square_plus_one(out, x):
    np.multiply(x, x, out=out)
    out += 1


def _row_softmax(y):
    F.softmax._softmax_inplace(y, -1)


@given(st.sampled_from([1, 1000, parallel.MIN_PARALLEL + 7, 3 * parallel.CHUNK + 5]))
def test_map_chunks_and_map_rows_match_one_call(n):
    x = _x(n, (n,), 1.0, np.float64)
    fast, plain = np.empty_like(x), np.empty_like(x)
    parallel.map_chunks(_square_plus_one, fast, x)
    parallel.map_chunks_naive(_square_plus_one, plain, x)
    assert np.array_equal(fast, plain)
    rows = x[: (n // 8) * 8].reshape(-1, 8) if n >= 8 else x.reshape(1, -1)
    fast, plain = rows.copy(), rows.copy()
    parallel.map_rows(_row_softmax, fast)
    parallel.map_rows_naive(_row_softmax, plain)
    assert np.array_equal(fast, plain)


@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4), dtypes)
def test_strided_head_views_match_split_and_concatenate(b, s, h, dh, dtype):
    x = _x(b * s * h * dh, (b, s, h * dh), 1.0, dtype)
    heads = split_heads(x, h)
    assert np.shares_memory(heads, x)                            # a view: no data moved
    assert np.array_equal(heads, _split_heads_naive(x, h))
    assert np.array_equal(merge_heads(heads), _merge_heads_naive(heads))
    assert np.array_equal(merge_heads(heads), x)


def _phi_ulps(x32):
    """Error of the float32 Phi kernel in float32 ulps of the float64 kernel's value (the reference:
    ~1e-15 relative, tests/functional/test_functional_vs_torch.py checks it against mpmath)."""
    got = np.empty_like(x32)
    ref = np.empty(x32.shape, np.float64)
    with np.errstate(over="ignore"):                          # x**2 of huge x: inf, handled by the far path
        kerf.phi_chunk(got, x32)
        kerf.phi_chunk(ref, x32.astype(np.float64))
    fin = np.isfinite(ref)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    ulp = np.spacing(np.abs(ref[fin]).astype(np.float32)).astype(np.float64)
    return np.abs(got[fin] - ref[fin]) / ulp


PHI32_ULPS = 6.0        # measured 5.4 at x = -1.16, where 1/2 + x A(x**2) cancels (Phi = 0.12); mean 0.19;
                        # |x| >= 1.19 (the tails, _phi_far_f32): 0.51


def test_float32_phi_kernel_within_a_few_ulps_of_the_float64_one():
    x = np.concatenate([np.linspace(-12.0, 12.0, 400_001), 3.0 * np.random.default_rng(0).standard_normal(100_000),
                        [0.0, -0.0, 1e-30, -1e-30, 1e-45, 1.1932, -1.1932, 1.19324, -1.19324, 1.1933, -1.1933,
                         -14.0, -20.0, 40.0, np.inf, -np.inf, np.nan, 3e38, -3e38]]).astype(np.float32)
    ulps = _phi_ulps(x)
    assert ulps.max() <= PHI32_ULPS, f"{ulps.max():.2f} ulps at x={x[np.isfinite(x)][ulps.argmax()]!r}"
    assert ulps.mean() < 0.3


@given(st.integers(0, 2**31 - 1), st.integers(1, 3000), st.sampled_from([0.3, 1.0, 3.0]))
def test_float32_phi_kernel_random(seed, n, scale):
    x = _x(seed, (n,), scale, np.float32)
    assert _phi_ulps(x).max() <= PHI32_ULPS


def test_scratch_is_reused_per_thread_and_slot():
    x = np.ones(1000, np.float32)
    a, b = parallel.scratch(0, x), parallel.scratch(0, x[:10])
    assert a.shape == (1000,) and b.shape == (10,) and a.dtype == np.float32 and np.shares_memory(a, b)
    assert not np.shares_memory(parallel.scratch(1, x), a)                     # another slot
    assert not np.shares_memory(parallel.scratch(0, x.astype(np.float64)), a)   # another dtype
    big = np.ones(parallel.CHUNK + 1, np.float32)
    assert not np.shares_memory(parallel.scratch(0, big), parallel.scratch(0, big))   # too big: fresh
    other = []
    import threading
    th = threading.Thread(target=lambda: other.append(parallel.scratch(0, x)))
    th.start()
    th.join()
    assert not np.shares_memory(other[0], a)                                   # another thread
