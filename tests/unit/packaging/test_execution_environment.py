"""The execution environment in extensions/awx and the decision environment in extensions/eda:
their entry points (create-ee.sh, create-de.sh) create the build context from the collection tarball
of any version, refuse clearly without one, and no file names one version's tarball."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import tracked_files

REPO = Path(__file__).resolve().parents[3]
AWX = REPO / "extensions" / "awx"
EDA = REPO / "extensions" / "eda"
BIN = Path(sys.executable).parent
IMAGE_DIR = "/tmp/collections"  # where the image build copies _build/collections/
MISSING = "no lifecycle.machine collection tarball (lifecycle-machine-*.tar.gz)"


@pytest.fixture(scope="module")
def tarball(built_tarball: Path) -> Path:
    return built_tarball


def _ee_dir(tmp_path: Path, *tarballs: Path) -> Path:
    work = tmp_path / "ee"
    # Without what a previous build may have left there.
    shutil.copytree(AWX, work, ignore=shutil.ignore_patterns("*.tar.gz", "context"))
    for found in tarballs:
        shutil.copy(found, work / found.name)
    return work


def _create_ee(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANSIBLE_BUILDER": str(BIN / "ansible-builder")}
    return subprocess.run(
        ["bash", str(work / "create-ee.sh"), "create", "-c", "context", "--output-filename", "Containerfile", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _image_check_step(containerfile: str) -> str:
    (step,) = [line.removeprefix("RUN ") for line in containerfile.splitlines() if "collection-tarball.sh" in line and line.startswith("RUN ")]
    return step


def _run_image_check(containerfile: str, collections: Path) -> subprocess.CompletedProcess:
    """The image build's check step, run on a copy of what the build copies to /tmp/collections."""
    step = _image_check_step(containerfile).replace(IMAGE_DIR, str(collections))
    return subprocess.run(["sh", "-c", step], capture_output=True, text=True, check=False)


def test_collection_execution_environment_metadata_points_at_real_files() -> None:
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert meta["version"] == 1
    for kind in ("python", "system"):
        assert (REPO / meta["dependencies"][kind]).is_file()
    requirements = (REPO / meta["dependencies"]["python"]).read_text()
    assert "kubernetes" in requirements


def test_create_ee_with_the_tarball_makes_a_context_that_installs_it(tmp_path: Path, tarball: Path) -> None:
    work = _ee_dir(tmp_path, tarball)
    created = _create_ee(work)
    assert created.returncode == 0, created.stdout + created.stderr
    assert "No matches" not in created.stdout + created.stderr

    context = work / "context"
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile
    assert (context / "_build" / "collections" / tarball.name).is_file()
    assert "kubernetes" in (context / "_build" / "requirements.txt").read_text()

    # What the image build does with it: the check step moves the tarball to the path requirements.yml
    # names, and ansible-galaxy installs the collection of galaxy.yml's version from there.
    collections = tmp_path / "image-collections"
    shutil.copytree(context / "_build" / "collections", collections)
    checked = _run_image_check(containerfile, collections)
    assert checked.returncode == 0, checked.stderr
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    (entry,) = [c for c in requirements["collections"] if c.get("type") == "file"]
    local = tmp_path / "requirements.yml"
    local.write_text(yaml.safe_dump({"collections": [{**entry, "name": entry["name"].replace(IMAGE_DIR, str(collections))}]}))
    installed = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "--force", "--no-deps", "-r", str(local), "-p", str(tmp_path / "installed")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    manifest = yaml.safe_load((tmp_path / "installed" / "ansible_collections" / "lifecycle" / "machine" / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]


def test_create_ee_without_the_tarball_fails_and_says_how_to_build_it(tmp_path: Path) -> None:
    work = _ee_dir(tmp_path)
    created = _create_ee(work)
    assert created.returncode != 0
    assert MISSING in created.stderr
    assert "make build BUILD_DIR=extensions/awx" in created.stderr, "the build of the tracked files"
    assert not (work / "context").exists(), "ansible-builder ran although the tarball is missing"


def _checkout_build(tmp_path: Path, *left: str) -> Path:
    """A tarball as ``ansible-galaxy collection build`` of a used checkout's directory makes it: the tracked files
    and, beside them, ``left`` (untracked files, as a used checkout holds them)."""
    source = tmp_path / "checkout"
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    for name in left:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text("apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: left-over}}]\n")
    output = tmp_path / "built"
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(output), str(source)], capture_output=True, check=True)
    (found,) = output.glob("lifecycle-machine-*.tar.gz")
    return found


def _create_ee_of_the_checkout(work: Path) -> subprocess.CompletedProcess:
    """The repository's own create-ee.sh (it knows it is in a checkout of the source repository), on the definition in ``work``."""
    env = {**os.environ, "ANSIBLE_BUILDER": str(BIN / "ansible-builder"), "EE_DEFINITION": str(work / "execution-environment.yml")}
    command = ["bash", str(AWX / "create-ee.sh"), "create", "-c", str(work / "context"), "--output-filename", "Containerfile"]
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)


def test_create_ee_in_the_checkout_refuses_a_tarball_with_untracked_files(tmp_path: Path) -> None:
    """A tarball built from the checkout's directory carries its kubeconfig, vault file and .ansible/ into the image:
    create-ee.sh names them and says how to build from the tracked files, before ansible-builder runs."""
    left = ["kubeconfig", "playbooks/vault.yml", "roles/delete_machine/.ansible/kubeconfig"]
    work = _ee_dir(tmp_path, _checkout_build(tmp_path, *left))
    created = _create_ee_of_the_checkout(work)
    assert created.returncode != 0
    assert "holds files this checkout does not track" in created.stderr
    assert all(f"    {name}\n" in created.stderr for name in left), created.stderr
    assert "make build BUILD_DIR=" in created.stderr
    assert not (work / "context").exists(), "ansible-builder ran although the tarball carries untracked files"


def test_create_ee_in_the_checkout_takes_the_tarball_of_the_tracked_files(tmp_path: Path, tarball: Path) -> None:
    work = _ee_dir(tmp_path, tarball)
    created = _create_ee_of_the_checkout(work)
    assert created.returncode == 0, created.stdout + created.stderr
    assert (work / "context" / "_build" / "collections" / tarball.name).is_file()


def test_create_ee_refuses_two_tarballs(tmp_path: Path, tarball: Path) -> None:
    other = tmp_path / "lifecycle-machine-0.0.9.tar.gz"
    shutil.copy(tarball, other)
    work = _ee_dir(tmp_path, tarball, other)
    created = _create_ee(work)
    assert created.returncode != 0
    assert "2 collection tarballs" in created.stderr
    assert "keep only the one to install" in created.stderr


def test_plain_ansible_builder_only_warns_but_the_image_build_stops_clearly(tmp_path: Path) -> None:
    """What docs/awx.md says of calling ansible-builder directly: it cannot refuse at create time
    (if this starts failing, ansible-builder learnt to, and the docs should say so), and the image
    build's first step after copying the context stops with the same message."""
    work = _ee_dir(tmp_path)
    created = subprocess.run(
        [str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context", "--output-filename", "Containerfile"],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    assert "No matches for 'lifecycle-machine-*.tar.gz'" in created.stdout + created.stderr
    context = work / "context"
    copied = context / "_build" / "collections"
    assert sorted(p.name for p in copied.iterdir()) == ["collection-tarball.sh"], "the COPY of _build/collections/ must not fail"
    checked = _run_image_check((context / "Containerfile").read_text(), copied)
    assert checked.returncode != 0
    assert MISSING in checked.stderr


def _de_dir(tmp_path: Path, *tarballs: Path) -> Path:
    """A copy of extensions/ (the decision environment uses files of extensions/awx), with the tarballs beside the definition."""
    work = tmp_path / "extensions"
    for source in (AWX, EDA):
        shutil.copytree(source, work / source.name, ignore=shutil.ignore_patterns("*.tar.gz", "context"))
    for found in tarballs:
        shutil.copy(found, work / "eda" / found.name)
    return work / "eda"


def _create_de(work: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANSIBLE_BUILDER": str(BIN / "ansible-builder")}
    command = ["bash", str(work / "create-de.sh"), "create", "-c", "context", "--output-filename", "Containerfile"]
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)


def test_create_de_with_the_tarball_makes_a_context_with_ansible_rulebook_and_java(tmp_path: Path, tarball: Path) -> None:
    work = _de_dir(tmp_path, tarball)
    created = _create_de(work)
    assert created.returncode == 0, created.stdout + created.stderr
    assert "No matches" not in created.stdout + created.stderr

    build = work / "context" / "_build"
    assert (build / "collections" / tarball.name).is_file()
    assert "ansible-rulebook" in (build / "requirements.txt").read_text()
    assert "java-17-openjdk-headless" in (build / "bindep.txt").read_text()
    requirements = yaml.safe_load((build / "requirements.yml").read_text())
    assert {c["name"] for c in requirements["collections"]} == {"kubernetes.core", f"{IMAGE_DIR}/lifecycle-machine.tar.gz"}
    containerfile = (work / "context" / "Containerfile").read_text()
    assert "ENV JAVA_HOME=" in containerfile
    checked = _run_image_check(containerfile, build / "collections")
    assert checked.returncode == 0, checked.stderr


def test_create_de_without_the_tarball_fails_and_says_how_to_build_it(tmp_path: Path) -> None:
    work = _de_dir(tmp_path)
    created = _create_de(work)
    assert created.returncode != 0
    assert MISSING in created.stderr
    assert not (work / "context").exists(), "ansible-builder ran although the tarball is missing"


def test_no_file_names_one_versions_tarball() -> None:
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    listed = subprocess.run(["git", "ls-files", "extensions/awx", "extensions/eda"], cwd=REPO, capture_output=True, text=True, check=True)
    tracked = listed.stdout.split()
    files = [REPO / name for name in tracked] + [REPO / "docs" / "awx.md"]
    assert AWX / "requirements.yml" in files
    for path in files:
        text = path.read_text()
        assert not re.search(r"lifecycle-machine-\d", text), f"{path.relative_to(REPO)} names a versioned tarball"
    for name in ("awx/execution-environment.yml", "awx/requirements.yml", "awx/create-ee.sh", "awx/collection-tarball.sh", "eda/decision-environment.yml"):
        assert version not in (REPO / "extensions" / name).read_text(), f"extensions/{name} names version {version}"
