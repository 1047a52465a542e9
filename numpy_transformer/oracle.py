"""The optional PyTorch oracle, :mod:`reference_torch`, loaded on demand.

``numpy_transformer`` needs NumPy only; what checks it against PyTorch lives in ``reference_torch``
and is imported here, and only here, when a command asks for it (``gradcheck``'s torch column,
``demo``'s comparison, ``train --check-torch``, the drill grader's oracle). Without torch,
:func:`load` raises :class:`OracleUnavailable` (an ImportError) whose message is one line with the
install command; each caller decides what to do with it (skip a column, grade without the oracle,
refuse the option). :func:`available` asks without raising.

:func:`check_against_torch` and :func:`check_against_torch_module` (``nt.check_against_torch``...) are
the user-facing entry points of ``reference_torch.check.user``: your own code against torch's autograd.
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["OracleUnavailable", "TORCH_REQUIREMENT", "CPU_INDEX_URL", "available", "install_hint", "load",
           "torch_missing_error", "check_against_torch", "check_against_torch_module"]

PACKAGE = "reference_torch"
TORCH_REQUIREMENT = "torch==2.13.0"          # the pin of pyproject.toml's "test" and "dev" extras
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"   # PyPI's Linux wheel is the CUDA build (GBs)


def install_hint(purpose="this"):
    """The one-line message for a missing torch: what needs it and how to install it."""
    return (f"{purpose} needs PyTorch, the optional oracle: pip install {TORCH_REQUIREMENT} "
            f"--index-url {CPU_INDEX_URL} (the CPU build; or pip install -e '.[dev]')")


class OracleUnavailable(ImportError):
    """The PyTorch oracle cannot be imported.

    ``str(exc)`` is one line for the user; ``reason`` is a short form for a table column ("torch not
    installed", or "reference_torch unavailable: <the import error>"); ``torch_missing`` tells the two
    apart; the import error itself is ``__cause__``.
    """

    def __init__(self, message, reason, torch_missing=False, name=None):
        super().__init__(message, name=name)
        self.reason = reason
        self.torch_missing = torch_missing


def torch_missing_error(purpose="this", name=None):
    """The :class:`OracleUnavailable` for "torch is not installed" (``reference_torch`` raises it too)."""
    return OracleUnavailable(install_hint(purpose), "torch not installed", torch_missing=True, name=name)


def _torch_missing(exc):
    top = (getattr(exc, "name", None) or "").split(".")[0]
    if top == "torch" or getattr(exc, "torch_missing", False):
        return True
    try:
        return importlib.util.find_spec("torch") is None
    except (ImportError, ValueError):
        return True


def load(name, purpose="this"):
    """The module ``reference_torch.<name>`` (``name=""``: the package itself).

    Raises :class:`OracleUnavailable` when torch is not installed (the message says ``purpose`` needs
    PyTorch and how to install it) or when the oracle fails to import for another reason (the message
    names that error).
    """
    qualified = f"{PACKAGE}.{name}" if name else PACKAGE
    try:
        return importlib.import_module(qualified)
    except (ImportError, OSError) as exc:          # OSError: a torch whose shared libraries do not load
        if _torch_missing(exc):
            raise torch_missing_error(purpose) from exc
        raise OracleUnavailable(f"{purpose} needs the PyTorch oracle {qualified}, which failed to import: "
                                f"{type(exc).__name__}: {exc}", f"{PACKAGE} unavailable: {exc}") from exc


def available(name=""):
    """``(True, None)`` when ``reference_torch.<name>`` imports, else ``(False, reason)`` (see
    :class:`OracleUnavailable`). Importing it imports torch."""
    try:
        load(name)
    except OracleUnavailable as exc:
        return False, exc.reason
    return True, None


def check_against_torch(forward, backward, torch_fn, inputs, dtype="float64", **kwargs):
    """Your NumPy ``forward``/``backward`` pair against ``torch_fn`` under torch's autograd.

    Runs ``forward(**inputs) -> out`` or ``(out, cache)`` and ``backward(dout, cache) -> grads`` (a tuple
    in the order of the floating-point inputs, or a dict ``name -> grad``), and ``torch_fn(**tensors)``
    on the same inputs (cast to ``dtype``) with the same random upstream gradient ``dout ~ N(0, 1)``
    (``seed=0``, the checkers' own stream, never your inputs'; never all ones). Returns a
    ``TorchCheckResult``: per tensor (``out`` and each input's gradient) the max abs and normwise
    relative error and the worst element (index, ours, torch's), ``.ok``, ``str()`` the table,
    ``.raise_if_failed()``.

    Tolerance (``rtol``, normwise): 1e-10 in float64, where both sides agree to ~1e-15..1e-12 (the
    same maths rounded in a different order, ``u = 1.1e-16``); 1e-4 in float32 (``u = 6e-8``,
    amplified by reductions and cancellations to ~1e-7..1e-5). Finite differences cannot check float32
    code: their round-off ``u / h`` is 6% of the gradient at ``h = 1e-6``; torch's float32 autograd can.
    Options: ``seed``, ``rtol``, ``atol``, ``verbose``, ``raise_exception`` (raise ``GradcheckError`` on a
    failure; default False, unlike torch's gradcheck: the report is returned, falsy when it failed). Full
    documentation:
    ``reference_torch.check.user.check_against_torch`` and docs/study-tools.md.

    Raises :class:`OracleUnavailable` (an ImportError, with the install command) without torch.
    """
    impl = load("check.user", "nt.check_against_torch").check_against_torch
    return impl(forward, backward, torch_fn, inputs, dtype, **kwargs)


def check_against_torch_module(our_module, torch_module, *inputs, **kwargs):
    """Your module against a ``torch.nn.Module``: the output, the input gradients and every parameter's.

    Our weights go into ``torch_module`` by ``state_dict`` name (missing or extra keys are refused,
    naming them); both run on the same inputs and random ``dout`` in our module's dtype. Options:
    ``forward_kwargs``, ``torch_kwargs``, ``input_names``, ``seed``, ``rtol``, ``atol``, ``eval_mode``,
    ``verbose``, ``raise_exception``; tolerances as :func:`check_against_torch`. Full documentation:
    ``reference_torch.check.user.check_against_torch_module``. Raises :class:`OracleUnavailable`
    without torch.
    """
    impl = load("check.user", "nt.check_against_torch_module").check_against_torch_module
    return impl(our_module, torch_module, *inputs, **kwargs)
