"""The repository's Markdown, as a reader on GitHub follows it: every image a page shows is a tracked,
small file of the checkout (``*.png`` is ignored by .gitignore except under docs/images/), and every
relative link and ``#anchor`` leads somewhere (a file that exists, a heading of the page it names)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _paths import REPO_ROOT

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked files")

MAX_IMAGE_BYTES = 150_000
LINK = re.compile(r"(!?)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMG_TAG = re.compile(r"<img\b[^>]*\bsrc=[\"']([^\"']+)[\"']", re.I)


def _tracked(*patterns: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks and inline code spans (a link shown as code is no link)."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (``_`` and ``-`` kept), spaces as
    ``-``; inline code and link syntax count as their text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file: its headings' slugs, a repeated one numbered ``-1``, ``-2`` ... as
    GitHub numbers them, and any explicit ``<a id=...>`` / ``<a name=...>``."""
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    out = set(re.findall(r"<a\s+(?:id|name)=[\"']([^\"']+)[\"']", text))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text,
                                                                       flags=re.M | re.S), flags=re.M):
        slug = github_slug(heading)
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def _links(path: Path) -> list[tuple[bool, str]]:
    """(is an image, target) for every link and image of a Markdown file, outside code."""
    text = _prose(path.read_text(encoding="utf-8"))
    return [(bang == "!", target) for bang, target in LINK.findall(text)] + [(True, t) for t in IMG_TAG.findall(text)]


def _local(target: str) -> bool:
    return not re.match(r"[a-z][a-z0-9+.-]*:", target, re.I)          # no http:, mailto: ...


MARKDOWN = sorted(_tracked("*.md")) if shutil.which("git") else []


def test_the_scan_reads_links_images_and_slugs_as_github_does():
    assert github_slug("17. The decoder: causal self-attention, cross-attention") == (
        "17-the-decoder-causal-self-attention-cross-attention")
    assert github_slug("Sequence to sequence (`--model seq2seq`)") == "sequence-to-sequence---model-seq2seq"
    assert LINK.findall('see ![curves](docs/images/a.png "title") and [x](b.md#c) but') == [
        ("!", "docs/images/a.png"), ("", "b.md#c")]
    assert _prose("a `[x](y.md)` b\n```\n[z](w.md)\n```\n") == "a  b\n\n"


def test_every_image_a_markdown_file_shows_is_tracked_and_small():
    tracked = _tracked()
    shown = 0
    for md in MARKDOWN:
        page = REPO_ROOT / md
        for is_image, target in _links(page):
            if not (is_image and _local(target)):
                continue
            shown += 1
            image = (page.parent / target.split("#")[0]).resolve()
            name = image.relative_to(REPO_ROOT).as_posix()
            assert name in tracked, f"{md} shows {target}, which is not tracked by git (a checkout lacks it)"
            assert image.stat().st_size <= MAX_IMAGE_BYTES, (
                f"{md} shows {target}: {image.stat().st_size:,} bytes, above {MAX_IMAGE_BYTES:,}")
    assert shown >= 1


def test_every_relative_link_and_anchor_of_the_markdown_resolves():
    broken = []
    for md in MARKDOWN:
        page = REPO_ROOT / md
        for _, target in _links(page):
            if not _local(target):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{md}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{md}: {target} (no heading of {dest.relative_to(REPO_ROOT)} has that anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)
