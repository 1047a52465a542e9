"""Interview drills: write attention, LayerNorm, softmax ... forward and backward by hand, then grade them.

``python -m numpy_transformer drill list | start NAME | check FILE | solution NAME`` (see docs/drills.md).

* :func:`start` writes a skeleton (exact signatures, shapes in the docstrings, no solution) with the
  start time in its header (the interview clock);
* :func:`check_file` grades it as a judge: the user's file runs in a process of its own (a fresh
  interpreter that never imports this package) that only hands back arrays (never sees an expected
  answer, never writes the verdict), and this process compares them
  with :mod:`numpy_transformer.functional` (the verified implementation; PyTorch re-checks our reference
  with ``--torch``) on seeded random cases and edge shapes, and names the classic mistake a wrong output
  matches; a file importing ``numpy_transformer``, ``reference_torch`` or ``torch``, or using ``gc``,
  ``inspect``, frames, ``exec``/``eval``/``compile``, ``importlib`` or ``ctypes``, is refused;
* :func:`solution_text` is the reference solution with its derivation.

Nothing here imports torch; the optional oracle is ``reference_torch.drill_oracle``, imported lazily
(through :mod:`numpy_transformer.oracle`) by the checking process after the grading child has started.
"""

from __future__ import annotations

import os
import textwrap
import time
from datetime import datetime, timezone

from ..utils.text import WIDTH, fit
from .engine.grader import check_file, format_duration
from .exercises import EXERCISES, Exercise, Mistake, get, topic_of

__all__ = ["EXERCISES", "Exercise", "Mistake", "get", "check_file", "start", "skeleton_text", "solution_text",
           "solution_path", "list_text", "format_duration", "strip_hints", "topic_of"]

def skeleton_path(name):
    """The skeleton ``drill start`` writes for exercise ``name``: its folder's ``skeleton.py``."""
    return get(name).skeleton_path


def solution_path(name):
    """The solution ``drill solution`` prints for exercise ``name``: its folder's ``solution.py``."""
    return get(name).solution_path


def _read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def header(ex, filename, now):
    stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (f"# drill: {ex.name}   ({ex.difficulty}, target {ex.minutes} min)\n"
            f"# started: {stamp} (unix {now:.0f})\n"
            f"# check:   python -m numpy_transformer drill check {filename}\n"
            f"# Fill in every body below; keep the names and signatures. NumPy only.\n")


def strip_hints(text):
    """The skeleton without its "Hints:" section (the rest of the module docstring after it)."""
    start = text.find("\nHints:")
    end = text.find('"""', start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return text
    return text[:start + 1] + text[end:]


def skeleton_text(name, filename=None, now=None, hints=True):
    """The skeleton file's text for exercise ``name``, with the header (start time ``now``); ``hints=False``
    leaves out the docstring's "Hints:" section (``drill start --no-hints``, ``drill mock``)."""
    ex = get(name)
    now = time.time() if now is None else now
    body = _read(skeleton_path(ex.name))
    return header(ex, filename or f"{ex.name}.py", now) + "\n" + (body if hints else strip_hints(body))


def start(name, directory=".", force=False, now=None, hints=True):
    """Write the skeleton of ``name`` to ``directory/<name>.py``; return its path.

    Raises FileExistsError when the file exists and ``force`` is False (it would lose the user's work).
    """
    ex = get(name)
    if ex is None:
        raise KeyError(name)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{ex.name}.py")
    if os.path.exists(path) and not force:
        raise FileExistsError(path)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(skeleton_text(ex.name, path, now, hints))
    return path


def solution_text(name):
    """The reference solution of ``name`` followed by its derivation (the folder's ``derivation.md``)."""
    ex = get(name)
    parts = [f"# Reference solution: {ex.name} ({ex.difficulty}, target {ex.minutes} min)",
             f"# It passes `drill check`, whose reference is {ex.reference_name}.",
             "", _read(solution_path(ex.name)).rstrip(), "",
             "# " + "-" * 98,
             f"# Derivation ({os.path.relpath(ex.derivation_path, os.path.dirname(ex.folder))}):", "#"]
    parts.extend(("# " + line).rstrip() for line in _read(ex.derivation_path).rstrip().splitlines())
    return "\n".join(parts) + "\n"


def list_text():
    lines = ["Interview drills: write it by hand, then `drill check` grades it against the verified implementation.",
             ""]
    w = max(len(n) for n in EXERCISES)
    lines.append(f"  {'NAME':<{w}}  {'LEVEL':<6}  {'TARGET':>7}  TOPIC")
    for ex in EXERCISES.values():
        lines.append(f"  {ex.name:<{w}}  {ex.difficulty:<6}  {ex.minutes:>3} min  {topic_of(ex)}")
        lines.append(textwrap.fill(ex.covers, WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6,
                                   break_on_hyphens=False))
    lines += ["",
              "  start:    python -m numpy_transformer drill start NAME [--dir DIR] [--no-hints]",
              "  check:    python -m numpy_transformer drill check FILE [--dump DIR] [--torch]",
              "  solution: python -m numpy_transformer drill solution NAME   (spoiler)",
              "  mock:     python -m numpy_transformer drill mock --minutes 45   (no hints, graded at the end)",
              "  stats:    python -m numpy_transformer drill stats"]
    return fit("\n".join(lines))
