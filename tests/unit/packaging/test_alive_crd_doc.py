"""The Alive CRD users are told to install (docs/cluster_deletion.md) is the one the tests run against."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def test_documented_alive_crd_matches_the_tested_one() -> None:
    page = (REPO / "docs" / "cluster_deletion.md").read_text()
    blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", page, flags=re.S)]
    documented = [block for block in blocks if isinstance(block, dict) and block.get("kind") == "CustomResourceDefinition"]
    tested = yaml.safe_load((REPO / "hack" / "crds" / "lifecycle.machine.dev_alives.yaml").read_text())
    assert documented == [tested]
