"""``--json``: one JSON document on stdout, for scripts and notebooks.

``evaluate``, ``predict``, ``gradcheck``, ``check`` and ``drill check`` take ``--json``. The command
then runs as usual but writes its human report (progress and messages included) to stderr, and prints
exactly one JSON document on stdout when it has a result: ``{"command": ..., ...}`` with the figures of
the human report. The exit status is unchanged (a failed check still exits 1, its document saying
``"passed": false``). An error (a bad file or option, status 2) is the usual one ``error: ...`` line on
stderr and nothing on stdout: a script reads the document only when stdout is not empty. Numbers
that are not finite (a row not tested) are ``null``.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from typing import Any, Iterator

import numpy as np

__all__ = ["add_json_option", "report_to_stderr", "emit", "plain_value"]


def add_json_option(parser, schema: str) -> None:
    """Add ``--json`` to ``parser``; ``schema`` says, briefly, what the document holds."""
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout (the human report goes to stderr; the exit status "
                             f"is unchanged; an error prints nothing on stdout): {schema}")


@contextlib.contextmanager
def report_to_stderr(active: bool) -> Iterator[None]:
    """While ``active``, everything printed to stdout goes to stderr (the human report of ``--json``)."""
    if not active:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield


def plain_value(value: Any) -> Any:
    """``value`` made of what JSON holds: NumPy scalars and arrays become numbers and lists, tuples
    lists, a NaN or infinite float ``None``."""
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain_value(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def emit(document: dict) -> None:
    """Print ``document`` as one JSON document (one line) on stdout (call it outside
    :func:`report_to_stderr`)."""
    print(json.dumps(plain_value(document), allow_nan=False), flush=True)
