"""Elementwise work split into cache-sized chunks, run on a small thread pool.

NumPy's ufuncs run on one core and release the GIL while they work, so a long elementwise
computation (GELU's erf takes about 30 passes) can be split into chunks that several threads process
at once, each chunk's temporaries staying small.

Threads help most when OpenBLAS's own idle threads do not spin on the cores after a matrix product
(``OPENBLAS_THREAD_TIMEOUT=1`` in the environment before NumPy is imported makes them sleep; the
benchmark sets nothing, so its figures are those of the defaults). The number of threads is
``NT_NUM_THREADS`` if set, else the number of cores; 1 disables threading.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CHUNK = 1 << 18                   # at most this many elements per chunk (256K: each thread's
                                  # temporaries stay near 1 MB each)
MIN_PARALLEL = 1 << 16            # below this many elements, one thread does it all

_pool = None
_local = threading.local()


def num_threads():
    return max(1, int(os.environ.get("NT_NUM_THREADS", os.cpu_count() or 1)))


def _get_pool():
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=num_threads(), thread_name_prefix="nt-elementwise")
    return _pool


def _forget_pool():
    """In a forked child: the pool's threads did not come along (fork copies the calling thread only),
    so its work would wait forever; the child starts a pool of its own on first use."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _in_pool(fn, items):
    """``fn(item)`` for every item on the pool, each under the caller's ``np.errstate`` (NumPy's error
    settings are per thread: the pool's threads would otherwise use the defaults)."""
    err = np.geterr()

    def run(item):
        with np.errstate(**err):
            fn(item)

    for _ in _get_pool().map(run, items):
        pass


def map_chunks(fn, out, *inputs):
    """Call ``fn(out_chunk, *input_chunks)`` over aligned 1-D chunks of C-contiguous arrays.

    ``fn`` must write its result into ``out_chunk`` (a view of ``out``); the inputs must have
    ``out``'s size. Large arrays are cut into equal chunks, a multiple of the thread count, processed
    in parallel. (Each NumPy call costs a few microseconds whatever its size, so chunks must stay
    large: measured here, 8K-element chunks were 4x slower than 256K-element ones.)
    """
    if out.size == 0:
        return out
    flat_out = out.reshape(-1)
    if not np.shares_memory(flat_out, out):
        raise ValueError("map_chunks needs a C-contiguous output array")
    flat_in = [np.ascontiguousarray(a).reshape(-1) for a in inputs]
    n = flat_out.size
    threads = num_threads() if n >= MIN_PARALLEL else 1
    chunks = threads * -(-n // (threads * CHUNK))                 # ceil, rounded up to the threads
    size = -(-n // chunks)

    def work(i):
        j = min(i + size, n)
        fn(flat_out[i:j], *(a[i:j] for a in flat_in))

    if threads == 1:
        for i in range(0, n, size):
            work(i)
    else:
        _in_pool(work, range(0, n, size))
    return out


def scratch(slot, like):
    """A work array shaped and typed like the 1-D chunk ``like``, kept per thread and ``slot`` (0, 1, ...)
    and reused by every later call: the chunk kernels' temporaries.

    Why: a fresh 1 MB temporary is fresh pages, and when it is freed glibc returns them to the system
    (the top of the heap is trimmed past 2x the mmap threshold), so the next call page-faults them all
    again; measured on this VM, four fresh 256K-element float32 temporaries cost 1000 page faults and
    15x the arithmetic. A kernel must not hand a scratch array out (the next call overwrites it);
    chunks above ``CHUNK`` (a kernel called on a whole array) get a fresh array instead.
    """
    if like.size > CHUNK:
        return np.empty_like(like)
    bufs = _local.__dict__.setdefault("bufs", {})
    key = (slot, like.dtype.str)
    buf = bufs.get(key)
    if buf is None:
        buf = bufs[key] = np.empty(CHUNK, like.dtype)
    return buf[:like.size]


def map_rows(fn, *arrays):
    """Call ``fn(*row_blocks)`` over aligned blocks of rows of arrays sharing their leading dimensions.

    The arrays must be C-contiguous with the same leading dimensions (their last dimensions may
    differ, e.g. a (..., S, T) matrix and its (..., S, 1) row sums); each is viewed as (R, last) and
    blocks of rows of about ``CHUNK`` elements are processed in parallel. ``fn`` works in place on its
    views (row-wise operations such as a softmax). Anything else, or a small array, is one call.
    """
    first = arrays[0]
    n = first.size
    if n == 0:
        return
    if n < MIN_PARALLEL or any(a.shape[:-1] != first.shape[:-1] or not a.flags.c_contiguous for a in arrays):
        fn(*arrays)                                  # small, or not row-aligned: one call on the whole
        return
    rows = int(np.prod(first.shape[:-1], dtype=np.int64))
    views = [a.reshape(rows, a.shape[-1]) for a in arrays]
    threads = num_threads()
    chunks = min(rows, threads * -(-n // (threads * CHUNK)))
    size = -(-rows // chunks)

    def work(i):
        fn(*(v[i:i + size] for v in views))

    if threads == 1 or chunks == 1:
        for i in range(0, rows, size):
            work(i)
    else:
        _in_pool(work, range(0, rows, size))


def map_chunks_naive(fn, out, *inputs):
    """The plain reference of :func:`map_chunks`: one call on the whole arrays."""
    fn(out.reshape(-1), *(np.ascontiguousarray(a).reshape(-1) for a in inputs))
    return out


def map_rows_naive(fn, *arrays):
    """The plain reference of :func:`map_rows`: one call on the whole arrays."""
    fn(*arrays)
