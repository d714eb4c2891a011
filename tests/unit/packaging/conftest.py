"""The collection tarball, built once for every packaging test that reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
BUILD = REPO / "hack" / "build-collection.sh"


def build(output: Path, source: str = "tracked") -> Path:
    """The tarball ``hack/build-collection.sh`` (``make build``) makes in ``output``, from the tracked files of the
    checkout (``source="tracked"``: the edits not committed yet included) or from a commit."""
    env = {**os.environ, "ANSIBLE_GALAXY": str(BIN / "ansible-galaxy")}
    built = subprocess.run(["bash", str(BUILD), str(output), source], capture_output=True, text=True, env=env, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = output.glob("lifecycle-machine-*.tar.gz")
    return found


def tracked_files() -> set[str]:
    """The checkout's tracked files (what the tarball is built from)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode()
    return {name for name in listed.split("\0") if name and (REPO / name).is_file()}


@pytest.fixture(scope="session")
def built_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The collection tarball, as a user gets it."""
    return build(tmp_path_factory.mktemp("tarball"))
