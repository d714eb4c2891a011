"""The repository carries its own account of the behaviour: docs/behaviour.md.

Nothing that ships may point outside the repository for it (the project's
working notes, upstream proposals or source files on GitHub), and every
section of docs/behaviour.md that something cites must exist.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BEHAVIOUR = REPO / "docs" / "behaviour.md"

# What ships, and so must not point outside the repository.
CHECKED = ("plugins", "roles", "playbooks", "docs", "extensions", "meta", "changelogs/fragments", "README.md")

OUTSIDE_REFERENCES = {
    "SPEC.md": re.compile(r"SPEC\.md"),
    "SPEC section (SPEC §2, SPEC 3.2, SPEC section 4)": re.compile(r"\bSPEC\b"),
    "../shared": re.compile(r"\.\./shared"),
    "shared/seeds": re.compile(r"shared/seeds"),
    "seed document (seed 001, seeds/, the seed)": re.compile(r"\bseeds?[\s_-]*0\d\d|\bseeds/|\bthe seeds?\b", re.IGNORECASE),
    "GitHub URL": re.compile(r"https://github\.com/"),
}

# Directories that are not part of the repository's content.
PRUNED = {".git", ".venv", ".tmp", ".cluster", ".pytest_cache", ".ruff_cache", "__pycache__", "node_modules"}
PRUNED_PATHS = {REPO / "tests" / "output"}  # ansible-test's copies of the collection

# The sections the code cites; renumbering them breaks every citation.
STABLE_SECTIONS = {"1", "2", "3", "3.1", "3.2", "3.3", "3.4", "4", "5", "6"}

# "docs/behaviour.md §3.2", "behaviour.md §2, §4 and §6", "[behaviour §3](...)".
CITATION = re.compile(r"(?:docs/)?behaviour(?:\.md)?((?:\s*(?:,|and|or)?\s*§\s*\d+(?:\.\d+)*)+)")
SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")
LINK_TO_BEHAVIOUR = re.compile(r"behaviour\.md#([^)\s>\"'`]+)")
LINK_IN_BEHAVIOUR = re.compile(r"\]\(#([^)]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?\s")


def text_files(path: Path) -> Iterator[Path]:
    """Every text file at ``path`` (a file or a directory), pruned as above."""
    if path.is_file():
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in PRUNED and Path(root) / d not in PRUNED_PATHS)
        for name in sorted(files):
            file = Path(root) / name
            if b"\0" not in file.read_bytes()[:8192]:
                yield file


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def outside_references(areas: tuple[str, ...]) -> list[str]:
    found = []
    for area in areas:
        files = list(text_files(REPO / area))
        assert files, f"{area} has no files: the check would prove nothing"
        for file in files:
            for number, line in enumerate(read(file).splitlines(), start=1):
                for what, pattern in OUTSIDE_REFERENCES.items():
                    if pattern.search(line):
                        found.append(f"{file.relative_to(REPO)}:{number}: {what}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    "areas",
    [pytest.param((area,), id=area) for area in CHECKED],
)
def test_nothing_points_outside_the_repository(areas: tuple[str, ...]) -> None:
    found = outside_references(areas)
    assert not found, "Cite docs/behaviour.md sections instead of references outside the repository:\n" + "\n".join(found)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings() -> list[str]:
    result, fenced = [], False
    for line in read(BEHAVIOUR).splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            result.append(match.group(2))
    return result


def anchors() -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for heading in headings():
        anchor = github_anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


def sections() -> set[str]:
    return {match.group(1) for match in (NUMBERED.match(heading) for heading in headings()) if match}


def repository_files() -> Iterator[Path]:
    yield from text_files(REPO)


def test_github_anchor() -> None:
    assert github_anchor("3.2 Batches") == "32-batches"
    assert github_anchor("1. Two flavours of Machine") == "1-two-flavours-of-machine"
    assert github_anchor("Cluster API v1beta2 `Deleting`") == "cluster-api-v1beta2-deleting"


def test_the_cited_sections_keep_their_numbers() -> None:
    missing = STABLE_SECTIONS - sections()
    assert not missing, f"docs/behaviour.md lost sections {sorted(missing)}: the code cites them by number"


def test_every_cited_section_exists() -> None:
    known = sections()
    cited = 0
    broken = []
    for file in repository_files():
        text = read(file)
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            for number in SECTION.findall(match.group(1)):
                cited += 1
                if number not in known:
                    broken.append(f"{file.relative_to(REPO)}:{line}: §{number}")
    assert cited, "no citation of docs/behaviour.md found: the pattern is wrong"
    assert not broken, "These cite sections docs/behaviour.md does not have:\n" + "\n".join(broken)


def test_every_link_to_behaviour_has_a_target() -> None:
    known = anchors()
    linked = 0
    broken = []
    for file in repository_files():
        pattern = LINK_IN_BEHAVIOUR if file == BEHAVIOUR else LINK_TO_BEHAVIOUR
        text = read(file)
        for match in pattern.finditer(text):
            linked += 1
            if match.group(1) not in known:
                line = text.count("\n", 0, match.start()) + 1
                broken.append(f"{file.relative_to(REPO)}:{line}: #{match.group(1)}")
    assert linked, "no link to a docs/behaviour.md section found: the pattern is wrong"
    assert not broken, "These links point at headings docs/behaviour.md does not have:\n" + "\n".join(broken)
