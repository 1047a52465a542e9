"""Command line: ``python -m numpy_transformer COMMAND ...`` (also the ``numpy-transformer`` script).

Each command lives in its own module ``numpy_transformer.cli.<name>`` exposing
``register(subparsers)``, which adds its sub-parser and sets ``func`` (called with the parsed
arguments, returning the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .. import __version__
from ..utils.text import plain

# One entry per command module; a module that is missing is simply not offered.
COMMAND_MODULES = ["demo", "gradcheck", "check", "drill", "train", "sample", "ablate", "plot"]


def positive_int(text):
    """argparse type: an int >= 1 (argparse then reports ``argument --x: must be ...``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def nonnegative_int(text):
    """argparse type: an int >= 0 (seeds)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {value}")
    return value


def positive_float(text):
    """argparse type: a finite float > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def nonnegative_float(text):
    """argparse type: a finite float >= 0 (e.g. a time limit where 0 means none)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def probability(text):
    """argparse type: a float in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text}")
    return value


def parse_tokens(text, seq_len, vocab_size):
    """One ``--tokens`` value (``predict`` and ``plot attention`` share it): a source sequence of ids
    separated by spaces or commas, exactly ``seq_len`` of them (the length the model was trained on),
    each in ``[0, vocab_size)``; returns the list of ids or raises ValueError naming what is wrong."""
    try:
        ids = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"--tokens must be integers separated by spaces, got {text!r}") from None
    if len(ids) != seq_len:
        raise ValueError(f"--tokens: the model was trained on length {seq_len}; got {len(ids)} tokens in {text!r}")
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(f"--tokens: token ids must lie in [0, {vocab_size}), got {bad[0]}")
    return ids


def build_parser(argv=None):
    """The command-line parser. When ``argv`` names a command, only that command's module is imported
    (``drill check`` then does not pay for importing training, plotting, the registry...); ``--version``
    alone registers none; otherwise every command is registered, so that ``--help`` and a mistyped command
    list them all."""
    parser = argparse.ArgumentParser(
        prog="numpy-transformer",
        description="Transformers (encoder, decoder, GPT) in pure NumPy with hand-written backward passes.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version (numpy-transformer X.Y.Z) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = ([argv[0]] if argv and argv[0] in COMMAND_MODULES
              else [] if argv == ["--version"] else COMMAND_MODULES)
    for name in chosen:
        try:
            module = importlib.import_module(f"numpy_transformer.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"numpy_transformer.cli.{name}":
                raise                                   # a real missing dependency: say so
            continue                                    # that command is not installed here
        module.register(sub)
    return plain_help(parser)


def plain_help(parser):
    """``parser`` and its sub-parsers with every description, epilog and help made plain text: the
    docstrings used as help are reStructuredText (double backquotes, ``:func:`...```), which
    ``--help`` would show verbatim."""
    for attr in ("description", "epilog"):
        if getattr(parser, attr, None):
            setattr(parser, attr, plain(getattr(parser, attr)))
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:          # the sub-commands' one-line help
                choice.help = plain(choice.help) if isinstance(choice.help, str) else choice.help
            for sub in set(action.choices.values()):
                plain_help(sub)
    return parser


def reader_gone():
    """After a BrokenPipeError (``... | head`` closed the pipe): point stdout at devnull, so that the
    interpreter's final flush does not fail again, and return the exit status to leave with (141, as a
    shell reports a process killed by SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):          # no real file descriptor behind sys.stdout (captured output)
        pass
    return 141


#: Ctrl-C before the command starts (while its modules load): the same line as ``__main__``'s
STARTING_UP = "interrupted while starting up, nothing done"
#: Ctrl-C during a command that handles it no further (``train`` saves a checkpoint first and says so)
INTERRUPTED = "interrupted; the command stopped"


def main(argv=None):
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status (130 after
    Ctrl-C: ``interrupted while starting up, nothing done`` while the command's modules load,
    ``interrupted; the command stopped`` during a command that does not say more itself)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    started = False
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        started = True
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(INTERRUPTED if started else STARTING_UP, file=sys.stderr)
        return 130
    except BrokenPipeError:
        return reader_gone()
