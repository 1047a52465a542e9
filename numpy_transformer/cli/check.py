"""``numpy-transformer check FILE``: your own NumPy code in FILE against PyTorch's autograd.

FILE is a Python file that defines, in one of two forms:

  functions  forward(**inputs) -> out or (out, cache); backward(dout, cache) -> gradients (a tuple
             in the order of the float inputs, or a dict name -> gradient); torch_fn(**tensors) ->
             tensor; inputs() -> dict name -> array (float arrays are cast to --dtype)
  module     our_module() -> a numpy_transformer module; torch_module() -> a torch.nn.Module with
             the same state_dict keys (our weights are copied into it); inputs() -> a tuple of the
             forward's positional inputs (cast to our module's dtype)

Both sides run on the same inputs with the same random upstream gradient (--seed); the report gives,
per tensor (the output and every gradient), the max abs and relative error and the worst element.
Default tolerance: 1e-10 relative in float64, 1e-4 in float32 (docs/study-tools.md says why).
The exit status is 0 when everything agrees, 1 when a tensor differs, 2 for a bad FILE or option.
Needs PyTorch.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np

from .. import oracle
from . import nonnegative_float, nonnegative_int
from .json_output import add_json_option, emit, report_to_stderr

__all__ = ["register", "run", "load_check_file", "result_document"]

JSON_SCHEMA = ('{"command": "check", "file", "form" ("functions" or "module"), "passed", "dtype", "rtol", "atol", '
               '"seed", "torch_version", "notes", "checks": [{"name", "kind" (output, input or parameter), "shape", '
               '"max_abs_err", "rel_err", "scale", "allowed", "index" (the worst element), "ours", "torch", '
               '"passed", "note"}]}')

FUNCTION_FORM = ("forward", "backward", "torch_fn", "inputs")
MODULE_FORM = ("our_module", "torch_module", "inputs")


def register(subparsers):
    p = subparsers.add_parser("check", help="check your own forward/backward (or module) in a file against torch",
                              description=__doc__.split("\n\n", 1)[1].strip(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="a Python file defining forward, backward, torch_fn and inputs "
                                                "(or our_module, torch_module and inputs)")
    p.add_argument("--dtype", choices=["float64", "float32"], default=None,
                   help="precision of both sides, function form (default float64)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the upstream gradient")
    p.add_argument("--rtol", type=nonnegative_float, default=None,
                   help="relative tolerance (default: 1e-10 in float64, 1e-4 in float32)")
    add_json_option(p, JSON_SCHEMA)
    p.set_defaults(func=run)
    return p


class CheckFileError(ValueError):
    """FILE cannot be used: missing, not Python, or without the functions of either form."""


def load_check_file(path):
    """Import FILE as a module; returns ``(module, form)`` with form ``"functions"`` or ``"module"``."""
    if not os.path.isfile(path):
        raise CheckFileError(f"FILE {path!r} does not exist or is not a file")
    spec = importlib.util.spec_from_file_location("_nt_check_file", path)
    if spec is None or spec.loader is None:
        raise CheckFileError(f"FILE {path!r} cannot be imported as Python (give a .py file)")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        raise CheckFileError(f"importing {path!r} failed: {type(exc).__name__}: {exc}") from exc
    for form, needed in (("functions", FUNCTION_FORM), ("module", MODULE_FORM)):
        if all(callable(getattr(mod, n, None)) for n in needed):
            return mod, form
    have_f = [n for n in FUNCTION_FORM if callable(getattr(mod, n, None))]
    have_m = [n for n in MODULE_FORM if callable(getattr(mod, n, None))]
    form, have, needed = (("module", have_m, MODULE_FORM) if len(have_m) > len(have_f) else
                          ("functions", have_f, FUNCTION_FORM))
    missing = [n for n in needed if n not in have]
    raise CheckFileError(f"{path!r} defines no {', '.join(missing)}: a check file defines "
                         f"{', '.join(FUNCTION_FORM)} (functions), or {', '.join(MODULE_FORM)} (a module)"
                         + (f"; it has {', '.join(have)}" if have else ""))


def result_document(result, path, form):
    """The JSON document of ``check``: the figures of the report's table, one object per tensor."""
    checks = [{"name": c.name, "kind": c.kind, "shape": list(c.shape), "max_abs_err": c.max_abs_err,
               "rel_err": c.rel_err, "scale": c.scale, "allowed": c.allowed,
               "index": None if c.index is None else list(c.index), "ours": c.ours, "torch": c.torch,
               "passed": c.passed, "note": c.note} for c in result.checks]
    return {"command": "check", "file": path, "form": form, "passed": result.ok, "dtype": np.dtype(result.dtype).name,
            "rtol": result.rtol, "atol": result.atol, "seed": result.seed, "torch_version": result.torch_version,
            "notes": list(result.notes), "checks": checks}


def run(args):
    """The ``check`` command: the report (to stderr with ``--json``, then the document on stdout)."""
    with report_to_stderr(getattr(args, "json", False)):
        rc, document = _run(args)
    if getattr(args, "json", False) and document is not None:
        emit(document)
    return rc


def _run(args):
    """``(exit status, JSON document or None)``."""
    try:
        impl = oracle.load("check.user", "numpy-transformer check")
    except oracle.OracleUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2, None
    try:
        mod, form = load_check_file(args.file)
        if form == "module" and args.dtype is not None:
            raise CheckFileError("--dtype applies to the functions form; the module form runs in our_module()'s "
                                 "dtype")
        inputs = mod.inputs()
        if form == "functions":
            result = impl.check_against_torch(mod.forward, mod.backward, mod.torch_fn, inputs,
                                              dtype=np.dtype(args.dtype or "float64"), seed=args.seed, rtol=args.rtol)
        else:
            inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
            result = impl.check_against_torch_module(mod.our_module(), mod.torch_module(), *inputs, seed=args.seed,
                                                     rtol=args.rtol)
    except (CheckFileError, TypeError, ValueError) as exc:      # a bad FILE, or arguments the checker refused
        print(f"error: {exc}", file=sys.stderr)
        return 2, None
    print(result)
    return (0 if result.ok else 1), result_document(result, args.file, form)
