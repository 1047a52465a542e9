"""``drill``: interview practice. Write softmax, LayerNorm, attention ... forward and backward by hand.

  drill list                    the exercises, with difficulty, target time and what each covers
  drill start NAME [--dir DIR]  a skeleton to fill in (exact signatures, shapes); starts the clock
  drill check FILE              grade it against the verified implementation; diagnose mistakes
  drill solution NAME           print the reference solution and its derivation (spoiler)

Exit status of ``check``: 0 all checks pass, 1 some fail, 2 the file cannot be graded.
"""

from __future__ import annotations

import argparse
import difflib
import sys

from . import nonnegative_float, nonnegative_int, positive_float, positive_int


def _drills():
    from .. import drills
    return drills


def _unknown(name):
    d = _drills()
    close = difflib.get_close_matches(name, list(d.EXERCISES), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    print(f"unknown exercise {name!r}{hint}; the exercises are: {', '.join(d.EXERCISES)}")
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
        path = d.start(ex.name, args.dir, force=args.force)
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


def cmd_check(args):
    d = _drills()
    if args.exercise is not None and d.get(args.exercise) is None:
        return _unknown(args.exercise)
    return d.check_file(args.file, exercise=args.exercise, seed=args.seed, cases=args.cases, timeout=args.timeout,
                        call_timeout=args.call_timeout, torch="off" if args.no_torch else "auto",
                        verbose=args.verbose, quiet=args.quiet, show_output=args.show_output)


def cmd_solution(args):
    d = _drills()
    ex = d.get(args.name)
    if ex is None:
        return _unknown(args.name)
    sys.stdout.write(d.solution_text(ex.name))
    return 0


def add_arguments(p):
    sub = p.add_subparsers(dest="drill_command", metavar="{list,start,check,solution}")
    sub.required = True
    p_list = sub.add_parser("list", help="the exercises")
    p_list.set_defaults(func=cmd_list)

    p_start = sub.add_parser("start", help="write a skeleton to fill in (starts the interview clock)")
    p_start.add_argument("name", help="exercise name (see `drill list`)")
    p_start.add_argument("--dir", default=".", help="directory to write NAME.py in (default: current)")
    p_start.add_argument("--force", action="store_true", help="overwrite an existing file")
    p_start.set_defaults(func=cmd_start)

    p_check = sub.add_parser("check", help="grade your file against the verified implementation")
    p_check.add_argument("file", help="your exercise file")
    p_check.add_argument("--exercise", default=None,
                         help="which exercise (default: from the file's `# drill:` header or its functions)")
    p_check.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the random cases (default 0)")
    p_check.add_argument("--cases", type=positive_int, default=40, help="number of cases (default 40)")
    p_check.add_argument("--timeout", type=positive_float, default=None,
                         help="wall-clock limit in seconds for the whole grading (default 20 + 2 per case, >= 60)")
    p_check.add_argument("--call-timeout", type=nonnegative_float, default=10.0,
                         help="limit in seconds for one call of your function (default 10; 0 = no limit)")
    p_check.add_argument("--no-torch", action="store_true",
                         help="do not re-check the reference against PyTorch even when it is installed")
    p_check.add_argument("-v", "--verbose", action="store_true", help="show the tags of every case")
    p_check.add_argument("-q", "--quiet", action="store_true", help="no per-case lines")
    p_check.add_argument("--show-output", action="store_true", help="show what your code printed")
    p_check.set_defaults(func=cmd_check)

    p_sol = sub.add_parser("solution", help="print the reference solution and its derivation (spoiler)")
    p_sol.add_argument("name", help="exercise name")
    p_sol.set_defaults(func=cmd_solution)


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
