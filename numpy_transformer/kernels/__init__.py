"""Fast kernels, kept apart from the textbook path, each beside the plain formula it must equal.

* :mod:`.erf` -- double-precision ``erf``/``erfc`` (an fdlibm port; NumPy has none) and the normal
  CDF/PDF chunk kernels GELU uses; reference: ``math.erf`` element by element (``erf_naive``).
* :mod:`.gelu` -- GELU's in-place chunk kernels; reference: ``gelu_naive``, ``gelu_grad_naive``.
* :mod:`.parallel` -- ``map_chunks`` / ``map_rows``: elementwise and row-wise work in cache-sized
  pieces on a small thread pool (``NT_NUM_THREADS``); reference: one call on the whole array.

``tests/kernels/test_kernels.py`` compares every kernel with its reference over random shapes and dtypes.
The functional ops in :mod:`numpy_transformer.functional` call these kernels; their docstrings
state the maths, the kernels only make it fast.
"""
