"""The collection tarball, built once for every packaging test that reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def built_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ansible-galaxy collection build`` of the working tree, as a user gets it."""
    out = tmp_path_factory.mktemp("tarball")
    built = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = out.glob("lifecycle-machine-*.tar.gz")
    return found
