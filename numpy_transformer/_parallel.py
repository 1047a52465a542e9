"""Elementwise work split into cache-sized chunks, run on a small thread pool.

NumPy's ufuncs run on one core and release the GIL while they work, so a long elementwise
computation (GELU's erf, the softmax's exp) can be split into chunks that several threads process at
once. Chunks of about 32K elements also keep each chunk's temporaries in the L2 cache, which alone
speeds up a many-pass computation such as a rational approximation.

Threads help only when OpenBLAS's own idle threads do not spin on the cores after a matrix product:
set ``OPENBLAS_THREAD_TIMEOUT=1`` in the environment before NumPy is imported (the benchmark does).
The number of threads is ``NT_NUM_THREADS`` if set, else the number of cores; 1 disables threading.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CHUNK = 1 << 15                   # elements per chunk
MIN_PARALLEL = 1 << 16            # below this many elements, one thread does it all

_pool = None


def num_threads():
    return max(1, int(os.environ.get("NT_NUM_THREADS", os.cpu_count() or 1)))


def _get_pool():
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=num_threads(), thread_name_prefix="nt-elementwise")
    return _pool


def map_chunks(fn, out, *inputs):
    """Call ``fn(out_chunk, *input_chunks)`` over aligned 1-D chunks of C-contiguous arrays.

    ``fn`` must write its result into ``out_chunk`` (a view of ``out``); the inputs must have
    ``out``'s size. Chunks are processed in parallel on the thread pool when the array is large.
    """
    flat_out = out.reshape(-1)
    flat_in = [a.reshape(-1) for a in inputs]
    n = flat_out.size
    if n <= CHUNK:
        fn(flat_out, *flat_in)
        return out
    starts = range(0, n, CHUNK)

    def work(i):
        j = min(i + CHUNK, n)
        fn(flat_out[i:j], *(a[i:j] for a in flat_in))

    if n < MIN_PARALLEL or num_threads() == 1:
        for i in starts:
            work(i)
    else:
        for _ in _get_pool().map(work, starts):
            pass
    return out
