"""bindep.txt, which ansible-builder reads through meta/execution-environment.yml, asks for a Python
the modules can run on (3.11 or later, as tests/config.yml tells ansible-test) on both package
families an execution environment is built from."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
# One bindep line: a package, an optional version constraint, optional [profiles].
LINE = re.compile(r"^(?P<name>[\w.+-]+)(?:\s+(?P<constraint>[<>=!][^\[]*?))?(?:\s+\[(?P<profiles>[^\]]+)\])?\s*$")


def _entries() -> list[dict]:
    entries = []
    for line in (REPO / "bindep.txt").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = LINE.match(line.strip())
        assert match, f"not a bindep line: {line!r}"
        entries.append({"name": match["name"], "constraint": (match["constraint"] or "").strip(), "profiles": (match["profiles"] or "").split()})
    return entries


def _minimum_python() -> tuple[int, int]:
    required = yaml.safe_load((REPO / "tests" / "config.yml").read_text())["modules"]["python_requires"]
    major, minor = re.fullmatch(r">=\s*(\d+)\.(\d+)", required).groups()
    return int(major), int(minor)


def _version(text: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()
    return int(major), int(minor)


def test_the_execution_environment_metadata_names_bindep() -> None:
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert meta["dependencies"]["system"] == "bindep.txt"


def test_every_entry_names_its_package_family() -> None:
    for entry in _entries():
        assert {"platform:rpm", "platform:dpkg"} & set(entry["profiles"]), entry


def test_rpm_asks_for_a_python_new_enough_by_name() -> None:
    """On RHEL 8 and 9 ``python3`` is the platform Python (3.6, 3.9): only a versioned package will do."""
    pythons = [e for e in _entries() if "platform:rpm" in e["profiles"] and re.fullmatch(r"python3(\.\d+)?", e["name"])]
    assert pythons, "no Python for rpm platforms"
    for entry in pythons:
        assert entry["name"] != "python3", "python3 on rpm platforms is older than the modules need"
        assert _version(entry["name"].removeprefix("python")) >= _minimum_python(), entry
    pips = {e["name"] for e in _entries() if "platform:rpm" in e["profiles"] and e["name"].endswith("-pip")}
    assert pips == {f"{e['name']}-pip" for e in pythons}


def test_dpkg_asks_for_python3_with_a_minimum_version() -> None:
    (python,) = [e for e in _entries() if "platform:dpkg" in e["profiles"] and e["name"] == "python3"]
    match = re.fullmatch(r">=\s*(\d+\.\d+)", python["constraint"])
    assert match, f"python3 on dpkg platforms needs a >= constraint, got {python['constraint']!r}"
    assert _version(match[1]) >= _minimum_python()
