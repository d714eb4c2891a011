"""What the drain writes on a Machine being deleted (``DeletionRecorder``,
``MachineProgress``), against the fake transport: stages, best-effort Events,
the drain's start time recorded once; nothing while not deleting, and nothing
in a dry run."""

from __future__ import annotations

import datetime as dt

from drain_run_helpers import CAPI_V2, NS, capi_machine, machine_path, openshift_machine
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import DrainPass
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import MachineProgress
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import DeletionRecorder
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import STAGE_DRAINED, STAGE_DRAINING, Stage
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.base import OPENSHIFT_DRAIN_START_ANNOTATION
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339

EVENTS = f"/api/v1/namespaces/{NS}/events"


def recorder_for(fake: FakeKube, machine: dict, dry_run: bool = False) -> DeletionRecorder:
    return DeletionRecorder(fake, machine, flavour_for(machine), dry_run=dry_run)


def patches(fake: FakeKube) -> list[str]:
    return [path for method, path in fake.requests if method == "PATCH"]


def events(fake: FakeKube) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for path, e in fake.objects.items() if path.startswith(EVENTS + "/")]


def test_start_time_is_recorded_once() -> None:
    fake = FakeKube()
    recorder = recorder_for(fake, openshift_machine(fake))
    first = recorder.start_time("drain")
    assert first is not None and recorder.changed
    stored = fake.objects[machine_path()]["metadata"]["annotations"][OPENSHIFT_DRAIN_START_ANNOTATION]
    assert stored == rfc3339(first)
    assert recorder.start_time("drain") == first
    assert len(patches(fake)) == 1, "the second call reads the recorded time"


def test_start_time_recorded_by_someone_else_wins() -> None:
    fake = FakeKube()
    machine = openshift_machine(fake)
    # Another writer records its start time after we read the Machine: our guarded patch conflicts, then sees theirs.
    theirs = "2026-01-01T00:00:05Z"
    current = fake.objects[machine_path()]
    fake.put(machine_path(), {**current, "metadata": {**current["metadata"], "annotations": {OPENSHIFT_DRAIN_START_ANNOTATION: theirs}}})
    recorder = recorder_for(fake, machine)
    assert rfc3339(recorder.start_time("drain")) == theirs
    assert not recorder.changed


def test_cluster_api_start_time_goes_to_the_status() -> None:
    fake = FakeKube()
    recorder = recorder_for(fake, capi_machine(fake))
    started = recorder.start_time("drain")
    assert fake.objects[machine_path(api_version=CAPI_V2)]["status"]["deletion"]["nodeDrainStartTime"] == rfc3339(started)
    assert patches(fake) == [machine_path(api_version=CAPI_V2) + "/status"]


def test_nothing_is_written_while_not_deleting() -> None:
    fake = FakeKube()
    recorder = recorder_for(fake, openshift_machine(fake, deleting=False))
    assert recorder.start_time("drain") is None
    assert recorder.stage(Stage(STAGE_DRAINED)) is False
    recorder.event("Normal", "SuccessfulDrainNode", "x")
    assert fake.request_count == 0 and not recorder.changed


def test_dry_run_stores_nothing_and_sends_no_event() -> None:
    fake = FakeKube()
    recorder = recorder_for(fake, openshift_machine(fake), dry_run=True)
    before = len(fake.changes)
    assert recorder.start_time("drain") is not None
    assert recorder.stage(Stage(STAGE_DRAINING, message="Drain not completed yet")) is True
    recorder.event("Normal", "SuccessfulDrainNode", "x")
    assert len(fake.changes) == before and events(fake) == []
    assert recorder.changed, "what would have been written counts"


def test_stages_update_the_machine_and_say_whether_they_wrote() -> None:
    fake = FakeKube()
    recorder = recorder_for(fake, openshift_machine(fake))
    assert recorder.stage(Stage(STAGE_DRAINED)) is True
    assert recorder.machine["status"]["phase"] == "Deleting"
    drained = next(c for c in recorder.machine["status"]["conditions"] if c["type"] == "Drained")
    assert drained["status"] == "True"
    assert recorder.stage(Stage(STAGE_DRAINED)) is False, "nothing new to write"


def test_events_are_best_effort() -> None:
    fake = FakeKube()
    recorder = recorder_for(fake, openshift_machine(fake))
    fake.fail("POST", EVENTS, FakeKube.error(403, "events is forbidden"))
    recorder.event("Warning", "FailedDrainNode", "lost")
    recorder.event("Normal", "SuccessfulDrainNode", 'success draining Machine\'s node "n1"')
    assert events(fake) == [("Normal", "SuccessfulDrainNode", 'success draining Machine\'s node "n1"')]


# -- the drain's progress on the Machine -------------------------------------------


def a_pass(message: str = "") -> DrainPass:
    return DrainPass(node={"metadata": {"name": "n1"}}, plan=plan_drain([]), message=message)


def drained(fake: FakeKube) -> dict:
    return next(c for c in fake.objects[machine_path()]["status"]["conditions"] if c["type"] == "Drained")


def test_progress_after_passes_then_drained_with_one_event() -> None:
    fake = FakeKube()
    progress = MachineProgress(recorder_for(fake, openshift_machine(fake)))
    progress.after_pass(a_pass("Drain not completed yet (...)"), "n1")
    assert drained(fake)["message"] == "could not drain machine: Drain not completed yet (...)"
    progress.after_pass(a_pass(), "n1")
    progress.after_pass(a_pass(), "n1")
    assert drained(fake)["message"] == "Drain finished successfully"
    assert events(fake) == [("Normal", "SuccessfulDrainNode", 'success draining Machine\'s node "n1"')]


def test_failure_is_recorded_best_effort() -> None:
    fake = FakeKube()
    progress = MachineProgress(recorder_for(fake, openshift_machine(fake)))
    fake.fail("PATCH", machine_path() + "/status", FakeKube.error(500, "boom"))
    progress.failed("n1", "Failed to drain Node n1: x")  # does not raise
    assert events(fake) == []
    progress.failed("n1", "Failed to drain Node n1: x")
    assert drained(fake)["reason"] == "DrainError"
    assert events(fake) == [("Warning", "FailedDrainNode", 'error draining Machine\'s node "n1": Failed to drain Node n1: x')]


def test_a_bare_node_has_no_machine_progress() -> None:
    progress = MachineProgress(None)
    progress.after_pass(a_pass(), "n1")
    progress.failed("n1", "x")
    progress.skipped()
    assert progress.start_time() is None and progress.drain_timeout_left(dt.datetime.now(dt.UTC)) is None
