"""The collection as users get it: the tarball ``ansible-galaxy collection build`` makes holds the
collection's content and docs, and nothing that only runs in the source repository (tests, the
molecule scenario that starts the local control plane, hack/, the Makefile)."""

from __future__ import annotations

import re
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
# A path of the source repository only, or the Makefile, named in a shipped file.
SOURCE_ONLY = re.compile(r"(?<![\w./-])(hack|tests|tools|benchmarks)/|\bMakefile\b|\bmake (demo|test|lint|unit|integration|molecule|cluster-up|bench|chaos)\b")


@pytest.fixture(scope="module")
def tarball(built_tarball: Path) -> dict[str, bytes]:
    with tarfile.open(built_tarball) as archive:
        return {m.name.removeprefix("./"): archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def test_the_tarball_is_named_after_galaxy_yml(tarball: dict[str, bytes]) -> None:
    manifest = yaml.safe_load(tarball["MANIFEST.json"])["collection_info"]
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert (manifest["namespace"], manifest["name"], manifest["version"]) == (galaxy["namespace"], galaxy["name"], galaxy["version"])


def test_nothing_that_needs_the_source_repository_ships(tarball: dict[str, bytes]) -> None:
    for prefix in ("tests/", "hack/", "tools/", "benchmarks/", "extensions/molecule/", ".venv/", ".tmp/", ".git/"):
        assert not [name for name in tarball if name.startswith(prefix)], prefix
    for name in ("Makefile", "test-requirements.txt", "pyproject.toml"):
        assert name not in tarball


def test_the_content_and_its_docs_ship(tarball: dict[str, bytes]) -> None:
    names = set(tarball)
    assert {"README.md", "CHANGELOG.rst", "changelogs/changelog.yaml", "meta/runtime.yml", "meta/execution-environment.yml"} <= names
    assert {"requirements.txt", "bindep.txt", "LICENSE", "LICENSES/GPL-3.0-or-later.txt"} <= names
    docs = {str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*") if p.is_file()}
    assert docs and docs <= names
    for kind, pattern in (
        ("plugins", "plugins/**/*.py"),
        ("roles", "roles/**/*"),
        ("playbooks", "playbooks/**/*.yml"),
        ("extensions", "extensions/[ae][wd]*/**/*"),
    ):
        shipped = {str(p.relative_to(REPO)) for p in REPO.glob(pattern) if p.is_file() and "__pycache__" not in p.parts and p.parent.name != "context"}
        assert shipped and shipped <= names, f"{kind}: {sorted(shipped - names)}"
    for role in (REPO / "roles").iterdir():
        assert f"roles/{role.name}/README.md" in names
        assert f"roles/{role.name}/meta/argument_specs.yml" in names


def test_the_changelog_ships_the_release_of_galaxy_yml(tarball: dict[str, bytes]) -> None:
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert f"v{version}\n" in tarball["CHANGELOG.rst"].decode()
    assert version in yaml.safe_load(tarball["changelogs/changelog.yaml"])["releases"]


def test_no_shipped_file_needs_the_source_repository(tarball: dict[str, bytes]) -> None:
    """Code, playbooks and configuration in the tarball name no file that only the source repository has
    (the docs may, saying so: test_docs_name_shipped_files.py checks them; changelog fragments are prose
    about the whole project, folded into the changelog at release)."""
    wrong = []
    for name, data in sorted(tarball.items()):
        if (
            name.endswith((".md", ".rst"))
            or name.startswith(("LICENSE", "changelogs/changelog.yaml", "changelogs/fragments/"))
            or name in ("FILES.json", "MANIFEST.json")
        ):
            continue
        for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
            if SOURCE_ONLY.search(line):
                wrong.append(f"{name}:{number}: {line.strip()}")
    assert not wrong, "\n".join(wrong)
