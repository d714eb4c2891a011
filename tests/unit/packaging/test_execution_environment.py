"""The shipped execution-environment definition turns into a build context."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def test_collection_execution_environment_metadata_points_at_real_files() -> None:
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert meta["version"] == 1
    for kind in ("python", "system"):
        assert (REPO / meta["dependencies"][kind]).is_file()
    requirements = (REPO / meta["dependencies"]["python"]).read_text()
    assert "kubernetes" in requirements


def test_ansible_builder_create_succeeds_on_the_shipped_definition(tmp_path: Path) -> None:
    work = tmp_path / "ee"
    shutil.copytree(REPO / "extensions" / "awx", work)
    built = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(work), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    tarballs = list(work.glob("lifecycle-machine-*.tar.gz"))
    assert len(tarballs) == 1
    requirements = yaml.safe_load((work / "requirements.yml").read_text())
    assert any(c["name"].endswith(tarballs[0].name) for c in requirements["collections"]), "requirements.yml names another version"

    created = subprocess.run(
        [str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context", "--output-filename", "Containerfile"],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    context = work / "context"
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile or "install-from-bindep" in containerfile
    assert (context / "_build" / "collections" / tarballs[0].name).is_file()
    assert "kubernetes" in (context / "_build" / "requirements.txt").read_text()
