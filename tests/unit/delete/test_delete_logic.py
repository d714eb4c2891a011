"""Deleting many Machines at once: options, time budgets, progress lines (pure)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import (
    DONE,
    DRAIN,
    ENTRY_FIELDS,
    FAILED,
    IN_PROGRESS,
    STARTED,
    TERMINATE,
    DeleteRequest,
    Outcome,
    batches_text,
    budget_left,
    machine_metrics,
    option_errors,
    preflight,
    progress_lines,
    slice_message,
    start_phase,
    started_clock,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.view import describe

PARAMS = {
    "machines": [{"name": "a", "namespace": "ns"}],
    "rules": [],
    "use_cluster_rules": True,
    "grace_period": None,
    "drain_timeout": 60,
    "terminate_timeout": 60,
    "wait_sleep": 2,
    "instance_terminated": [],
    "clock": {},
    "progress_interval": 20,
    "concurrency": 10,
}


def test_the_request_keeps_only_what_finds_a_machine() -> None:
    params = {**PARAMS, "machines": [{"name": "a", "namespace": "ns", "phase": "Running", "api_version": ""}]}
    request = DeleteRequest.from_params(params, False, 1000.0)
    assert request.machines == ({"name": "a", "namespace": "ns", "api_version": None},)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"machines": [{"name": "a"}]}, "machines[0] must have a name and a namespace"),
        ({"machines": [{"name": "a", "namespace": "ns"}, {"name": "a", "namespace": "ns"}]}, "Machine ns/a is given twice"),
        ({"drain_timeout": 0}, "drain_timeout must be at least 1 (got 0)"),
        ({"terminate_timeout": -5}, "terminate_timeout must be at least 1 (got -5)"),
        ({"concurrency": 0}, "concurrency must be at least 1 (got 0)"),
        ({"progress_interval": -1}, "progress_interval must be 0 or more seconds (got -1)"),
        ({"wait_sleep": 0}, "wait_sleep must be at least 1 (got 0)"),
        ({"grace_period": -1}, "grace_period must be 0 or more seconds (got -1)"),
        ({"drain_timeout": 10**10}, "drain_timeout must be at most 31536000 seconds, a year (got 10000000000)"),
        (
            {"machines": [{"name": "a", "namespace": "ns", "api_verison": "cluster.x-k8s.io/v1beta1"}]},
            "machines[0] has unknown key(s) api_verison (a Machine is chosen by name, namespace, api_version)",
        ),
        ({"machines": [{"name": "Worker-1", "namespace": "ns"}]}, "machines[0].name 'Worker-1' can never name a Kubernetes object"),
        ({"machines": [{"name": "a", "namespace": "openshift.machine.api"}]}, "machines[0].namespace 'openshift.machine.api' can never name a Namespace"),
    ],
)
def test_bad_options_are_refused_naming_them(change: dict, error: str) -> None:
    assert error in "; ".join(option_errors({**PARAMS, **change}))
    with pytest.raises(MachineError, match="nothing was changed"):
        DeleteRequest.from_params({**PARAMS, **change}, False, 1000.0)


def test_an_invalid_drain_rule_is_refused_before_any_machine_is_touched() -> None:
    rules = [{"name": "late", "drain": {"behavior": "Evict"}}]
    with pytest.raises(MachineError, match=r"^Invalid MachineDrainRule late: spec\.drain\.behavior must be one of Drain, Skip, WaitCompleted, got 'Evict'$"):
        DeleteRequest.from_params({**PARAMS, "rules": rules}, False, 1000.0)


def test_the_clock_keeps_well_formed_phases_only() -> None:
    clock = {"ns/a": {DRAIN: 900, TERMINATE: "950", "other": 1}, "ns/b": {DRAIN: "soon"}, "ns/c": "bad", "ns/d": {DRAIN: 5000}}
    assert started_clock(clock, 1000.0) == {"ns/a": {DRAIN: 900.0, TERMINATE: 950.0}, "ns/b": {}, "ns/d": {}}


def test_the_deletion_starts_on_the_first_call_and_the_clock_keeps_that_start() -> None:
    first = DeleteRequest.from_params(PARAMS, False, 1000.0)
    assert first.clock == {"ns/a": {STARTED: 1000.0}}
    # Round 300, an hour later: the clock handed back keeps the first call's start.
    later = DeleteRequest.from_params({**PARAMS, "clock": {"ns/a": {STARTED: 1000.0, DRAIN: 1001.0}}}, False, 4600.0)
    assert later.clock == {"ns/a": {STARTED: 1000.0, DRAIN: 1001.0}}


def test_progress_counts_from_the_start_of_the_deletion_not_of_the_round() -> None:
    held = Outcome(machine={"name": "a", "namespace": "ns"}, status=IN_PROGRESS, step=DRAIN)
    clock = {"ns/a": {STARTED: 1000.0, DRAIN: 1001.0}, "ns/other": {STARTED: 10.0}}
    assert progress_lines([held], 1.0, clock=clock, now=4600.4)[0] == "1 Machine after 3600 s: 1 in progress"
    # A clock from before the start was kept: the earliest phase it holds.
    assert progress_lines([held], 1.0, clock={"ns/a": {DRAIN: 4000.0}}, now=4600.0)[0] == "1 Machine after 600 s: 1 in progress"
    # Nothing started yet (check mode, a clock with no entry for it): this call's own time.
    assert progress_lines([held], 1.2, clock={}, now=4600.0)[0] == "1 Machine after 1 s: 1 in progress"
    assert progress_lines([held], 1.2)[0] == "1 Machine after 1 s: 1 in progress"


def test_a_budget_counts_from_when_its_phase_first_started() -> None:
    clock: dict = {}
    start_phase(clock, "ns/a", DRAIN, 100.0)
    start_phase(clock, "ns/a", DRAIN, 150.0)  # a later call does not move it
    assert clock == {"ns/a": {DRAIN: 100.0}}
    assert budget_left(clock, "ns/a", DRAIN, 60, 130.0) == 30
    assert budget_left(clock, "ns/a", TERMINATE, 60, 130.0) == 60, "not started: the whole budget"


def test_batches_read_as_pods_left_per_order() -> None:
    batches = [{"order": 0, "pods": ["ns/a", "ns/b"], "terminating": ["ns/a"]}, {"order": 10, "pods": ["ns/c"], "terminating": []}]
    assert batches_text(batches) == "order 0: 2 Pods (1 terminating), order 10: 1 Pod"


def test_progress_says_where_each_machine_stands() -> None:
    draining = Outcome(
        machine={"name": "b", "namespace": "ns"},
        status=IN_PROGRESS,
        step=DRAIN,
        message="Drain not completed yet (started at 2026-01-01T00:00:00Z):\n* Pod ns/web-1: cannot evict pod as it would violate the pod's disruption budget.",
        drain={"batches": [{"order": 0, "pods": ["ns/web-1"], "terminating": []}]},
    )
    done = Outcome(machine={"name": "a", "namespace": "ns"}, status=DONE, step="release")
    failed = Outcome(machine={"name": "c", "namespace": "ns"}, status=FAILED, step=TERMINATE, message="Timed out after 5s waiting at the preTerminate gate")
    assert progress_lines([draining, done, failed], 20.4) == [
        "3 Machines after 20 s: 1 done, 1 in progress, 1 failed",
        "ns/a: done at release",
        "ns/b: in progress at drain - order 0: 1 Pod",
        "    * Pod ns/web-1: cannot evict pod as it would violate the pod's disruption budget.",
        "ns/c: failed at terminate",
        "    Timed out after 5s waiting at the preTerminate gate",
    ]
    assert draining.as_dict()["key"] == "ns/b"


def test_a_drain_message_after_its_slice_or_its_time_keeps_the_pods_left() -> None:
    """A slice of the drain that ends reads "Draining Node n. Drain not completed yet ...", a spent
    budget "Timed out after ... draining Node n. Drain not completed yet ...": what is left follows."""
    pods_left = "* Pod ns/web-1: cannot evict pod as it would violate the pod's disruption budget."
    drain = {"batches": [{"order": 0, "pods": ["ns/web-1"], "terminating": []}]}
    timed_out = f"Timed out after 300 s draining Node n1. Drain not completed yet (started at 2026-01-01T00:00:00Z):\n{pods_left}"
    sliced = slice_message(timed_out, final=False, timeout=300)
    draining = Outcome(machine={"name": "b", "namespace": "ns"}, status=IN_PROGRESS, step=DRAIN, message=sliced, drain=drain)
    failed = Outcome(machine={"name": "c", "namespace": "ns"}, status=FAILED, step=DRAIN, message=timed_out, drain=drain)
    assert progress_lines([draining, failed], 20.4)[1:] == [
        "ns/b: in progress at drain - order 0: 1 Pod",
        "    Draining Node n1. Drain not completed yet (started at 2026-01-01T00:00:00Z):",
        f"    {pods_left}",
        "ns/c: failed at drain",
        "    Timed out after 300 s draining Node n1. Drain not completed yet (started at 2026-01-01T00:00:00Z):",
        f"    {pods_left}",
    ]


@pytest.mark.parametrize(
    ("message", "final", "expected"),
    [
        (
            "Timed out after 1 s waiting for the preDrain hooks of Machine ns/m to be removed: backup (owner ctl)",
            False,
            "Waiting for the preDrain hooks of Machine ns/m to be removed: backup (owner ctl)",
        ),
        (
            "Timed out after 0 s waiting for the preDrain hooks of Machine ns/m to be removed: backup (owner ctl)",
            True,
            "Timed out after 3600 s waiting for the preDrain hooks of Machine ns/m to be removed: backup (owner ctl)",
        ),
        ("Timed out after 20s waiting at the preTerminate gate of Machine ns/m", False, "Waiting at the preTerminate gate of Machine ns/m"),
        (
            "Timed out after 7s waiting at the preTerminate gate of Machine ns/m",
            True,
            "Timed out after 3600 s waiting at the preTerminate gate of Machine ns/m",
        ),
        ("Timed out after 20s: the Node is still there", False, "The Node is still there"),
        ("Drain not completed yet (started at 2026-11-25T00:00:00Z):", False, "Drain not completed yet (started at 2026-11-25T00:00:00Z):"),
    ],
)
def test_a_slice_that_ends_says_where_the_step_stands_and_a_spent_budget_says_the_whole_timeout(message, final, expected) -> None:
    assert slice_message(message, final=final, timeout=3600) == expected


def test_entries_of_machine_info_and_machine_delete_are_accepted_as_they_are() -> None:
    """Their results are passed on as they are; every key they return must be known."""
    info = describe({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "a", "namespace": "ns"}, "spec": {}})
    outcome = Outcome({"name": "a", "namespace": "ns", "api_version": None}).as_dict()
    assert set(info) <= ENTRY_FIELDS
    assert set(outcome) <= ENTRY_FIELDS
    assert option_errors({**PARAMS, "machines": [info]}) == []


def test_who_carries_out_the_deletion_is_checked_with_the_other_options() -> None:
    assert any("machine_controller must be one of auto, live, absent" in e for e in option_errors({**PARAMS, "machine_controller": "on"}))
    assert any("controller_grace" in e for e in option_errors({**PARAMS, "controller_grace": -1}))
    request = DeleteRequest.from_params({**PARAMS, "workload_cluster": {}, "machine_controller": "live", "controller_grace": 3}, False, 1000.0)
    assert (request.machine_controller, request.controller_grace) == ("live", 3)
    with pytest.raises(MachineError):
        DeleteRequest.from_params({**PARAMS, "machine_controller": "maybe"}, False, 1000.0)


def test_machine_metrics_count_each_phase_from_the_clock_and_the_blockers_by_kind() -> None:
    outcome = Outcome(machine={"name": "m", "namespace": "ns"}, status="in_progress", step="terminate")
    outcome.drain = {"evicted": ["ns/a", "ns/b"]}
    outcome.terminate = {"blockers": [{"kind": "hook", "verdict": "needs someone to act"}, {"kind": "hook", "verdict": "needs someone to act"}]}
    clock = {"ns/m": {"drain": 100.0, "terminate": 160.0}}
    metrics = machine_metrics(outcome, clock, 190.0)
    assert metrics == {
        "name": "m",
        "namespace": "ns",
        "cluster_name": "",
        "outcome": "waiting",
        "phase_seconds": {"drain": 60.0, "terminate": 30.0},
        "evicted": 2,
        "blockers_by_kind": {"hook": 2},
        "blockers_by_verdict": {"needs someone to act": 2},
    }
    clock["ns/m"]["done"] = 170.0
    assert machine_metrics(outcome, clock, 500.0)["phase_seconds"] == {"drain": 60.0, "terminate": 10.0}
    assert machine_metrics(outcome, {}, 500.0)["phase_seconds"] == {}


@pytest.mark.parametrize(
    ("status", "expected"),
    [("done", "done"), ("failed", "failed"), ("in_progress", "waiting"), ("awaiting_instance_termination", "waiting"), ("planned", "waiting")],
)
def test_machine_metrics_say_whether_the_deletion_is_done_failed_or_waiting(status, expected) -> None:
    assert machine_metrics(Outcome(machine={"name": "m", "namespace": "ns"}, status=status), {}, 1.0)["outcome"] == expected


def test_machine_metrics_name_the_machines_cluster_as_cluster_apis_metrics_do() -> None:
    """cluster_name: the Cluster API Cluster (spec.clusterName, the workload cluster), or the cluster an OpenShift Machine's label names."""
    capi = Outcome(machine={"name": "m", "namespace": "ns"}, cluster="prod", cluster_name="prod")
    openshift = Outcome(machine={"name": "m", "namespace": "openshift-machine-api"}, cluster=None, cluster_name="ocp-7x2k")
    assert machine_metrics(capi, {}, 1.0)["cluster_name"] == "prod"
    assert machine_metrics(openshift, {}, 1.0)["cluster_name"] == "ocp-7x2k"
    assert machine_metrics(Outcome(machine={"name": "m", "namespace": "ns"}, cluster="prod"), {}, 1.0)["cluster_name"] == "prod"


def test_check_mode_answers_which_machines_would_finish_wait_or_never() -> None:
    def planned(name: str, blockers: list[dict]) -> Outcome:
        outcome = Outcome(machine={"name": name, "namespace": "ns"}, status="planned", step="drain")
        outcome.drain = {"blockers": blockers}
        return outcome

    never = {"verdict": "can never clear as things stand", "kind": "two budgets", "object": "Pod ns/a", "reason": "change the budgets"}
    clears = {"verdict": "clears by itself", "kind": "budget refusal", "object": "Pod ns/b", "reason": "budget ns/web allows another eviction once"}
    failed = Outcome(machine={"name": "d", "namespace": "ns"}, status="failed", message="Machine ns/d not found")
    answer = preflight([planned("a", [never, clears]), planned("b", [clears]), planned("c", []), failed])
    assert answer == {
        "would_finish": ["ns/c"],
        "would_wait": {"ns/b": ["budget refusal Pod ns/b: budget ns/web allows another eviction once"]},
        "can_never_finish": {"ns/a": ["can never clear as things stand: two budgets Pod ns/a: change the budgets"], "ns/d": ["Machine ns/d not found"]},
    }
