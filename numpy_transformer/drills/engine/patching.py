"""Running a patched solution cheaply: its top-level statements compiled one chunk at a time, each chunk
compiled once per check.

A known mistake changes a line or two of one function of the exercise's ``solution.py``; compiling the
whole patched file again for each of dozens of mistakes (and pairs of them) costs more than running it.
:func:`exec_source` splits the source at its top-level ``def``/``class`` statements (a decorator stays
with what it decorates), compiles each chunk once (:func:`_compiled`, cached by its text and first line:
the chunks a patch leaves alone are the unpatched solution's) and runs the chunks in order in one namespace, which is
what running the whole file does. When a chunk does not compile on its own (a split inside a statement)
or the file uses ``from __future__``, the file is compiled whole, as before.
"""

from __future__ import annotations
import __future__

import functools
import re

__all__ = ["FLAGS", "exec_source", "split_top_level"]

#: how every patched solution is compiled: with postponed annotations, as the whole file always was (a
#: ``compile`` in this package inherited its ``from __future__ import annotations``), now said explicitly
FLAGS = __future__.annotations.compiler_flag

_START = re.compile(r"(?:async\s+def|def|class)\b|@")


def split_top_level(source):
    """``source`` cut before each top-level ``def``, ``class`` or decorator (a decorated statement stays
    whole); the chunks joined give ``source`` back."""
    lines = source.splitlines(keepends=True)
    chunks, current, after_decorator = [], [], False
    for line in lines:
        starts = bool(_START.match(line))
        if starts and current and not after_decorator:
            chunks.append("".join(current))
            current = []
        current.append(line)
        if line.strip() and not line[0].isspace():
            after_decorator = line.startswith("@")
    if current:
        chunks.append("".join(current))
    return chunks


@functools.lru_cache(maxsize=4096)
def _compiled(text, path, line):
    """The code of one chunk starting at line ``line`` of the file (blank lines before it keep every line
    number the file's); None when it does not compile on its own."""
    try:
        return compile("\n" * (line - 1) + text, path, "exec", flags=FLAGS, dont_inherit=True)
    except SyntaxError:
        return None


def exec_source(source, path, namespace):
    """Run ``source`` (a file's text, reported as ``path``) in ``namespace``, as ``exec(compile(source,
    path, "exec", flags=FLAGS, dont_inherit=True), namespace)`` does (the same code objects, line numbers
    included), compiling only the chunks not compiled before."""
    codes, line = [], 1
    for chunk in ([] if "__future__" in source else split_top_level(source)):
        codes.append(_compiled(chunk, path, line))
        line += chunk.count("\n")
    if not codes or any(c is None for c in codes):
        exec(compile(source, path, "exec", flags=FLAGS, dont_inherit=True), namespace)
        return
    for code in codes:
        exec(code, namespace)
