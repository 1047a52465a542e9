"""``drill stats``: attempts, passes, time to pass and recurring mistakes per exercise.

Every ``drill check`` (and every exercise graded by ``drill mock``) adds one attempt to a small plain JSON
file under the user's data directory: ``$NT_DRILL_DATA`` when set (tests use it), else
``$XDG_DATA_HOME/numpy-transformer``, else ``~/.local/share/numpy-transformer`` — never the checkout.
"""

from __future__ import annotations

import json
import os
import time

from .._text import fit
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


def load():
    """``{exercise: entry}`` (empty when there is no file yet, or it cannot be read as JSON)."""
    try:
        with open(stats_path(), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data.get("exercises", {}) if isinstance(data, dict) else {}


def record(result, now=None, mock=False):
    """Add one graded attempt (``check_file``'s ``result`` dict) to the stats file; return its path, or None
    when the file cannot be written (stats are a convenience: grading never fails because of them)."""
    if not result.get("exercise"):
        return None
    now = time.time() if now is None else now
    data = load()
    e = data.setdefault(result["exercise"], {"attempts": 0, "passes": 0, "mock_attempts": 0, "first_attempt": now,
                                             "time_to_pass": None, "best_time": None, "mistakes": {}})
    e["attempts"] += 1
    e["mock_attempts"] = e.get("mock_attempts", 0) + (1 if mock else 0)
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
    path = stats_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"version": 1, "exercises": data}, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return None
    return path


def stats_text():
    data = load()
    lines = [f"drill stats ({stats_path()})", ""]
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
        lines.append(f"  {name:<{w}}  {e['attempts']:>5}  {e['passes']:>6}  {tp:>9}  {best:>9}  {rec}")
    lines += ["", "  TO PASS: the interview clock (since `drill start`) at the first passing check."]
    return fit("\n".join(lines))
