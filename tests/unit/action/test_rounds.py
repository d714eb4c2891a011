"""Unit tests for plugin_utils/_rounds.py: how the progress rounds of
machine_drain and machine_delete are chained and folded into one task result."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.plugin_utils._rounds import DeleteRounds, DrainRounds, union


def drain_round(*, completed: bool, evicted=(), pods=(), message="Drain not completed yet", passes=1, changed=True, **extra) -> dict:
    return {
        "changed": changed,
        "completed": completed,
        "evicted": list(evicted),
        "pods": [{"namespace": "ns", "name": name} for name in pods],
        "message": message,
        "passes": passes,
        "api_requests": 10,
        "elapsed_seconds": 2.0,
        "started_at": extra.pop("started_at", "2026-11-25T00:00:00Z"),
        **extra,
    }


def test_union_keeps_the_first_order_and_each_item_once() -> None:
    assert union(["a", "b"], ["b", "c", "a", "d"]) == ["a", "b", "c", "d"]


def test_a_drain_goes_on_while_not_completed_and_counts_its_timeout_from_the_start() -> None:
    rounds = DrainRounds({"node": "n", "wait_timeout": 100, "progress_interval": 20}, 1000.0, check_mode=False)
    assert rounds.next_args(1000.0)["wait_timeout"] == 100
    assert rounds.add(drain_round(completed=False, message="line 1\nline 2")) == ["line 1", "line 2"]
    assert not rounds.finished()
    assert rounds.next_args(1030.5)["wait_timeout"] == 69
    assert rounds.next_args(1200.0)["wait_timeout"] == 1, "never under a second: the module reports its own timeout"
    rounds.add(drain_round(completed=True, message="Node n drained"))
    assert rounds.finished()


def test_a_drain_result_adds_up_every_round() -> None:
    rounds = DrainRounds({"node": "n", "progress_interval": 20}, 0.0, check_mode=False)
    rounds.add(drain_round(completed=False, evicted=["ns/a"], pods=["a", "b"], started_at="first"))
    rounds.add(drain_round(completed=False, evicted=[], pods=["b"], changed=False, started_at="second"))
    rounds.add(drain_round(completed=True, evicted=["ns/b"], pods=[], changed=False, started_at="third"))
    result = rounds.result()
    assert result["evicted"] == ["ns/a", "ns/b"]
    assert [pod["name"] for pod in result["pods"]] == ["a", "b"]
    assert (result["changed"], result["passes"], result["rounds"], result["api_requests"], result["elapsed_seconds"]) == (True, 3, 3, 30, 6.0)
    assert result["started_at"] == "first"
    assert result["completed"] is True


def test_a_drain_round_prints_what_holds_it_that_needs_someone() -> None:
    rounds = DrainRounds({"node": "n", "progress_interval": 20}, 0.0, check_mode=False)
    held = {"verdict": "can never clear as things stand", "kind": "two budgets", "object": "Pod ns/a", "reason": "change the budgets"}
    clears = {"verdict": "clears by itself", "kind": "pod terminating", "object": "Pod ns/b", "reason": "within its grace"}
    lines = rounds.add({**drain_round(completed=False, evicted=[], pods=["a"]), "message": "Drain not completed yet", "blockers": [held, clears]})
    assert lines == ["Drain not completed yet", "! can never clear as things stand: two budgets Pod ns/a: change the budgets"]


def test_a_drain_that_times_out_in_a_later_round_names_the_tasks_wait_timeout() -> None:
    rounds = DrainRounds({"node": "n", "wait_timeout": 30, "progress_interval": 20}, 0.0, check_mode=False)
    rounds.add(drain_round(completed=False))
    assert rounds.next_args(28.2)["wait_timeout"] == 1
    rounds.add(drain_round(completed=False, failed=True, msg="Timed out after 1 s draining Node n. Drain not completed yet"))
    assert rounds.finished()
    assert rounds.result()["msg"] == "Timed out after 30 s draining Node n. Drain not completed yet"


def test_a_drain_stops_after_one_round_when_it_fails_is_checked_does_not_wait_or_has_no_interval() -> None:
    cases = [
        ({"progress_interval": 20}, False, drain_round(completed=False, failed=True)),
        ({"progress_interval": 20}, True, drain_round(completed=False)),
        ({"progress_interval": 20, "wait": False}, False, drain_round(completed=False)),
        ({"progress_interval": 0}, False, drain_round(completed=False)),
        ({"progress_interval": 20}, False, {"changed": False, "skipped_reason": "no nodeRef", "completed": True}),
    ]
    for args, check_mode, result in cases:
        rounds = DrainRounds(args, 0.0, check_mode=check_mode)
        rounds.add(result)
        assert rounds.finished(), (args, check_mode, result)
        assert rounds.result() == {**result, "rounds": 1}


def machine(name: str, status: str, changed: bool = False, flavour: str = "clusterapi") -> dict:
    entry = {"name": name, "namespace": "ns", "key": f"ns/{name}", "api_version": None, "flavour": flavour}
    return {**entry, "status": status, "changed": changed, "step": "drain"}


def delete_round(*machines: dict, clock=None, errors=()) -> dict:
    return {
        "changed": any(m["changed"] for m in machines),
        "machines": list(machines),
        "completed": all(m["status"] == "done" for m in machines),
        "awaiting_instance_termination": [m for m in machines if m["status"] == "awaiting_instance_termination"],
        "failed_machines": [m for m in machines if m["status"] == "failed"],
        "errors": list(errors),
        "progress": [f"{len(machines)} Machines after 20 s"],
        "clock": clock or {},
        "elapsed_seconds": 20.0,
        "api_requests": 5,
    }


def test_a_deletion_goes_on_with_the_machines_in_progress_only_and_their_clock() -> None:
    given = [{"name": "a", "namespace": "ns"}, {"name": "b", "namespace": "ns"}]
    rounds = DeleteRounds({"machines": given, "progress_interval": 20}, check_mode=False)
    assert rounds.next_args(0)["machines"] == given
    clock = {"ns/b": {"drain": 1.0}}
    assert rounds.add(delete_round(machine("a", "failed", True), machine("b", "in_progress", True), clock=clock, errors=["ns/a: boom"])) == [
        "2 Machines after 20 s"
    ]
    assert not rounds.finished()
    following = rounds.next_args(0)
    assert following["machines"] == [{"name": "b", "namespace": "ns", "api_version": None, "flavour": "clusterapi", "key": "ns/b"}]
    assert following["clock"] == clock
    rounds.add(delete_round(machine("b", "done")))
    assert rounds.finished()
    result = rounds.result()
    assert [(m["key"], m["status"], m["changed"]) for m in result["machines"]] == [("ns/a", "failed", True), ("ns/b", "done", True)]
    assert result["completed"] is False
    assert [m["key"] for m in result["failed_machines"]] == ["ns/a"]
    assert result["errors"] == ["ns/a: boom"]
    assert (result["changed"], result["rounds"], result["api_requests"]) == (True, 2, 10)


def test_the_figures_of_every_machine_are_kept_across_rounds() -> None:
    rounds = DeleteRounds({"machines": [{"name": "a", "namespace": "ns"}, {"name": "b", "namespace": "ns"}], "progress_interval": 20}, check_mode=False)
    first = {**delete_round(machine("a", "done"), machine("b", "in_progress")), "metrics": {"ns/a": {"outcome": "done"}, "ns/b": {"outcome": "waiting"}}}
    rounds.add(first)
    rounds.add({**delete_round(machine("b", "done")), "metrics": {"ns/b": {"outcome": "done"}}})
    assert rounds.result()["metrics"] == {"ns/a": {"outcome": "done"}, "ns/b": {"outcome": "done"}}


def drained(name: str, status: str, *evicted: str) -> dict:
    return {**machine(name, status), "drain": {"evicted": list(evicted), "completed": status != "in_progress"}}


def test_the_pods_evicted_add_up_over_the_rounds_of_a_drain() -> None:
    """A drain held by a budget across rounds evicts some Pods in each: the figures count them all, not the last round's."""
    rounds = DeleteRounds({"machines": [{"name": "a", "namespace": "ns"}], "progress_interval": 1}, check_mode=False)
    rounds.add({**delete_round(drained("a", "in_progress", "ns/web-1", "ns/web-2")), "metrics": {"ns/a": {"evicted": 2, "outcome": "waiting"}}})
    rounds.add({**delete_round(machine("a", "in_progress")), "metrics": {"ns/a": {"evicted": 0, "outcome": "waiting"}}})
    rounds.add({**delete_round(drained("a", "in_progress", "ns/web-3")), "metrics": {"ns/a": {"evicted": 1, "outcome": "waiting"}}})
    rounds.add({**delete_round(drained("a", "done")), "metrics": {"ns/a": {"evicted": 0, "outcome": "done"}}})
    result = rounds.result()
    assert result["metrics"] == {"ns/a": {"evicted": 3, "outcome": "done"}}
    assert result["machines"][0]["drain"]["evicted"] == ["ns/web-1", "ns/web-2", "ns/web-3"]


def test_a_deletion_returns_to_the_playbook_when_an_openshift_machine_awaits_its_provider_tasks() -> None:
    rounds = DeleteRounds({"machines": [{"name": "a", "namespace": "ns"}, {"name": "b", "namespace": "ns"}], "progress_interval": 20}, check_mode=False)
    rounds.add(delete_round(machine("a", "awaiting_instance_termination", flavour="openshift"), machine("b", "in_progress")))
    assert rounds.finished()
    assert [m["key"] for m in rounds.result()["awaiting_instance_termination"]] == ["ns/a"]


def test_a_deletion_in_check_mode_or_without_interval_is_one_round() -> None:
    for args, check_mode in (({"progress_interval": 20}, True), ({"progress_interval": 0}, False)):
        rounds = DeleteRounds({"machines": [{"name": "a", "namespace": "ns"}], **args}, check_mode=check_mode)
        rounds.add(delete_round(machine("a", "in_progress")))
        assert rounds.finished()
