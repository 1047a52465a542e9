"""docs/derivations.md reads right: every code link resolves to a function that exists and every code excerpt
quoted after it appears verbatim (whitespace aside) in that function's source; every relative link and
in-page anchor resolves; the contents list every section; the tiled section gives each symbol one meaning;
no GitHub math hazards.
"""

from __future__ import annotations

import ast
import re

from tests.project.derivation_registry import DOC, doc_text

_LINK = re.compile(r"\[`([\w.]+)`\]\((\.\./[^)#\s]+\.py)\)")
_MATH_SPAN = re.compile(r"\$`[^`]*`\$")
_CODE_SPAN = re.compile(r"`([^`]+)`")


def _definition(tree, dotted):
    """The ast node of ``name`` or ``Class.method`` at module level, or None."""
    nodes = tree.body
    node = None
    for part in dotted.split("."):
        node = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        nodes = node.body
    return node


def _norm(s):
    return " ".join(s.split())


def test_code_links_and_excerpts():
    """Every [`name`](../file.py) exists there, and every `excerpt` after it on the line is in its source."""
    n_links = n_excerpts = 0
    for lineno, line in enumerate(doc_text().splitlines(), 1):
        line = _MATH_SPAN.sub("", line)
        links = list(_LINK.finditer(line))
        for i, m in enumerate(links):
            name, rel = m.groups()
            path = (DOC.parent / rel).resolve()
            assert path.is_file(), f"doc line {lineno}: {rel} does not exist"
            source = path.read_text(encoding="utf-8")
            node = _definition(ast.parse(source), name)
            assert node is not None, f"doc line {lineno}: {name} is not defined in {rel}"
            segment = _norm(ast.get_source_segment(source, node))
            end = links[i + 1].start() if i + 1 < len(links) else len(line)
            for excerpt in _CODE_SPAN.findall(line[m.end():end]):
                assert _norm(excerpt) in segment, f"doc line {lineno}: `{excerpt}` is not in {name} ({rel})"
                n_excerpts += 1
            n_links += 1
    assert n_links >= 20 and n_excerpts >= 30, (n_links, n_excerpts)


def _github_slug(heading):
    slug = heading.strip().lower()
    slug = re.sub(r"[^\w\- ]", "", slug)
    return slug.replace(" ", "-")


def test_relative_links_and_anchors():
    text = doc_text()
    outside_code = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    slugs = {_github_slug(h) for h in re.findall(r"^#{1,6} (.+)$", outside_code, flags=re.M)}
    for target in re.findall(r"\]\(([^)\s]+)\)", outside_code):
        if target.startswith("#"):
            assert target[1:] in slugs, f"anchor {target} matches no heading"
        elif not re.match(r"[a-z]+://", target):
            assert (DOC.parent / target.split("#")[0]).resolve().exists(), f"link {target} is broken"


def test_the_contents_list_every_section():
    """The "Contents:" line links each numbered section, in order (a section added must be listed)."""
    text = doc_text()
    outside_code = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    sections = re.findall(r"^## (\d+)\. (.+)$", outside_code, flags=re.M)
    contents = outside_code.split("Contents:", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"\[(\d+) [^]]*\]\(#([^)]+)\)", contents)
    assert [n for n, _ in listed] == [n for n, _ in sections], (listed, sections)
    assert [a for _, a in listed] == [_github_slug(f"{n}. {title}") for n, title in sections]


def test_tiled_section_gives_each_symbol_one_meaning():
    """In the tiled-attention section m is the running maximum (as in flash_attention_forward's code), so
    the dropout keep-mask, m in sections 9 and 10, is z there."""
    tiled = doc_text().split("Tiled (flash) attention", 2)[-1]
    assert "running maximum $`m`$" in tiled and r"\tfrac{z}{1-p}" in tiled
    assert not re.search(r"\\frac\{m\}|\\tfrac\{m\}|keep-mask \$`m`\$", tiled)


def test_github_math_hazards():
    """Inline maths uses $`...`$ (so Markdown cannot eat _ or *) and display maths ```math blocks."""
    text = re.sub(r"^```.*?^```", "", doc_text(), flags=re.M | re.S)
    text = _MATH_SPAN.sub("", text)
    text = re.sub(r"`[^`]*`", "", text)
    assert "$$" not in text, "use ```math blocks for display maths"
    stray = [line for line in text.splitlines() if "$" in line]
    assert not stray, f"inline maths must be written $`...`$: {stray[:3]}"
