"""Plain text for the terminal: the width reports fit, and reStructuredText turned into plain text."""

from __future__ import annotations

import re
import textwrap

WIDTH = 100        # every report, table and help text fits this many columns


def fit(text, width=WIDTH, indent="    "):
    """``text`` with each line longer than ``width`` wrapped; continuation lines keep the line's own
    leading spaces plus ``indent``."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip(" "))]
        out.extend(textwrap.wrap(line.strip(), width, initial_indent=lead, subsequent_indent=lead + indent,
                                 break_long_words=False, break_on_hyphens=False) or [line])
    return "\n".join(out)


_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|obj|exc|ref|doc):`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def plain(text):
    """reStructuredText markup made plain: ``:func:`x``` -> ``x``, double backquotes -> nothing,
    ``name::`` (a literal block follows) -> ``name:``."""
    text = _ROLE.sub(lambda m: m.group(1).lstrip("."), text)
    text = text.replace("``", "")
    return re.sub(r"(\S)::$", r"\1:", text, flags=re.M)
