"""Finite-difference gradient checking: central differences in float64, no torch needed.

Use it on any forward/backward pair (the functional ops here, or your own) and on any module of
:mod:`numpy_transformer.nn`. The check works on the scalar

    ``L(x) = sum(dout * f(x))``

with ``dout`` a random upstream gradient (seeded): the gradient a backward returns for ``dout`` is
exactly ``dL/dx``. A random ``dout`` (never all ones) matters: with ``dout = 1`` a softmax backward
that forgets its row-sum term still passes, because the softmax rows sum to a constant. It is drawn
from a stream of its own (:mod:`.upstream`), never ``np.random.default_rng(seed)``'s, from which your
inputs may come: were ``dout == x``, a backward using ``x`` in place of ``dout`` would pass.

The result is falsy when the check failed (``assert gradcheck(...)``); ``raise_exception=True`` raises
:class:`GradcheckError` instead (default False: unlike ``torch.autograd.gradcheck``, whose default is
True, the report is returned).

For every checked element ``x_i`` the numeric derivative is the central difference

    ``(L(x + h e_i) - L(x - h e_i)) / (2 h)``,   ``h = eps * max(1, |x_i|)``

computed as ``sum(dout * (f(x + h e_i) - f(x - h e_i))) / (2 h)`` so that outputs that do not depend
on ``x_i`` cancel exactly instead of adding round-off. Its error is ``O(h**2)`` truncation plus
``O(u |f| / h)`` round-off (``u = 2.2e-16``): about 1e-9 relative for smooth ops at ``eps = 1e-6``.

Tolerance. A tensor passes when ``max_i |analytic_i - numeric_i| <= atol + rtol * max_i |numeric_i|``:
the error is measured against the *scale of the gradient* (elements of a gradient that are near zero
would make element-wise relative errors meaningless). The defaults, ``rtol = 1e-6`` and
``atol = 1e-8``, leave a margin of 100x to 1000x over the finite-difference noise of smooth ops, while
a real bug (a missing term, a transposed weight, a forgotten accumulation) gives an error of the order
of the gradient itself.

Fast mode (``fast_mode=True``, as ``torch.autograd.gradcheck(fast_mode=True)``) compares ``v^T J u``
along one random direction ``u`` per tensor instead of every element: one backward and two forward
evaluations per tensor (see :func:`gradcheck`). Besides the numbers, the backward itself is checked: it
must modify nothing in place and a second call with the same cache must be refused or agree (see
:mod:`numpy_transformer.study.gradchecking.hygiene`); an input that is not float64 draws a
:class:`GradcheckPrecisionWarning`.

The package, by concern: :mod:`.result` (the report), :mod:`.numeric` (the finite differences),
:mod:`.hygiene` (the backward's in-place and second-call checks, the float64 warning), :mod:`.pair`
(:func:`gradcheck`), :mod:`.module` (:func:`gradcheck_module`), :mod:`.upstream` (the upstream
gradient of every checker: :func:`upstream_gradient`).

Examples
--------
Your own forward/backward pair (``forward(**inputs) -> out`` or ``(out, cache)``,
``backward(dout, cache) -> grads`` in the order of the inputs, ``None`` for a constant):

>>> import numpy as np
>>> from numpy_transformer import gradcheck
>>> def forward(x, w):
...     y = np.tanh(x @ w)
...     return y, (x, w, y)
>>> def backward(dout, cache):
...     x, w, y = cache
...     dz = dout * (1 - y * y)
...     return dz @ w.T, x.T @ dz
>>> rng = np.random.default_rng(0)
>>> result = gradcheck(forward, backward, {"x": rng.standard_normal((3, 4)),
...                                        "w": rng.standard_normal((4, 2))}, verbose=False)
>>> result.passed
True

A module: every input gradient and every parameter gradient is checked.

>>> import numpy_transformer as nt
>>> layer = nt.LayerNorm(5, dtype=np.float64)
>>> gradcheck_module(layer, rng.standard_normal((2, 5)), verbose=False).passed
True
"""

from .hygiene import GradcheckPrecisionWarning
from .module import default_input_names, gradcheck_module, module_input_grads
from .numeric import DEFAULT_ATOL, DEFAULT_EPS, DEFAULT_RTOL, directional_derivative, numerical_gradient
from .pair import gradcheck
from .result import GradcheckError, GradcheckResult, HygieneCheck, TensorCheck
from .upstream import UPSTREAM_SPAWN_KEY, checker_rng, upstream_gradient

__all__ = ["gradcheck", "gradcheck_module", "GradcheckResult", "TensorCheck", "GradcheckError",
           "numerical_gradient", "DEFAULT_EPS", "DEFAULT_ATOL", "DEFAULT_RTOL", "GradcheckPrecisionWarning",
           "HygieneCheck", "directional_derivative", "module_input_grads", "default_input_names",
           "upstream_gradient", "checker_rng", "UPSTREAM_SPAWN_KEY"]
