"""docs/module_defaults.md shows the playbook tests/integration/test_module_defaults.py runs, as it is
(less the file's header comment), so the example a user copies is the one that was run."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PAGE = (REPO / "docs" / "module_defaults.md").read_text()
EXAMPLE = REPO / "tests" / "integration" / "files" / "module_defaults.yml"


def test_the_page_shows_the_playbook_the_test_runs() -> None:
    text = EXAMPLE.read_text()
    play = text[text.index("- name: ") :]
    assert play in re.findall(r"```yaml\n(.*?)```", PAGE, flags=re.DOTALL)
