"""machine_delete's stall_timeout (docs/stalls.md): the option is checked with the others, and the time of a
Machine's last drain progress rides in the clock from call to call without counting as a phase."""

from __future__ import annotations

import pytest
from test_delete_logic import PARAMS

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import (
    DRAIN,
    DRAIN_PROGRESS,
    STARTED,
    DeleteRequest,
    Outcome,
    machine_metrics,
    progress_lines,
    started_clock,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError


def test_stall_timeout_is_taken_and_checked_before_anything_is_touched() -> None:
    assert DeleteRequest.from_params({**PARAMS, "stall_timeout": 1800}, False, 1000.0).stall.timeout == 1800
    assert DeleteRequest.from_params(PARAMS, False, 1000.0).stall.timeout is None
    with pytest.raises(MachineError, match="stall_timeout must be at least 1"):
        DeleteRequest.from_params({**PARAMS, "stall_timeout": 0}, False, 1000.0)


def test_the_last_drain_progress_rides_in_the_clock_and_is_no_phase() -> None:
    clock = started_clock({"ns/a": {STARTED: 900.0, DRAIN: 910.0, DRAIN_PROGRESS: "990.5"}}, 1000.0)
    assert clock == {"ns/a": {STARTED: 900.0, DRAIN: 910.0, DRAIN_PROGRESS: 990.5}}
    assert started_clock({"ns/a": {DRAIN_PROGRESS: 9e12}}, 1000.0) == {"ns/a": {}}, "a time after now is no progress"
    held = Outcome(machine={"name": "a", "namespace": "ns"}, step=DRAIN)
    assert machine_metrics(held, clock, 1000.0)["phase_seconds"] == {DRAIN: 90.0}
    assert progress_lines([held], 1.0, clock=clock, now=1000.0)[0].startswith("1 Machine after 100 s")
