"""Escalations the user asks for, against the real API server (docs/stalls.md): after its
deadline a Pod a budget holds is deleted instead of evicted, only the Pods chosen, with a
Warning Event on the Machine naming who asked; before it, and in check mode, nothing is."""

from __future__ import annotations

from test_machine_drain import CAPI_ONLY, create_pdb, delete_machine, evictions, get_pod, machine_path, make_pods, order_rule
from test_stalls import budget

EXTENDED_FLAVOURS = ("v1beta1",)  # variants make test leaves out (conftest.py: pytest_collection_modifyitems)

REASON = "CHG-1234: the db primary's budget is fixed at zero; approved by the storage team"


def pod_deletions(audit_events, namespace: str) -> list[str]:
    """The Pods the collection deleted (a plain DELETE, not an eviction; not a dry run)."""
    found = audit_events(namespace=namespace, resource="pods", verb="delete")
    ours = [e for e in found if (e.get("userAgent") or "").startswith("lifecycle.machine") and "dryRun=All" not in e.get("requestURI", "")]
    return sorted(e["objectRef"]["name"] for e in ours if not e["objectRef"].get("subresource"))


@CAPI_ONLY
def test_after_its_deadline_a_held_pod_is_deleted_on_the_record_and_only_the_chosen_ones(
    *, flavour, kube, namespace, machine_node, run_module, audit_events
) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"db-0": {"labels": {"app": "db"}}, "cache-0": {"labels": {"app": "cache"}}})
    budget(kube, namespace, "all", {"maxUnavailable": 0, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}})
    delete_machine(kube, flavour, namespace, machine)
    escalations = [{"after": "2s", "reason": REASON, "namespaces": [namespace], "pod_selector": {"matchLabels": {"app": "db"}}}]
    params = {"machine": machine, "namespace": namespace, "escalations": escalations, "wait_timeout": 20, "wait_sleep": 1}

    preview = run_module("machine_drain", {**params, "escalations": [{**escalations[0], "after": 0}]}, check=True)
    assert not preview.get("failed"), preview.get("msg")
    assert [(e["pod"], e["dry_run"]) for e in preview["escalations"]] == [(f"{namespace}/db-0", True)]
    assert pod_deletions(audit_events, namespace) == [] and not get_pod(kube, namespace, "db-0")["metadata"].get("deletionTimestamp")

    result = run_module("machine_drain", params)

    # db-0 went, deleted (not evicted) after the deadline; cache-0, not chosen, is still held by its budget.
    assert result.get("failed") and result.get("timed_out"), result
    assert [(e["pod"], e["dry_run"], e["reason"], e["after_seconds"]) for e in result["escalations"]] == [(f"{namespace}/db-0", False, REASON, 2)]
    assert pod_deletions(audit_events, namespace) == ["db-0"]
    assert get_pod(kube, namespace, "db-0") is None or get_pod(kube, namespace, "db-0")["metadata"].get("deletionTimestamp")
    cache = get_pod(kube, namespace, "cache-0")
    assert cache is not None and not cache["metadata"].get("deletionTimestamp")
    # Before the deadline both were asked through the budget (which refused), never deleted.
    assert all(code == 429 for codes in evictions(audit_events, namespace).values() for code in codes), evictions(audit_events, namespace)
    events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={machine}")
    [event] = [e for e in events if e["reason"] == "DrainEscalated"]
    assert event["type"] == "Warning" and f"Deleted Pod {namespace}/db-0 instead of evicting it" in event["message"] and REASON in event["message"]


def test_an_escalation_that_cannot_be_understood_is_refused_before_anything_is_touched(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"web-0": {"labels": {"app": "web"}}})
    create_pdb(kube, namespace, "web", selector={"app": "web"}, min_available=1, healthy=1)
    for bad, said in (
        ({"after": "soon", "reason": "x"}, "escalations[0].after must be a duration"),
        ({"after": "1m", "reason": " "}, "escalations[0].reason must say who asked for it"),
        ({"after": "1m", "reason": "x", "namespaces": ["Not_A_Namespace"]}, "can never name a Namespace"),
        ({"after": "1m", "reason": "x", "pod_selector": {"matchLabel": {"app": "web"}}}, "escalations[0].pod_selector"),
    ):
        result = run_module("machine_drain", {"node": node, "escalations": [bad]})
        assert result.get("failed") and said in result["msg"], (bad, result.get("msg"))
        assert not (kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")), "nothing was touched"
    result = run_module("machine_drain", {"node": node, "escalations": [{"after": "1m", "reason": "x", "podSelector": {}}]})
    assert result.get("failed") and "podSelector" in result["msg"], result.get("msg")


@CAPI_ONLY
def test_an_escalation_naming_a_drain_rule_deletes_only_the_pod_that_rule_decided(*, flavour, kube, namespace, machine_node, run_module, audit_events) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"db-0": {"labels": {"app": "db"}}, "cache-0": {"labels": {"app": "cache"}}})
    budget(kube, namespace, "all", {"maxUnavailable": 0, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}})
    delete_machine(kube, flavour, namespace, machine)
    # Both Pods are in the one batch (order 0); each decided by a rule of its own.
    rules = [order_rule("db-rule", 0, app="db"), order_rule("cache-rule", 0, app="cache")]
    escalations = [{"after": 0, "reason": REASON, "drain_rules": ["db-rule"]}]

    result = run_module(
        "machine_drain", {"machine": machine, "namespace": namespace, "rules": rules, "escalations": escalations, "wait_timeout": 8, "wait_sleep": 1}
    )

    assert result.get("failed") and result.get("timed_out"), result
    assert [(e["pod"], e["drain_rules"]) for e in result["escalations"]] == [(f"{namespace}/db-0", ["db-rule"])]
    assert pod_deletions(audit_events, namespace) == ["db-0"]
    assert not get_pod(kube, namespace, "cache-0")["metadata"].get("deletionTimestamp"), "the other rule's Pod is only asked, never deleted"
    assert {e["reason"] for e in kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={machine}")} >= {"DrainEscalated"}


@CAPI_ONLY
def test_an_escalation_naming_a_rule_the_task_does_not_have_is_refused_before_anything_is_touched(
    *, flavour, kube, namespace, machine_node, run_module, audit_events
) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"db-0": {"labels": {"app": "db"}}})
    delete_machine(kube, flavour, namespace, machine)
    before = kube.get(machine_path(flavour, namespace, machine))
    rules = [order_rule("db-rule", 0, app="db")]
    escalations = [{"after": 0, "reason": REASON, "drain_rules": ["db-rul"]}]

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace, "rules": rules, "escalations": escalations})
    assert result.get("failed") and "drain_rules names db-rul" in result["msg"] and "the task's rules: db-rule" in result["msg"], result.get("msg")
    assert f"MachineDrainRules of namespace {namespace}" in result["msg"]
    deleted = run_module("machine_delete", {"machines": [{"name": machine, "namespace": namespace}], "rules": rules, "escalations": escalations})
    assert deleted.get("failed") and "drain_rules names db-rul" in deleted["msg"], deleted.get("msg")

    # Nothing touched: not cordoned, nothing evicted or deleted, the Machine as it was.
    assert not kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")
    assert evictions(audit_events, namespace) == {} and pod_deletions(audit_events, namespace) == []
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
