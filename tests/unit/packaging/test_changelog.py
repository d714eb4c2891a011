"""The changelog: ``antsibull-changelog lint`` passes, and ``antsibull-changelog release`` of the
version in galaxy.yml lists every module, role and playbook not released before under New Modules, New
Roles and New Playbooks, and none of them as a minor or major change.

That version may be released already (0.2.0 is, in changelogs/changelog.yaml): fragments added after
it are folded into it with ``antsibull-changelog release --version <version> --update-existing``,
which these tests run, and CHANGELOG.rst is always what the tool renders from changelog.yaml.

``release`` rewrites changelogs/ and deletes the fragments, so it only ever runs in a temporary copy
of the repository (its tracked and untracked, not ignored, files), never in the repository itself.
antsibull-changelog finds new modules and plugins from their ``version_added``; roles and playbooks
are registered with ``add object.role`` / ``add object.playbook`` fragments."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
DATE = "2025-01-01"
INTRODUCTION = re.compile(r"\bnew (module|role|playbook|plugin|filter)s?\b", re.IGNORECASE)


def _snapshot() -> dict[str, bytes]:
    changelogs = REPO / "changelogs"
    files = {str(p.relative_to(REPO)): p.read_bytes() for p in changelogs.rglob("*") if p.is_file()}
    return {**files, "CHANGELOG.rst": (REPO / "CHANGELOG.rst").read_bytes() if (REPO / "CHANGELOG.rst").exists() else b""}


SNAPSHOT = _snapshot()


def _copy_repository(dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _changelog(root: Path, *args: str) -> subprocess.CompletedProcess:
    # antsibull-changelog runs ansible-doc, which must be the venv's.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    return subprocess.run([str(BIN / "antsibull-changelog"), *args], cwd=root, env=env, capture_output=True, text=True, check=False)


def _sections(rst: str, version: str) -> dict[str, list[str]]:
    """The bullet entries of each heading of one version in CHANGELOG.rst; plugin types under
    "New Plugins" come as "New Plugins/<Type>"."""
    lines = rst.splitlines()
    start = lines.index(f"v{version}") + 2
    sections: dict[str, list[str]] = {}
    top = current = None
    for index in range(start, len(lines)):
        line = lines[index]
        underline = lines[index + 1] if index + 1 < len(lines) else ""
        if underline and set(underline) == {"="}:
            break  # the next version
        if underline and set(underline) == {"-"} and len(underline) == len(line):
            top = current = line
            sections[current] = []
        elif underline and set(underline) == {"~"} and len(underline) == len(line):
            current = f"{top}/{line}"
            sections[current] = []
        elif line.startswith("- ") and current:
            sections[current].append(line[2:])
    return sections


def _names(entries: list[str]) -> set[str]:
    return {entry.split(" - ", 1)[0] for entry in entries}


def _released_before(version: str) -> dict[str, set[str]]:
    """Modules, roles and playbooks of releases other than ``version`` in changelogs/changelog.yaml."""
    changelog = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())
    released: dict[str, set[str]] = {"module": set(), "role": set(), "playbook": set()}
    for name, release in (changelog.get("releases") or {}).items():
        if name == version:
            continue
        released["module"] |= {m["name"] for m in release.get("modules", [])}
        for kind in ("role", "playbook"):
            released[kind] |= {o["name"] for o in release.get("objects", {}).get(kind, [])}
    return released


def _coming_later(version: str) -> set[str]:
    """The modules whose version_added is later than ``version``: a later release announces them."""
    return {name for kind, name, added in _plugins_with_version_added() if kind == "module" and _version(added) > _version(version)}


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = _copy_repository(tmp_path_factory.mktemp("repository"))
    version = yaml.safe_load((root / "galaxy.yml").read_text())["version"]
    done = _changelog(root, "release", "--version", version, "--date", DATE, "--update-existing")
    assert done.returncode == 0, done.stdout + done.stderr
    return root, version


def _galaxy_version() -> str:
    return yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]


def test_fragments_pass_lint(tmp_path: Path) -> None:
    root = _copy_repository(tmp_path)
    linted = _changelog(root, "lint")
    assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr


def test_release_leaves_the_repository_alone(released: tuple[Path, str]) -> None:
    assert _snapshot() == SNAPSHOT


def test_new_content_is_listed_under_its_own_heading(released: tuple[Path, str]) -> None:
    root, version = released
    sections = _sections((root / "CHANGELOG.rst").read_text(), version)
    before = _released_before(version)
    expected = {
        "New Modules": {p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__"} - before["module"] - _coming_later(version),
        "New Roles": {p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir()} - before["role"],
        "New Playbooks": {p.stem for p in (REPO / "playbooks").glob("*.yml")} - before["playbook"],
    }
    for heading, names in expected.items():
        listed = _names(sections.get(heading, []))
        assert listed == {f"lifecycle.machine.{name}" for name in names}, heading


def test_new_content_is_not_a_minor_or_major_change(released: tuple[Path, str]) -> None:
    root, version = released
    sections = _sections((root / "CHANGELOG.rst").read_text(), version)
    # A release may bring no new content (0.2.0 does not); then nothing can be announced twice.
    new = {name.split(".")[-1] for heading in ("New Modules", "New Roles", "New Playbooks") for name in _names(sections.get(heading, []))}
    for heading in ("Major Changes", "Minor Changes"):
        for entry in sections.get(heading, []):
            assert not INTRODUCTION.search(entry), f"{heading} introduces new content (register it instead): {entry}"
            subject = entry.split(" - ", 1)[0]
            assert subject not in new, f"{heading}: {subject} is new in {version}, so this is no change to it: {entry}"


def test_release_has_a_summary(released: tuple[Path, str]) -> None:
    root, version = released
    assert "Release Summary" in _sections((root / "CHANGELOG.rst").read_text(), version)


def test_the_inventory_plugin_is_listed_as_a_new_plugin(released: tuple[Path, str]) -> None:
    """An inventory plugin needs nothing but its version_added to be announced, once, in the release it came with."""
    root, _version = released
    rst = (root / "CHANGELOG.rst").read_text()
    versions = yaml.safe_load((root / "changelogs" / "changelog.yaml").read_text())["releases"]
    announced = [v for v in versions if "lifecycle.machine.machines" in _names(_sections(rst, v).get("New Plugins/Inventory", []))]
    assert announced == ["0.1.0"], announced


def test_the_version_in_galaxy_yml_is_released() -> None:
    changelog = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())
    assert _galaxy_version() in (changelog.get("releases") or {})


def test_changelog_rst_is_what_the_tool_renders(tmp_path: Path) -> None:
    root = _copy_repository(tmp_path)
    generated = _changelog(root, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert (root / "CHANGELOG.rst").read_text() == (REPO / "CHANGELOG.rst").read_text(), "run antsibull-changelog generate"


def test_a_fragment_added_after_the_release_is_folded_into_it(tmp_path: Path) -> None:
    """What main does after a release that is not tagged yet: a new fragment, then release with --update-existing."""
    root = _copy_repository(tmp_path)
    version = _galaxy_version()
    (root / "changelogs" / "fragments" / "later-fix.yml").write_text("---\nbugfixes:\n  - machine_drain - a fix made after the release.\n")
    linted = _changelog(root, "lint")
    assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr
    done = _changelog(root, "release", "--version", version, "--update-existing")
    assert done.returncode == 0, done.stdout + done.stderr
    sections = _sections((root / "CHANGELOG.rst").read_text(), version)
    assert "machine_drain - a fix made after the release." in sections["Bugfixes"]
    assert "Release Summary" in sections
    changelog = yaml.safe_load((root / "changelogs" / "changelog.yaml").read_text())
    assert list(changelog["releases"]) == list(yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"])
    assert "later-fix.yml" in changelog["releases"][version]["fragments"]
    assert not (root / "changelogs" / "fragments" / "later-fix.yml").exists()


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _plugins_with_version_added() -> list[tuple[str, str, str]]:
    """(type, name, version_added) of every module and plugin ansible-doc reads (their DOCUMENTATION)."""
    found = []
    for path in sorted((REPO / "plugins").glob("*/*.py")):
        kind = "module" if path.parent.name == "modules" else path.parent.name
        source = path.read_text()
        if 'DOCUMENTATION = r"""' not in source or kind == "doc_fragments":
            continue
        documentation = yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
        found.append((kind, path.stem, str(documentation["version_added"])))
    return found


def test_version_added_is_the_release_that_first_shipped_it() -> None:
    """A module or plugin says it was added in a release only when changelogs/changelog.yaml lists it there
    (antsibull-changelog registers it from its version_added when that release is made); one not released
    yet says a version later than every release, the next one."""
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    latest = max(releases, key=_version)
    wrong = []
    for kind, name, added in _plugins_with_version_added():
        if added in releases:
            release = releases[added]
            listed = release.get("modules", []) if kind == "module" else release.get("plugins", {}).get(kind, [])
            if name not in {entry["name"] for entry in listed}:
                wrong.append(f"{kind} {name}: version_added {added}, but the {added} release does not carry it")
        elif _version(added) <= _version(latest):
            wrong.append(f"{kind} {name}: version_added {added} was never released, and {latest} is out already")
    assert not wrong, wrong


def test_what_is_not_released_yet_is_announced_by_the_next_release(tmp_path: Path) -> None:
    """A module or plugin whose version_added is later than every release comes with that release (the lead's
    ``antsibull-changelog release`` of it): released in a copy, it is listed under New Modules or New Plugins from its
    version_added alone, and nothing released before is listed again."""
    releases = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())["releases"]
    latest = max(releases, key=_version)
    coming: dict[str, set[str]] = {}
    for kind, name, added in _plugins_with_version_added():
        if _version(added) > _version(latest):
            heading = "New Modules" if kind == "module" else f"New Plugins/{kind.capitalize()}"
            coming.setdefault(added, set()).add(f"{heading}:lifecycle.machine.{name}")
    for version, expected in coming.items():
        root = _copy_repository(tmp_path / version)
        done = _changelog(root, "release", "--version", version, "--date", DATE)
        assert done.returncode == 0, done.stdout + done.stderr
        sections = _sections((root / "CHANGELOG.rst").read_text(), version)
        listed = {f"{heading}:{name}" for heading, entries in sections.items() if heading.startswith("New ") for name in _names(entries)}
        assert listed == expected, version
