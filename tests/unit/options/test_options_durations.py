"""Every timeout and interval takes seconds or a Go duration (``_options/logic.py`` ``duration_seconds``), on the
module side (``_module.py`` ``read_durations``), on the controller (``plugin_utils/_rounds.py``) and in roles and
playbooks (the ``lifecycle.machine.seconds`` filter). What users read is proven in tests/integration/test_bad_input.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.lifecycle.machine.plugins.filter.seconds import FilterModule
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import DURATION_OPTIONS, duration_seconds, parse_durations
from ansible_collections.lifecycle.machine.plugins.plugin_utils._rounds import DrainRounds, Rounds

REPO = Path(__file__).resolve().parents[3]
RULE = "must be a number of seconds or a Go duration such as 90s, 5m or 1h30m"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        *[(300, 300), ("300", 300), (" 42 ", 42), ("5m", 300), ("1h30m", 5400), ("90s", 90), ("500ms", 1), (1.5, 2)],
        *[("0", 0), ("0s", 0), ("-5m", -300), (None, None)],
    ],
)
def test_seconds_and_go_durations_are_whole_seconds(value, seconds) -> None:
    assert duration_seconds("wait_timeout", value) == seconds


UNITS = "(a Go duration's units are ns, us, ms, s, m and h)"


@pytest.mark.parametrize(("value", "shown"), [("5x", "'5x'"), ("1d", f"'1d' {UNITS}"), ("", "''"), (True, "'True'"), ("5 m", "'5 m'")])
def test_anything_else_is_refused_naming_the_option(value, shown) -> None:
    with pytest.raises(ValueError, match=re.escape(f"drain_timeout {RULE}, not {shown}")):
        duration_seconds("drain_timeout", value)


def test_a_long_value_is_shortened_in_the_message() -> None:
    with pytest.raises(ValueError) as caught:
        duration_seconds("wait_timeout", "x" * 100)
    assert "x" * 38 not in str(caught.value)


def test_parse_durations_reads_only_the_options_given() -> None:
    assert parse_durations({"wait_timeout": "2m", "other": "5m"}, ["wait_timeout", "wait_sleep"]) == ({"wait_timeout": 120}, [])
    assert parse_durations({"wait_timeout": "soon", "wait_sleep": "1s"}, ["wait_timeout", "wait_sleep"]) == (
        {"wait_sleep": 1},
        [f"wait_timeout {RULE}, not 'soon'"],
    )


def test_the_filter_reads_durations_and_names_the_variable() -> None:
    seconds = FilterModule().filters()["seconds"]
    assert seconds("1h", "delete_machine_drain_timeout") == 3600
    with pytest.raises(AnsibleFilterError, match=f"delete_machine_drain_timeout {RULE}"):
        seconds("1 hour", "delete_machine_drain_timeout")


def test_the_rounds_on_the_controller_read_durations() -> None:
    rounds = DrainRounds({"wait_timeout": "10m", "progress_interval": "30s"}, 1000.0, check_mode=False)
    assert (rounds.timeout, rounds.deadline, rounds.interval) == (600, 1600.0, 30)
    # Not a duration: the module refuses it in the first round; the controller does not fail on it first.
    rounds = DrainRounds({"wait_timeout": "soon", "progress_interval": "often"}, 1000.0, check_mode=False)
    assert (rounds.timeout, rounds.interval) == (DrainRounds.DEFAULT_TIMEOUT, 0)
    assert Rounds({}, check_mode=False).interval == 0


def module_specs() -> dict[str, dict]:
    """Each module's documented options (with its doc fragments' duration options)."""
    found = {}
    for path in sorted((REPO / "plugins" / "modules").glob("*.py")):
        source = path.read_text()
        found[path.stem] = (yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0]), source)
    return found


@pytest.mark.parametrize("module", sorted(module_specs()))
def test_every_duration_option_of_a_module_is_raw_and_points_at_the_notes(module) -> None:
    documentation, source = module_specs()[module]
    options = documentation.get("options") or {}
    counting = {name for name in options if re.search(r"timeout|interval|sleep|grace", name) and name != "on_timeout"}
    assert counting <= set(DURATION_OPTIONS), f"{module}: {counting - set(DURATION_OPTIONS)} count seconds but are not duration options"
    for name in counting:
        assert options[name].get("type") == "raw", f"{module}: {name} is documented as {options[name].get('type')}"
        assert re.search(rf'"{name}": {{"type": "raw"|{name}={{"type": "raw"', source) or name in ("wait_timeout", "wait_sleep"), f"{module}: {name}"
    uses = counting or "machine_side_spec" in source
    if uses:
        assert "lifecycle.machine.durations" in documentation["extends_documentation_fragment"], module


def test_the_roles_duration_variables_are_raw() -> None:
    for path in sorted((REPO / "roles").glob("*/meta/argument_specs.yml")):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            for name, option in entry.get("options", {}).items():
                if re.search(r"timeout|interval|grace", name) and not name.endswith("on_timeout"):
                    # raw, or str where an empty string means unset (delete_machine_grace_period): both pass "5m" on.
                    assert option["type"] in ("raw", "str"), f"{path}: {name}"
