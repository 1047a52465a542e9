"""``drill stats``: attempts, passes, time to pass and recurring mistakes per exercise.

Every ``drill check`` (and every exercise graded by ``drill mock``) adds one attempt to a small plain JSON
file under the user's data directory: ``$NT_DRILL_DATA`` when set (tests use it), else
``$XDG_DATA_HOME/numpy-transformer``, else ``~/.local/share/numpy-transformer`` — never the checkout.

Several checks may finish at once: :func:`record` holds an exclusive lock (``drill-stats.json.lock``) for
its read-modify-write and replaces the file atomically (a private temporary file, then ``os.replace``), so
no record is lost. A file that is not valid stats JSON is never silently reset: ``drill stats`` says it
cannot be read, and the next :func:`record` keeps it aside as ``drill-stats.json.corrupt-<time>`` and says
so on standard error before starting a new one. A submission refused (its imports, or introspection
such as ``gc``) counts as an attempt and a refusal (``refusals``), never as a pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time

try:
    import fcntl
except ImportError:                       # pragma: no cover - Windows: no advisory locks, no concurrency
    fcntl = None

from ...utils.text import fit
from .report import format_duration

FILENAME = "drill-stats.json"


def data_dir():
    """The directory holding the stats file (not created here)."""
    if os.environ.get("NT_DRILL_DATA"):
        return os.environ["NT_DRILL_DATA"]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "numpy-transformer")


def stats_path():
    return os.path.join(data_dir(), FILENAME)


def _read(path):
    """``(exercises dict, problem)``: problem is None, or why the file at ``path`` is not valid stats."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"cannot be read ({exc.strerror or exc})"
    except ValueError as exc:
        return {}, f"is not valid JSON ({exc})"
    if not isinstance(data, dict) or not isinstance(data.get("exercises", {}), dict):
        return {}, "is not valid drill stats (not a JSON object with an \"exercises\" object)"
    return data.get("exercises", {}), None


def load():
    """``{exercise: entry}`` (empty when there is no file yet, or it is not valid: see :func:`stats_text`)."""
    return _read(stats_path())[0]


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock on ``path + ".lock"`` for the block (every writer takes it)."""
    if fcntl is None:
        yield
        return
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                      # closing releases the lock


def _keep_aside(path, problem):
    """Rename the invalid file at ``path`` to a unique ``.corrupt-<time>`` name; say so on stderr."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = f"{path}.corrupt-{stamp}-{os.getpid()}"
    os.replace(path, aside)
    print(f"warning: the drill stats file {path} {problem}; kept it as {os.path.basename(aside)} and started "
          "a new one", file=sys.stderr)


def _write_atomically(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"version": 1, "exercises": data}, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def record(result, now=None, mock=False):
    """Add one graded attempt (``check_file``'s ``result`` dict) to the stats file; return its path, or None
    when the file cannot be written (stats are a convenience: grading never fails because of them).

    The read-modify-write holds the file's lock and the write is atomic, so concurrent checks lose no
    record; an invalid file is kept aside (and reported), not overwritten."""
    if not result.get("exercise"):
        return None
    now = time.time() if now is None else now
    path = stats_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with _locked(path):
            data, problem = _read(path)
            if problem is not None and os.path.exists(path):
                _keep_aside(path, problem)
            _add(data, result, now, mock)
            _write_atomically(path, data)
    except OSError:
        return None
    return path


def _add(data, result, now, mock):
    e = data.setdefault(result["exercise"], {"attempts": 0, "passes": 0, "mock_attempts": 0, "first_attempt": now,
                                             "time_to_pass": None, "best_time": None, "mistakes": {}})
    e["attempts"] += 1
    e["mock_attempts"] = e.get("mock_attempts", 0) + (1 if mock else 0)
    e["refusals"] = e.get("refusals", 0) + (1 if result.get("refused") else 0)
    e["last_attempt"] = now
    elapsed = result.get("elapsed")
    if result.get("passed"):
        e["passes"] += 1
        if elapsed is not None:
            if e.get("time_to_pass") is None:
                e["time_to_pass"] = elapsed          # the first pass, on the interview clock
            e["best_time"] = elapsed if e.get("best_time") is None else min(e["best_time"], elapsed)
    for mid in result.get("mistakes", []):
        e["mistakes"][mid] = e["mistakes"].get(mid, 0) + 1


def stats_text():
    data, problem = _read(stats_path())
    lines = [f"drill stats ({stats_path()})", ""]
    if problem is not None:
        lines.append(f"the stats file {stats_path()} {problem}: it cannot be read. The next `drill check` keeps "
                     "it aside (as drill-stats.json.corrupt-<time>) and starts a new one.")
        return fit("\n".join(lines))
    if not data:
        lines.append("no attempts yet: `drill start NAME`, then `drill check FILE` records one.")
        return fit("\n".join(lines))
    w = max(len(n) for n in data)
    lines.append(f"  {'EXERCISE':<{w}}  {'TRIES':>5}  {'PASSES':>6}  {'TO PASS':>9}  {'BEST':>9}  RECURRING MISTAKES")
    for name in sorted(data):
        e = data[name]
        tp = format_duration(e["time_to_pass"]) if e.get("time_to_pass") is not None else "-"
        best = format_duration(e["best_time"]) if e.get("best_time") is not None else "-"
        ms = sorted(e.get("mistakes", {}).items(), key=lambda kv: -kv[1])
        rec = ", ".join(f"{m} x{c}" for m, c in ms[:3]) or "-"
        if e.get("refusals"):
            rec += f"  ({e['refusals']} refused: the library, torch or introspection)"
        lines.append(f"  {name:<{w}}  {e['attempts']:>5}  {e['passes']:>6}  {tp:>9}  {best:>9}  {rec}")
    lines += ["", "  TO PASS: the interview clock (since `drill start`) at the first passing check."]
    return fit("\n".join(lines))
