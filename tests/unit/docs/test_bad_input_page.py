"""docs/bad_input.md is the catalogue tests/integration/test_bad_input.py proves:
every row must be runnable there (a module, role or playbook that exists, a
Given of the legend, an Input that is a mapping with known placeholders), and
every module and role of the collection must have rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bad_input_table import PAGE, PLACEHOLDERS, SCENARIOS, BadInput, catalogue, cells, given_parts, legend

REPO = Path(__file__).resolve().parents[3]
ROWS = catalogue()
PLACEHOLDER = re.compile(r"<[a-z_]+>")


def texts(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in texts(item)]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [*texts(key), *texts(item)]]
    return []


def test_the_catalogue_has_at_least_forty_rows_with_unique_ids() -> None:
    ids = [row.id for row in ROWS]
    assert len(ids) >= 40
    assert len(set(ids)) == len(ids), sorted({ident for ident in ids if ids.count(ident) > 1})
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", ident) for ident in ids), "IDs are test ids: lower case words joined by -"


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_each_row_can_be_run(row: BadInput) -> None:
    where = {"module": REPO / "plugins" / "modules" / f"{row.name}.py", "role": REPO / "roles" / row.name, "playbook": REPO / "playbooks" / row.name}
    assert where[row.kind].exists(), f"docs/bad_input.md:{row.line}: {row.target} does not exist"
    given_parts(row.given)  # raises for a Given the legend (and the integration test) does not know
    unknown = {found for text in texts(row.input) for found in PLACEHOLDER.findall(text)} - set(PLACEHOLDERS)
    assert not unknown, f"docs/bad_input.md:{row.line}: unknown placeholders {sorted(unknown)} in the Input"
    assert row.message.strip(), f"docs/bad_input.md:{row.line}: no Message"
    if any(placeholder in text for text in texts(row.input) for placeholder in ("<machine>", "<node>")):
        assert row.scenario != "nothing", f"docs/bad_input.md:{row.line}: the Input names an object the Given does not create"


def test_every_module_and_role_has_rows() -> None:
    covered = {(row.kind, row.name) for row in ROWS}
    modules = {("module", path.stem) for path in (REPO / "plugins" / "modules").glob("*.py")}
    roles = {("role", path.name) for path in (REPO / "roles").iterdir() if (path / "tasks" / "main.yml").exists()}
    assert sorted((modules | roles) - covered) == []


def test_the_legend_explains_exactly_what_the_integration_test_creates() -> None:
    assert legend() == list(SCENARIOS)
    source = (REPO / "tests" / "integration" / "test_bad_input.py").read_text()
    assert "catalogue()" in source, "the integration test reads its rows from this page"


def test_pipes_inside_cells_are_escaped() -> None:
    assert cells(r"| a | `x\|y` | b |") == ["a", "`x|y`", "b"]
    lines = PAGE.read_text().splitlines()
    for row in ROWS:
        assert len(cells(lines[row.line - 1])) == 5
