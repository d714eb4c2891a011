"""The collection as users get it: the tarball ``make build`` makes (``hack/build-collection.sh``:
``ansible-galaxy collection build`` of the tracked files only) holds the collection's content and docs,
and nothing that only runs in the source repository (tests, the molecule scenario that starts the local
control plane, hack/, the Makefile) or that is not tracked (build folders, logs)."""

from __future__ import annotations

import re
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import build, tracked_files

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
    tracked = tracked_files()
    docs = {name for name in tracked if name.startswith("docs/")}
    assert docs and docs <= names
    for kind, pattern in (
        ("plugins", "plugins/**/*.py"),
        ("roles", "roles/**/*"),
        ("playbooks", "playbooks/**/*.yml"),
        ("extensions", "extensions/[ae][wd]*/**/*"),
    ):
        shipped = {str(p.relative_to(REPO)) for p in REPO.glob(pattern) if str(p.relative_to(REPO)) in tracked and p.parent.name != "context"}
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


def test_an_untracked_file_in_the_checkout_does_not_ship(tmp_path: Path) -> None:
    """What a used checkout holds, untracked, where a plain ``ansible-galaxy collection build .`` takes it
    (build_ignore names only the top-level ``.ansible`` and the like): a log and a build folder, a kubeconfig,
    a vault file and the ``.ansible/`` ansible-lint leaves beside playbooks and roles."""
    probe = f"untracked-{uuid.uuid4().hex[:8]}"
    left = [
        REPO / "docs" / f"{probe}.md",
        REPO / "plugins" / "modules" / f"{probe}.py",
        REPO / f"{probe}-kubeconfig",
        REPO / "extensions" / "awx" / f"{probe}-kubeconfig",
        REPO / "playbooks" / f"{probe}-vault.yml",
        REPO / "playbooks" / ".ansible" / probe / "kubeconfig",
        REPO / "roles" / "delete_machine" / ".ansible" / f"{probe}.yml",
    ]
    made = [path.parent for path in left if not path.parent.exists()]
    try:
        for path in left:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: left-over}}]\n")
        with tarfile.open(build(tmp_path)) as archive:
            names = {m.name.removeprefix("./") for m in archive.getmembers()}
    finally:
        for path in left:
            path.unlink(missing_ok=True)
        for folder in sorted(made, key=lambda p: len(p.parts), reverse=True):
            for empty in [folder, *folder.parents]:
                if empty == REPO or any(empty.iterdir()):
                    break
                empty.rmdir()
    assert "docs/module_defaults.md" in names, "the tracked docs ship"
    assert not [name for name in names if probe in name]


# A build of the checkout itself: `ansible-galaxy collection build` given a directory (``.``) instead of the tracked files.
CHECKOUT_BUILD = re.compile(r"ansible-galaxy collection build\b[^\n`]*\s\.(?=\s|$|`)")


def test_the_documented_builds_take_the_tracked_files_only() -> None:
    """Every build the docs and the execution and decision environments' files tell a user to run is the build of the
    tracked files (make build, hack/build-collection.sh), never ``ansible-galaxy collection build .``."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "extensions").glob("[ae][wd]*/*"))]
    wrong = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in pages
        if path.is_file()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if CHECKOUT_BUILD.search(line)
    ]
    assert not wrong, wrong
    assert "make build BUILD_DIR=extensions/awx" in (REPO / "docs" / "awx.md").read_text()
    assert "make build BUILD_DIR=extensions/eda" in (REPO / "docs" / "eda.md").read_text()
