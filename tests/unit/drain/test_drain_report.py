"""The result of a drain task (_drain/report.py, pure): what each pass adds
(``DrainReport``), the diff, check mode's preview, the result dict, the Pods
tracked across passes (``PodLedger``) and the quoting of Event messages."""

from __future__ import annotations

import datetime as dt

from pod_objects import PDB, decision, pass_of

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import DrainPass, EvictionOutcome
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.report import DrainReport, PodLedger, go_quote, machine_summary
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, SKIP
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for

STARTED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
NODE = {"metadata": {"name": "n1"}, "spec": {}}
CORDONED = {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}


def a_pass(node: dict | None, evicted: list[str] = (), cordoned: bool = False) -> DrainPass:
    decisions = [PodDecision(namespace="ns", name="web-0", behavior=DRAIN), PodDecision(namespace="ns", name="agent", behavior=SKIP)]
    return DrainPass(node=node, decisions=decisions, plan=plan_drain(decisions), outcome=EvictionOutcome(evicted=list(evicted)), cordoned=cordoned)


def result_of(report: DrainReport, **options) -> dict:
    return report.result(False, "m", elapsed=1.26, api_requests=7, **options)


def test_a_pass_that_acted_changes_the_node() -> None:
    report = DrainReport(DrainRequest(node="n1"), STARTED)
    report.record_pass(a_pass(CORDONED, evicted=["ns/web-0"], cordoned=True), act=True)
    result = result_of(report)
    assert (result["changed"], result["passes"], result["evicted"], result["unschedulable"]) == (True, 1, ["ns/web-0"], True)
    assert (result["elapsed_seconds"], result["api_requests"], result["started_at"]) == (1.3, 7, "2026-01-02T03:04:05Z")
    assert result["diff"]["before"]["pods"] == ["ns/agent", "ns/web-0"] and result["diff"]["after"]["pods"] == ["ns/agent"]
    assert "machine" not in result


def test_the_machine_writes_count_as_changes() -> None:
    report = DrainReport(DrainRequest(node="n1"), STARTED)
    assert result_of(report)["changed"] is False
    assert result_of(report, machine_changed=True)["changed"] is True
    assert "diff" not in result_of(report) and "unschedulable" not in result_of(report)


def test_check_mode_preview_shows_the_node_cordoned_and_drained() -> None:
    report = DrainReport(DrainRequest(node="n1", check_mode=True), STARTED)
    report.record_preview(a_pass(NODE, evicted=["ns/web-0"]))
    result = result_of(report)
    assert result["changed"] is True and result["evicted"] == [], "a dry run evicts nothing"
    assert result["diff"]["before"]["unschedulable"] is False and result["diff"]["after"]["unschedulable"] is True
    assert result["diff"]["after"]["pods"] == ["ns/agent"]


def test_cordon_records_the_node_before_and_after() -> None:
    report = DrainReport(DrainRequest(node="n1", state="cordoned"), STARTED)
    report.record_node(NODE, CORDONED, True)
    result = result_of(report)
    assert (result["changed"], result["unschedulable"], result["state"]) == (True, True, "cordoned")
    assert result["diff"]["before"] == {"node": "n1", "unschedulable": False, "pods": []}


def test_extra_keys_and_the_machine_summary() -> None:
    machine = {"apiVersion": "machine.openshift.io/v1beta1", "metadata": {"name": "m1", "namespace": "ns", "deletionTimestamp": "x"}}
    report = DrainReport(DrainRequest(machine="m1", namespace="ns"), STARTED)
    result = result_of(report, machine=machine_summary(machine, flavour_for(machine)), skipped_reason="why")
    assert result["skipped_reason"] == "why"
    assert result["machine"] == {"name": "m1", "namespace": "ns", "api_version": "machine.openshift.io/v1beta1", "flavour": "openshift", "deleting": True}


def test_request_from_module_params() -> None:
    params = {
        "node": None,
        "machine": "m1",
        "namespace": "ns",
        "api_version": None,
        "state": "drained",
        "rules": None,
        "use_cluster_rules": True,
        "wait": True,
        "wait_timeout": 600,
        "wait_sleep": 2,
        "grace_period": None,
        "disable_eviction": False,
    }
    request = DrainRequest.from_params(params, check_mode=True)
    assert request == DrainRequest(machine="m1", namespace="ns", check_mode=True)
    assert request.rules == [] and not request.waits


def test_go_quote() -> None:
    assert go_quote("worker-1") == '"worker-1"'
    assert go_quote('a"b') == '"a\\"b"'


# ---------------------------------------------------------------------------
# Tracking Pods across passes


def test_ledger_keeps_every_pod_seen_with_its_latest_state() -> None:
    ledger = PodLedger()
    ledger.record(pass_of([decision("web"), decision("api"), decision("agent", SKIP)], EvictionOutcome(evicted=["ns/web"], failures={PDB: ["ns/api"]})))
    ledger.record(pass_of([decision("api"), decision("agent", SKIP), decision("web", terminating=True)], EvictionOutcome(evicted=["ns/api"])))
    ledger.record(pass_of([decision("agent", SKIP)]))
    pods = {p["name"]: p for p in ledger.pods()}
    assert [p["name"] for p in ledger.pods()] == ["agent", "api", "web"]
    assert (pods["web"]["present"], pods["web"]["terminating"], pods["web"]["eviction_error"]) == (False, True, None)
    assert (pods["api"]["present"], pods["api"]["eviction_error"]) == (False, None)
    assert pods["agent"]["present"] is True
    assert ledger.evicted == ["ns/web", "ns/api"]
    assert [(b["order"], b["pods"]) for b in ledger.batches()] == [(0, ["ns/api", "ns/web"])]


def test_ledger_keeps_the_last_refusal() -> None:
    ledger = PodLedger()
    ledger.record(pass_of([decision("api")], EvictionOutcome(failures={PDB: ["ns/api"]})))
    assert ledger.pods()[0]["eviction_error"] == PDB
    assert ledger.evicted == []


def test_check_mode_passes_count_no_evictions() -> None:
    ledger = PodLedger()
    ledger.record(pass_of([decision("web")], EvictionOutcome(evicted=["ns/web"])), count_evictions=False)
    assert ledger.evicted == []
