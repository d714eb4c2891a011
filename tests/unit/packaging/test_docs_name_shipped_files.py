"""The docs (README.md and docs/*.md, which ship in the collection) name only files a user of the
installed collection has, or say plainly that a file lives in the source repository.

What counts as naming a file: a path of this repository (a tracked or untracked, not ignored, file
or one of its directories; globs allowed; ``make TARGET`` names the Makefile) written

* in backticks (every word of the code span is tried, so `python3 hack/cluster.py up` names
  ``hack/cluster.py``),
* as the target of a relative link, resolved from the page's directory, or
* as a word of a fenced code block.

Such a file must ship in the tarball ``ansible-galaxy collection build`` makes, and files under
``hack/``, ``tools/``, ``benchmarks/``, ``tests/`` and the ``Makefile`` always count as not shipped.
Otherwise the mention must be introduced as being in the source repository: the words "source
repository" appear in the same sentence (of a paragraph), list item or table row, in the paragraph
right before a code block (or in the block), or in the heading of a section that contains the mention.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
PHRASE = "source repository"
SOURCE_ONLY = ("hack/", "tools/", "benchmarks/", "tests/", "Makefile")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

CODE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
LIST_ITEM = re.compile(r"^\s*([-*]|\d+\.)\s+")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


@dataclass
class Mention:
    page: str
    line: int
    path: str
    unit: str  # the sentence, list item, table row or code block it is in
    context: str  # headings above it and, for a code block, the paragraph before it


def _repository_paths() -> tuple[set[str], set[str]]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\n")
    files = {name for name in listed if name and (REPO / name).is_file()}
    directories = {str(parent) for name in files for parent in PurePosixPath(name).parents if str(parent) != "."}
    return files, directories


FILES, DIRECTORIES = _repository_paths()


def _repository_path(word: str, page: Path) -> str | None:
    """The repository path ``word`` names, if it names one."""
    word = word.strip("\"'()[],;:").removeprefix("./").rstrip("/.")
    word = re.sub(r":\d+$", "", word)
    if not word or word.startswith(("/", "~", "$", "-", "http")):
        return None
    page_dir = page.parent.relative_to(REPO)
    candidates = [word] if "/" not in word and page_dir == Path(".") else [word, str(page_dir / word)]
    for candidate in map(str, map(PurePosixPath, candidates)):
        if candidate in FILES or candidate in DIRECTORIES:
            return candidate
        if any(c in candidate for c in "*?[") and fnmatch.filter(FILES, candidate):
            return candidate
    return None


def _words_naming_paths(text: str, page: Path) -> list[str]:
    found = []
    for line in text.splitlines():
        words = line.replace("=", " ").split()
        if words[:1] == ["make"] or (len(words) > 1 and words[0] in ("$", "#") and words[1] == "make"):
            found.append("Makefile")
        found += [path for word in words if (path := _repository_path(word, page))]
    return found


def _sentences(paragraph: str) -> list[str]:
    spans: list[str] = []

    def mask(match: re.Match) -> str:
        spans.append(match.group(0))
        return f"\0{len(spans) - 1}\0"

    masked = CODE_SPAN.sub(mask, paragraph)
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z\0(\[*_])", masked)
    return [re.sub(r"\0(\d+)\0", lambda m: spans[int(m.group(1))], part) for part in parts]


def _mentions_in_prose(unit: str, page: Path) -> list[str]:
    found = []
    for span in CODE_SPAN.findall(unit):
        found += _words_naming_paths(span, page)
    for target in LINK.findall(unit):
        if target.startswith(("http:", "https:", "mailto:", "#")):
            continue
        resolved = (page.parent / target.split("#", 1)[0]).resolve()
        if resolved.is_relative_to(REPO) and (path := _repository_path(str(resolved.relative_to(REPO)), REPO / "README.md")):
            found.append(path)
    return found


def _mentions(page: Path, text: str | None = None) -> list[Mention]:
    name = str(page.relative_to(REPO))
    lines = (page.read_text() if text is None else text).splitlines()
    headings: list[tuple[int, str]] = []
    mentions: list[Mention] = []
    previous_paragraph = ""
    index = 0

    def context(extra: str = "") -> str:
        return " / ".join(text for _level, text in headings) + " / " + extra

    while index < len(lines):
        line = lines[index]
        start = index + 1
        if line.startswith("```"):
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            block = "\n".join(lines[index + 1 : end])
            mentions += [Mention(name, start, path, block, context(previous_paragraph)) for path in _words_naming_paths(block, page)]
            index = end + 1
            previous_paragraph = ""
            continue
        if heading := HEADING.match(line):
            level = len(heading.group(1))
            headings = [h for h in headings if h[0] < level] + [(level, heading.group(2))]
            index += 1
            previous_paragraph = ""
            continue
        if not line.strip():
            index += 1
            continue
        if line.lstrip().startswith("|"):
            mentions += [Mention(name, start, path, line, context()) for path in _mentions_in_prose(line, page)]
            index += 1
            previous_paragraph = ""
            continue
        # A list item (with its continuation lines) or a paragraph: up to a blank line, a new
        # item, a table, a heading or a code block.
        block = [line]
        index += 1
        while index < len(lines) and lines[index].strip() and not LIST_ITEM.match(lines[index]):
            if lines[index].startswith(("```", "|", "#")):
                break
            block.append(lines[index])
            index += 1
        text = " ".join(part.strip() for part in block)
        units = [text] if LIST_ITEM.match(line) else _sentences(text)
        for unit in units:
            mentions += [Mention(name, start, path, unit, context()) for path in _mentions_in_prose(unit, page)]
        previous_paragraph = text
    return mentions


@pytest.fixture(scope="module")
def shipped(built_tarball: Path) -> set[str]:
    with tarfile.open(built_tarball) as archive:
        names = {member.name.removeprefix("./").rstrip("/") for member in archive.getmembers()}
    return names | {str(parent) for name in names for parent in PurePosixPath(name).parents if str(parent) != "."}


def _ships(path: str, shipped: set[str]) -> bool:
    if path.startswith(SOURCE_ONLY):
        return False
    return path in shipped or bool(fnmatch.filter(shipped, path))


def test_the_docs_name_repository_files() -> None:
    """The check below looks at something: the docs do name files of both kinds."""
    named = {m.path for page in PAGES for m in _mentions(page)}
    assert "docs/awx.md" in named or "extensions/awx/configure_awx.yml" in named
    assert any(path.startswith(SOURCE_ONLY) for path in named)


def test_the_parser_finds_each_kind_of_mention() -> None:
    page = REPO / "docs" / "probe.md"  # resolved like a page under docs/, never written
    text = "\n".join(
        [
            "# Title",
            "",
            "Run `python3 hack/cluster.py up` first. Then read [the guide](awx.md#setup).",
            "",
            "- `benchmarks/drain_100.py` in the source repository prints figures",
            "",
            "| `tools/kwok` | a row |",
            "",
            "```console",
            "make demo",
            "```",
        ]
    )
    found = {(m.path, PHRASE in m.unit) for m in _mentions(page, text)}
    assert found == {("hack/cluster.py", False), ("docs/awx.md", False), ("benchmarks/drain_100.py", True), ("tools/kwok", False), ("Makefile", False)}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_file_named_ships_or_is_introduced_as_in_the_source_repository(page: Path, shipped: set[str]) -> None:
    wrong = [
        f"{m.page}:{m.line}: {m.path} is not in the installed collection; say it is in the {PHRASE}: {m.unit[:160]!r}"
        for m in _mentions(page)
        if not _ships(m.path, shipped) and PHRASE not in (m.unit + " " + m.context).lower()
    ]
    assert not wrong, "\n".join(wrong)
