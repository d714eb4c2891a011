"""What holds a drain, against the real API server (docs/stalls.md): a budget
that can never allow an eviction, a Pod two budgets select (asked once, not in
a tight loop, and answered at once in check mode), and a Pod kept past its
grace by a finalizer."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from khelpers import deployment, pod_is_ready, wait_for
from test_machine_drain import CAPI_ONLY, GRACE, create_pdb, delete_machine, evictions, get_pod, machine_path, make_pods, order_rule

EXTENDED_FLAVOURS = ("v1beta1",)  # variants make test leaves out (conftest.py: pytest_collection_modifyitems)

NEVER = "can never clear as things stand"
REPO = Path(__file__).resolve().parents[2]


def budget(kube, namespace: str, name: str, spec: dict) -> None:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}
    kube.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body)

    def counted() -> bool:
        pdb = kube.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
        return (pdb.get("status") or {}).get("observedGeneration") == pdb["metadata"]["generation"]

    wait_for(counted, what=f"PodDisruptionBudget {name} observed by the disruption controller")


def test_a_budget_that_needs_every_pod_is_reported_as_never(*, kube, namespace, make_node, run_module) -> None:
    node = make_node(labels={"lm-pool": namespace})
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("db", 2, {"lm-pool": namespace}, GRACE))
    wait_for(lambda: len([p for p in kube.list(f"/api/v1/namespaces/{namespace}/pods") if pod_is_ready(p)]) == 2, what="2 db Pods Ready")
    create_pdb(kube, namespace, "db", selector={"app": "db"}, min_available=2, healthy=2)

    result = run_module("machine_drain", {"node": node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is False and result["evicted"] == []
    never = [b for b in result["blockers"] if b["verdict"] == NEVER]
    assert {b["object"].split("/")[0] for b in never} == {f"Pod {namespace}"} and len(never) == 2, result["blockers"]
    evidence = never[0]["evidence"]
    assert (evidence["budget"], evidence["needed_healthy"], evidence["healthy"], evidence["expected_pods"], evidence["disruptions_allowed"]) == (
        f"{namespace}/db",
        2,
        2,
        2,
        0,
    )
    assert never[0]["kind"] == "budget refusal" and "needs all 2 of its Pods healthy" in never[0]["reason"]


def test_a_pod_two_budgets_select_is_never_and_asked_once_per_interval(*, kube, namespace, make_node, run_module, audit_events) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"web-0": {"labels": {"app": "web"}}})
    budget(kube, namespace, "a", {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}})
    budget(kube, namespace, "b", {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}})

    began = time.monotonic()
    plan = run_module("machine_drain", {"node": node}, check=True)
    assert time.monotonic() - began < 30, "a preview answers at once"
    assert not plan.get("failed"), plan.get("msg")
    assert [b["kind"] for b in plan["blockers"]] == ["two budgets"] and plan["blockers"][0]["verdict"] == NEVER

    result = run_module("machine_drain", {"node": node, "wait": True, "wait_timeout": 12, "wait_sleep": 1})
    assert result.get("failed") and result.get("timed_out"), result
    [blocker] = [b for b in result["blockers"] if b["kind"] == "two budgets"]
    assert sorted(blocker["evidence"]["budgets"]) == [f"{namespace}/a", f"{namespace}/b"]
    # Cluster API asks again every 20 s: within 12 s one eviction, not one every retry.
    assert sum(len(codes) for codes in evictions(audit_events, namespace).values()) == 1


def test_a_pod_kept_past_its_grace_by_a_finalizer_needs_someone(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"held": {"grace": 1}})
    path = f"/api/v1/namespaces/{namespace}/pods/held"
    kube.patch(path, {"metadata": {"finalizers": ["example.com/backup"]}})
    try:
        first = run_module("machine_drain", {"node": node, "wait": False})
        assert first["evicted"] == [f"{namespace}/held"], first
        time.sleep(3)  # past its 1 s grace; kwok cannot remove it while the finalizer stays
        result = run_module("machine_drain", {"node": node, "wait": False})
        [blocker] = result["blockers"]
        assert (blocker["kind"], blocker["verdict"], blocker["evidence"]["finalizers"]) == ("finalizer", "needs someone to act", ["example.com/backup"])
        assert blocker["since"] and blocker["evidence"]["past_grace_seconds"] >= 1
    finally:
        kube.patch(path, {"metadata": {"finalizers": None}})


@CAPI_ONLY
def test_on_stall_fail_stops_at_once_on_the_record_and_overrides_nothing(*, flavour, kube, namespace, machine_node, run_module, audit_events) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"db-0": {"labels": {"app": "db"}}})
    budget(kube, namespace, "db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}})
    delete_machine(kube, flavour, namespace, machine)

    began = time.monotonic()
    result = run_module("machine_drain", {"machine": machine, "namespace": namespace, "on_stall": "fail", "wait_timeout": 120})

    assert result.get("failed") and result.get("stalled"), result
    assert time.monotonic() - began < 60, "it fails at once, not at the end of wait_timeout"
    assert result["msg"].startswith(f"Stopped draining Node {node}: it can never finish as things stand (Pod {namespace}/db-0: budget {namespace}/db")
    assert [b["verdict"] for b in result["blockers"]] == [NEVER]
    # Nothing overridden: the Pod is there, refused once, never deleted; the Machine stays marked for a later run.
    assert get_pod(kube, namespace, "db-0") is not None and not get_pod(kube, namespace, "db-0")["metadata"].get("deletionTimestamp")
    assert evictions(audit_events, namespace) == {"db-0": [429]}
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"].get("deletionTimestamp")
    events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={machine}")
    assert [e["type"] for e in events if e["reason"] == "DrainStalled"] == ["Warning"]


@CAPI_ONLY
def test_check_mode_says_which_machines_would_finish_wait_or_never_and_changes_nothing(
    *, flavour, kube, namespace, machine_node, make_node, make_machine, run_module, audit_events
) -> None:
    free, free_node = machine_node()  # the first also makes the Cluster

    def another() -> tuple[str, str]:
        node = make_node()
        return make_machine(namespace, node=node)["metadata"]["name"], node

    (waits, waits_node), (stuck, stuck_node) = another(), another()
    make_pods(kube, namespace, free_node, {"free-0": {}})
    make_pods(kube, namespace, waits_node, {"web-0": {"labels": {"app": "web"}}, "web-1": {"labels": {"app": "web"}}})
    budget(kube, namespace, "web", {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}})
    make_pods(kube, namespace, stuck_node, {"db-0": {"labels": {"app": "db"}}})
    budget(kube, namespace, "db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}})
    machines = [{"name": name, "namespace": namespace} for name in (free, waits, stuck)]

    plan = run_module("machine_delete", {"machines": machines, "machine_controller": "absent"}, check=True)

    assert not plan.get("failed"), plan.get("msg")
    answer = plan["preflight"]
    assert answer["would_finish"] == [f"{namespace}/{free}"]
    assert list(answer["would_wait"]) == [f"{namespace}/{waits}"] and "budget refusal" in answer["would_wait"][f"{namespace}/{waits}"][0]
    assert list(answer["can_never_finish"]) == [f"{namespace}/{stuck}"]
    assert "maxUnavailable is 0" in answer["can_never_finish"][f"{namespace}/{stuck}"][0]
    # Check mode changed nothing: no Machine marked, no eviction sent.
    assert all(not kube.get(machine_path(flavour, namespace, m["name"]))["metadata"].get("deletionTimestamp") for m in machines)
    assert evictions(audit_events, namespace) == {}


def stalled_events(kube, namespace: str, machine: str) -> list[dict]:
    events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={machine}")
    return [e for e in events if e["reason"] == "DrainStalled"]


@CAPI_ONLY
def test_stall_timeout_fails_a_drain_without_progress_across_rounds_and_a_later_run_goes_on(
    *, flavour, kube, namespace, machine_node, run_module, audit_events
) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"free-0": {}, "db-0": {"labels": {"app": "db"}}})
    budget(kube, namespace, "db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}})
    delete_machine(kube, flavour, namespace, machine)
    params = {"machine": machine, "namespace": namespace, "wait_timeout": 120, "wait_sleep": 1}

    began = time.monotonic()
    # Rounds of 2 s: only a count carried from round to round reaches 5 s without progress.
    result = run_module("machine_drain", {**params, "stall_timeout": "5s", "progress_interval": 2})
    took = time.monotonic() - began

    assert result.get("failed") and result.get("stalled") and not result.get("timed_out"), result
    assert result["rounds"] >= 2 and took < 60, (result["rounds"], took)
    assert result["msg"].startswith(f"Stopped draining Node {node}: no progress for "), result["msg"]
    assert "stall_timeout is 5 s; the last was at " in result["msg"], result["msg"]
    assert f"Pod {namespace}/db-0: budget {namespace}/db" in result["msg"], "it names what holds it"
    assert result["stall"]["timeout"] == 5 and result["stall"]["progress_since"] <= time.time() - 5, result["stall"]
    # On the record, nothing overridden, the Machine still marked.
    [event] = stalled_events(kube, namespace, machine)
    assert event["type"] == "Warning" and "asked for by stall_timeout: 5 s" in event["message"]
    assert not get_pod(kube, namespace, "db-0")["metadata"].get("deletionTimestamp")
    assert set(evictions(audit_events, namespace)["db-0"]) == {429}
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"].get("deletionTimestamp")

    # Fixed, a later run without the option goes on where it stood.
    kube.delete(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/db")
    later = run_module("machine_drain", params)
    assert not later.get("failed") and later["completed"], later
    assert later["evicted"] == [f"{namespace}/db-0"] and "stall" not in later


def test_a_drain_that_keeps_making_progress_is_not_stalled(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    # Three batches, each a Pod that takes 3 s to go: the drain takes longer than stall_timeout, never that long without progress.
    make_pods(kube, namespace, node, {f"p{order}": {"grace": 3, "labels": {"step": str(order)}} for order in (0, 10, 20)})
    rules = [order_rule(f"step-{order}", order, step=str(order)) for order in (0, 10, 20)]

    began = time.monotonic()
    result = run_module("machine_drain", {"node": node, "rules": rules, "stall_timeout": 5, "wait_timeout": 120, "wait_sleep": 1})

    assert not result.get("failed") and result["completed"], result.get("msg")
    assert time.monotonic() - began > 5, "the drain itself took longer than stall_timeout"
    assert result["evicted"] == [f"{namespace}/p0", f"{namespace}/p10", f"{namespace}/p20"]
    assert f"Pod {namespace}/p20" in result["stall"]["progress"], result["stall"]


@CAPI_ONLY
def test_machine_delete_counts_the_time_without_progress_across_rounds(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"db-0": {"labels": {"app": "db"}}})
    budget(kube, namespace, "db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}})
    machines = [{"name": machine, "namespace": namespace}]

    began = time.monotonic()
    result = run_module(
        "machine_delete", {"machines": machines, "machine_controller": "absent", "stall_timeout": 5, "progress_interval": 2, "drain_timeout": 120}
    )

    [outcome] = result["machines"]
    assert outcome["status"] == "failed" and outcome["message"].startswith(f"Stopped draining Node {node}: no progress for "), outcome
    assert result["rounds"] >= 2 and time.monotonic() - began < 60, "a round lasts 2 s: only a count carried across rounds reaches 5"
    assert f"Pod {namespace}/db-0: budget {namespace}/db" in outcome["message"]
    assert result["clock"][f"{namespace}/{machine}"]["drain_progress"] >= result["clock"][f"{namespace}/{machine}"]["drain"]
    assert [e["type"] for e in stalled_events(kube, namespace, machine)] == ["Warning"]
    assert not get_pod(kube, namespace, "db-0")["metadata"].get("deletionTimestamp"), "nothing overridden"
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"].get("deletionTimestamp"), "the Machine stays marked"


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_the_delete_machine_playbook_passes_stall_timeout_on(*, flavour, kube, namespace, machine_node, run_playbook) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"db-0": {"labels": {"app": "db"}}})
    budget(kube, namespace, "db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}})
    extra = {"machine_name": machine, "machine_namespace": namespace, "machine_controller": "absent", "progress_interval": 2, "stall_timeout": "5s"}

    run = run_playbook(REPO / "playbooks" / "delete_machine.yml", extra)

    assert run.returncode != 0, run.stdout
    assert f"Stopped draining Node {node}: no progress for " in run.stdout and "stall_timeout is 5 s" in run.stdout, run.stdout[-3000:]
    assert [e["type"] for e in stalled_events(kube, namespace, machine)] == ["Warning"]
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"].get("deletionTimestamp"), "the Machine stays marked"
