"""docs/hooks.md shows the example playbooks exactly as they are shipped (and
run by tests/integration/test_hook_controller.py), and names conditions the way
the code does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import hook_condition_type

REPO = Path(__file__).resolve().parents[3]
PAGE = (REPO / "docs" / "hooks.md").read_text()
EXAMPLES = sorted((REPO / "docs" / "examples").rglob("*.yml"))


def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_files_appear_verbatim(example: Path) -> None:
    assert example.read_text() in yaml_blocks(PAGE), f"{example} differs from its copy in docs/hooks.md"


def test_every_yaml_block_parses() -> None:
    for block in yaml_blocks(PAGE):
        yaml.safe_load(block)


@pytest.mark.parametrize(
    ("point", "name", "condition_type"),
    [("preTerminate", "flush-logs", "PreTerminateFlushLogsSucceeded"), ("preDrain", "MigrateImportantApp", "PreDrainMigrateImportantAppSucceeded")],
)
def test_condition_names_in_the_docs_match_the_code(point, name, condition_type) -> None:
    assert hook_condition_type(point, name) == condition_type
    assert condition_type in PAGE
    readme = (REPO / "roles" / "hook_controller" / "README.md").read_text()
    assert condition_type in readme
