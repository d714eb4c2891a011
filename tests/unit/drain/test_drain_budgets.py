"""Unit tests for how a drain groups Pods by PodDisruptionBudget and what a
dry run predicts a budget allows (``_drain/budgets.py``, pure)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import budget_groups, dry_run_allowance

PDB = "Cannot evict pod as it would violate the pod's disruption budget."


def pod(name: str, ns: str = "ns", ready: bool = True, **labels: str) -> dict:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": {"namespace": ns, "name": name, "labels": labels}, "status": {"conditions": conditions}}


def budget(name: str, selector: dict | None, ns: str = "ns") -> dict:
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"selector": selector}}


def names(groups: list[list[dict]]) -> list[list[str]]:
    return [[p["metadata"]["name"] for p in group] for group in groups]


def test_pods_under_one_budget_form_one_group_unready_first() -> None:
    pods = [pod("web-b", app="web"), pod("web-a", app="web"), pod("web-c", ready=False, app="web"), pod("db-0", app="db"), pod("lone-0")]
    groups = budget_groups(pods, [budget("web", {"matchLabels": {"app": "web"}}), budget("db", {"matchLabels": {"app": "db"}})])
    assert names(groups) == [["lone-0"], ["db-0"], ["web-c", "web-a", "web-b"]]


def test_pods_without_a_budget_are_each_their_own_group() -> None:
    assert names(budget_groups([pod("a"), pod("b")], [])) == [["a"], ["b"]]


def test_budget_selectors_follow_policy_v1() -> None:
    pods = [pod("a", app="x"), pod("b", app="y"), pod("c", ns="other", app="x")]
    # An empty selector covers its whole namespace; a null one covers nothing; other namespaces never.
    assert names(budget_groups(pods, [budget("all", {})])) == [["c"], ["a", "b"]]
    assert names(budget_groups(pods, [budget("none", None)])) == [["a"], ["b"], ["c"]]


def test_an_invalid_budget_selector_covers_nothing() -> None:
    broken = budget("broken", {"matchExpressions": [{"key": "app", "operator": "Maybe"}]})
    assert names(budget_groups([pod("a", app="x")], [broken])) == [["a"]]


def test_dry_run_allowance_is_the_budgets_and_its_refusal_the_servers_text() -> None:
    web = budget("web", {"matchLabels": {"app": "web"}})
    web["status"] = {"disruptionsAllowed": 1, "desiredHealthy": 2, "currentHealthy": 3}
    allowed, refusal = dry_run_allowance([pod("web-0", app="web"), pod("web-1", app="web")], [web])
    assert allowed == 1
    # Once the one allowed Pod is evicted, the budget has 2 healthy Pods left.
    assert refusal == f"{PDB} The disruption budget web needs 2 healthy pods and has 2 currently"


def test_dry_run_allowance_unknown_without_exactly_one_observed_budget() -> None:
    web = budget("web", {"matchLabels": {"app": "web"}})
    assert dry_run_allowance([pod("web-0", app="web")], [web]) is None, "no status yet: the server decides"
    web["status"] = {"disruptionsAllowed": 1}
    # Two budgets over one Pod: the server refuses the eviction itself.
    assert dry_run_allowance([pod("web-0", app="web")], [web, budget("all", {})]) is None
    assert dry_run_allowance([pod("lone-0")], [web]) is None
