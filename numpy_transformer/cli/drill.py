"""``drill``: interview practice. Write softmax, LayerNorm, attention ... forward and backward by hand.

  drill list                    the exercises: level, target time, topic, what each covers
  drill start NAME [--dir DIR]  a skeleton to fill in (exact signatures, shapes); starts the clock
  drill check FILE              grade it against the verified implementation; diagnose mistakes
  drill solution NAME           print the reference solution and its derivation (spoiler)
  drill mock --minutes 45       a mock interview: drawn by difficulty, no hints, graded at the end
  drill stats                   attempts, passes, time to pass and recurring mistakes per exercise

Exit status of ``check``: 0 all checks pass, 1 some fail (or the file was refused: a drill is
NumPy alone, so a file importing numpy_transformer, reference_torch or torch, or using gc, inspect,
frames, exec/eval/compile, importlib or ctypes, is not run), 2 the file
cannot be graded; 130 on Ctrl-C, 128 + the signal's number on SIGTERM/SIGHUP (the grading processes
and the temporary directory are removed first).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time

from . import nonnegative_float, nonnegative_int, positive_float, positive_int
from .json_output import add_json_option, emit, report_to_stderr


def _drills():
    from .. import drills
    return drills


def _unknown_text(name):
    d = _drills()
    close = difflib.get_close_matches(name, list(d.EXERCISES), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown exercise {name!r}{hint}; the exercises are: {', '.join(d.EXERCISES)}"


def _unknown(name):
    print(_unknown_text(name))
    return 2


def cmd_list(args):
    print(_drills().list_text())
    return 0


def cmd_start(args):
    d = _drills()
    ex = d.get(args.name)
    if ex is None:
        return _unknown(args.name)
    try:
        path = d.start(ex.name, args.dir, force=args.force, hints=not args.no_hints)
    except FileExistsError as exc:
        print(f"{exc} already exists: it may hold your work. Use --force to overwrite it, or --dir to write "
              f"elsewhere. To grade it: python -m numpy_transformer drill check {exc}")
        return 2
    except OSError as exc:
        print(f"cannot write the skeleton in {args.dir!r}: {exc.strerror or exc}")
        return 2
    print(f"wrote {path}  ({ex.name}, {ex.difficulty}; target {ex.minutes} min, the clock is running)")
    print(f"  implement: {', '.join(ex.functions)}  (keep the names and signatures; NumPy only)")
    print(f"  covers:    {ex.covers}")
    print(f"  check:     python -m numpy_transformer drill check {path}")
    print(f"  stuck:     python -m numpy_transformer drill solution {ex.name}   (spoiler)")
    return 0


#: what ``drill check --json`` prints (the figures of the human report; never the expected arrays)
CHECK_SCHEMA = ('{"command": "drill check", "file", "exercise", "passed", "refused" (the file was not run), '
                '"mistakes" (the known mistakes named), "elapsed" (seconds on the interview clock, or null), '
                '"seed", "cases", "cases_graded", "cases_fully_correct", "cases_modified_input", "checks_passed", '
                '"checks", "arrays": [{"name", "function", "passed", "cases", "first_failure" (a case number, or '
                'null)}]}; a file that cannot be graded (status 2) prints no document')


def cmd_check(args):
    """``drill check``: grade the file; with ``--json`` the report goes to stderr and the document (made
    here, in the parent, from what the grading processes reported) to stdout."""
    as_json = getattr(args, "json", False)
    with report_to_stderr(as_json):
        d = _drills()
        if args.exercise is not None and d.get(args.exercise) is None:
            if as_json:                                   # --json: one error line
                print(f"error: {_unknown_text(args.exercise)}", file=sys.stderr)
                return 2
            return _unknown(args.exercise)
        result = {}
        rc = d.check_file(args.file, exercise=args.exercise, seed=args.seed, cases=args.cases, timeout=args.timeout,
                          call_timeout=args.call_timeout, torch="auto" if args.torch else "off",
                          verbose=args.verbose, quiet=args.quiet, show_output=args.show_output, dump=args.dump,
                          result=result)
        if rc in (0, 1):
            from ..drills.engine import stats
            stats.record(result)
    if as_json:
        if rc in (0, 1) and result.get("exercise"):
            emit(dict({"command": "drill check", "file": args.file, "refused": False}, **result))
        else:
            print(f"error: {args.file} could not be graded (status {rc}; the report above says why)", file=sys.stderr)
    return rc


def cmd_stats(args):
    from ..drills.engine import stats
    print(stats.stats_text())
    return 0


def _wait(deadline):
    """Wait until ``deadline`` or until the user presses Enter (or stdin reaches its end)."""
    import select
    while True:
        left = deadline - time.time()
        if left <= 0:
            print("time is up.")
            return
        print(f"  {int(left // 60)} min {int(left % 60):02d} s left; press Enter to finish early", flush=True)
        try:
            ready, _, _ = select.select([sys.stdin], [], [], min(left, 300))
        except (OSError, ValueError):          # no selectable stdin: just wait
            time.sleep(min(left, 300))
            continue
        if ready:
            if not sys.stdin.readline():
                print("(stdin closed: grading now)")
            return


def cmd_mock(args):
    from ..drills.engine import mock
    if args.grade:
        try:
            return mock.grade_mock(args.grade, cases=args.cases)
        except (OSError, ValueError) as exc:
            print(f"cannot read the mock session in {args.grade!r} ({exc}); `drill mock --minutes N` starts one")
            return 2
    directory = args.dir or time.strftime("mock-%Y%m%d-%H%M%S")
    try:
        session = mock.start_mock(directory, args.minutes, seed=args.seed)
    except FileExistsError as exc:
        print(f"{exc} exists: a mock session is already there (grade it with --grade {directory}, or use --dir)")
        return 2
    except OSError as exc:
        print(f"cannot write the mock session in {directory!r}: {exc.strerror or exc}")
        return 2
    print(f"mock interview: {args.minutes} min, {len(session['exercises'])} exercise(s), no hints, in {directory}/")
    for name, f in zip(session["exercises"], session["files"]):
        ex = _drills().get(name)
        print(f"  {os.path.join(directory, f)}  ({ex.difficulty}, target {ex.minutes} min)")
    if args.no_wait:
        print(f"the clock is running; grade them all with: python -m numpy_transformer drill mock --grade {directory}")
        return 0
    _wait(session["started"] + 60 * args.minutes)
    return mock.grade_mock(directory, cases=args.cases)


def cmd_solution(args):
    d = _drills()
    ex = d.get(args.name)
    if ex is None:
        return _unknown(args.name)
    sys.stdout.write(d.solution_text(ex.name))
    return 0


def add_arguments(p):
    sub = p.add_subparsers(dest="drill_command", metavar="{list,start,check,solution,mock,stats}")
    sub.required = True
    p_list = sub.add_parser("list", help="the exercises")
    p_list.set_defaults(func=cmd_list)

    p_start = sub.add_parser("start", help="write a skeleton to fill in (starts the interview clock)")
    p_start.add_argument("name", help="exercise name (see `drill list`)")
    p_start.add_argument("--dir", default=".", help="directory to write NAME.py in (default: current)")
    p_start.add_argument("--force", action="store_true", help="overwrite an existing file")
    p_start.add_argument("--no-hints", action="store_true", help="leave the skeleton's Hints section out")
    p_start.set_defaults(func=cmd_start)

    p_check = sub.add_parser("check", help="grade your file against the verified implementation")
    p_check.add_argument("file", help="your exercise file (NumPy only: a file importing the library, its "
                                      "torch oracle or torch, or using gc, inspect, frames, exec/eval "
                                      "or ctypes, is refused)")
    p_check.add_argument("--exercise", default=None,
                         help="which exercise (default: from the file's `# drill:` header or its functions)")
    p_check.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the random cases (default 0)")
    p_check.add_argument("--cases", type=positive_int, default=40, help="number of cases (default 40)")
    p_check.add_argument("--timeout", type=positive_float, default=None,
                         help="wall-clock limit in seconds for the whole grading (default 20 + 2 per case, >= 60)")
    p_check.add_argument("--call-timeout", type=nonnegative_float, default=10.0,
                         help="limit in seconds for one call of your function (default 10; 0 = no limit)")
    p_check.add_argument("--torch", action="store_true",
                         help="also re-check the reference against PyTorch (a second opinion; slower). By "
                              "default the verified NumPy reference is the oracle")
    p_check.add_argument("--no-torch", action="store_true", help="(the default; kept for old scripts)")
    p_check.add_argument("--dump", default=None, metavar="DIR",
                         help="save the smallest failing case (inputs, expected and received arrays) as .npz")
    p_check.add_argument("-v", "--verbose", action="store_true", help="show the tags of every case")
    p_check.add_argument("-q", "--quiet", action="store_true", help="no per-case lines")
    p_check.add_argument("--show-output", action="store_true", help="show what your code printed")
    add_json_option(p_check, CHECK_SCHEMA)
    p_check.set_defaults(func=cmd_check)

    p_sol = sub.add_parser("solution", help="print the reference solution and its derivation (spoiler)")
    p_sol.add_argument("name", help="exercise name")
    p_sol.set_defaults(func=cmd_solution)

    p_mock = sub.add_parser("mock", help="a mock interview: drawn exercises, no hints, the clock, graded at the end")
    p_mock.add_argument("--minutes", type=positive_int, default=45, help="time allowed (default 45)")
    p_mock.add_argument("--dir", default=None, help="where to write the files (default mock-DATE-TIME)")
    p_mock.add_argument("--seed", type=nonnegative_int, default=None, help="seed of the draw (default: random)")
    p_mock.add_argument("--no-wait", action="store_true",
                        help="write the files and return; grade later with --grade DIR")
    p_mock.add_argument("--grade", default=None, metavar="DIR", help="grade the mock session in DIR now")
    p_mock.add_argument("--cases", type=positive_int, default=None, help="cases per exercise (default 40)")
    p_mock.set_defaults(func=cmd_mock)

    p_stats = sub.add_parser("stats", help="attempts, passes, time to pass, recurring mistakes per exercise")
    p_stats.set_defaults(func=cmd_stats)


def register(subparsers):
    p = subparsers.add_parser("drill", help="interview drills: hand-write attention & co., graded with diagnoses",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)


def main(argv=None):
    """``drill`` on its own (``python -m numpy_transformer.cli.drill list``), without the other commands."""
    p = argparse.ArgumentParser(prog="numpy-transformer drill", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    from . import plain_help
    args = plain_help(p).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        from . import reader_gone
        return reader_gone()


if __name__ == "__main__":
    sys.exit(main())
