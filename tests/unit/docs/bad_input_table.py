"""The catalogue of docs/bad_input.md as data: the one source of the bad inputs,
read by the integration test that proves each row (tests/integration/test_bad_input.py)
and by the unit test that checks the page (test_bad_input_page.py).

A row is ``| ID | Module or role | Given | Input | Message |``: what to run
(a module, ``role <name>`` or ``playbook <file>``), what exists first (a phrase
of the page's legend), the options or variables (a YAML mapping) and the text
the failure message contains (``\\n`` in it is a line break). ``<namespace>``,
``<machine>`` and ``<node>`` stand for the names the test creates;
``<timestamp>`` for any RFC 3339 time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

PAGE = Path(__file__).resolve().parents[3] / "docs" / "bad_input.md"
HEADER = ("ID", "Module or role", "Given", "Input", "Message")
LEGEND_HEADER = ("Given", "What the test creates first")

FLAVOURS = {"OpenShift": "openshift", "Cluster API v1beta1": "v1beta1", "Cluster API v1beta2": "v1beta2"}
# What a row can start from (the page's legend explains each; the integration test creates them).
NOTHING, NODE, MACHINE, DELETING_MACHINE, PAUSED_MACHINE, PAUSED_DELETING_MACHINE, ALIVE, DELETING_ALIVE = (
    "nothing",
    "a Node",
    "a <flavour> Machine",
    "a <flavour> Machine being deleted",
    "a paused <flavour> Machine",
    "a paused <flavour> Machine being deleted",
    "an Alive object",
    "an Alive object being deleted",
)
SCENARIOS = (NOTHING, NODE, MACHINE, DELETING_MACHINE, PAUSED_MACHINE, PAUSED_DELETING_MACHINE, ALIVE, DELETING_ALIVE)
PLACEHOLDERS = ("<namespace>", "<machine>", "<node>")
TIMESTAMP = "<timestamp>"
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_GIVEN_MACHINE = re.compile(rf"^an? (?P<paused>paused )?(?P<flavour>{'|'.join(FLAVOURS)}) Machine(?P<deleting> being deleted)?$")
_PIPE = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class BadInput:
    """One row of the catalogue."""

    id: str
    target: str  # machine_drain, role delete_machine, playbook drain_node.yml
    given: str
    input: dict
    message: str
    line: int

    @property
    def kind(self) -> str:
        """``module``, ``role`` or ``playbook``."""
        word = self.target.split()[0]
        return word if word in ("role", "playbook") else "module"

    @property
    def name(self) -> str:
        """The module, role or playbook file name."""
        return self.target.split()[-1]

    @property
    def scenario(self) -> str:
        return given_parts(self.given)[0]

    @property
    def flavour(self) -> str | None:
        """``openshift``, ``v1beta1`` or ``v1beta2`` for a Machine; None otherwise."""
        return given_parts(self.given)[1]


def given_parts(given: str) -> tuple[str, str | None]:
    """(scenario, flavour) of a Given phrase; ValueError when it is not in the legend."""
    match = _GIVEN_MACHINE.match(given)
    if match:
        if match["paused"]:
            return (PAUSED_DELETING_MACHINE if match["deleting"] else PAUSED_MACHINE), FLAVOURS[match["flavour"]]
        return (DELETING_MACHINE if match["deleting"] else MACHINE), FLAVOURS[match["flavour"]]
    if given in SCENARIOS and "<flavour>" not in given:
        return given, None
    raise ValueError(f"Given {given!r} is not in the legend of docs/bad_input.md")


def cells(line: str) -> list[str]:
    """The cells of a table line; ``\\|`` is a pipe inside a cell."""
    parts = _PIPE.split(line.strip())
    return [part.strip().replace("\\|", "|") for part in parts[1:-1]]


def code(cell: str) -> str:
    """The text of a cell, without the backticks of code spans."""
    return cell.replace("`", "")


def tables(text: str) -> list[tuple[tuple[str, ...], list[tuple[int, list[str]]]]]:
    """Every table of a page: (header, [(line number, cells)])."""
    found: list[tuple[tuple[str, ...], list[tuple[int, list[str]]]]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].startswith("|") and index + 1 < len(lines) and set(lines[index + 1].replace("|", "").strip()) <= set("-: "):
            header = tuple(cells(lines[index]))
            rows = []
            index += 2
            while index < len(lines) and lines[index].startswith("|"):
                rows.append((index + 1, cells(lines[index])))
                index += 1
            found.append((header, rows))
        else:
            index += 1
    return found


def legend(text: str | None = None) -> list[str]:
    """The Given phrases the page's legend explains."""
    text = PAGE.read_text() if text is None else text
    return [code(row[0]) for header, rows in tables(text) if header == LEGEND_HEADER for _line, row in rows]


def catalogue(text: str | None = None) -> list[BadInput]:
    """Every row of the catalogue table, in page order."""
    text = PAGE.read_text() if text is None else text
    rows = []
    for header, lines in tables(text):
        if header != HEADER:
            continue
        for line, row in lines:
            if len(row) != len(HEADER):
                raise ValueError(f"docs/bad_input.md:{line}: {len(row)} cells, expected {len(HEADER)}")
            ident, target, given, options, message = row
            parsed = yaml.safe_load(code(options))
            if not isinstance(parsed, dict):
                raise ValueError(f"docs/bad_input.md:{line}: the Input of {ident} is not a YAML mapping")
            rows.append(BadInput(code(ident), code(target), given, parsed, code(message).replace("\\n", "\n"), line))
    return rows
