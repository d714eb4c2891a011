"""Unit tests for how a drain groups Pods by PodDisruptionBudget and what a
dry run predicts a budget allows (``_drain/budgets.py``, pure)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import BudgetChain, budget_groups, dry_run_allowance

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


def web_budget(allowed: int) -> dict:
    web = budget("web", {"matchLabels": {"app": "web"}})
    web["status"] = {"disruptionsAllowed": allowed, "desiredHealthy": 2, "currentHealthy": 2 + allowed}
    return web


def run_chain(chain: BudgetChain, group: list[dict], answers: dict[str, tuple[str | None, int]] | None = None) -> tuple[list[str], dict[str, str]]:
    """Walk a group as evict_pods does: (the Pods asked, in order; the refusals recorded), the server
    answering 200 unless ``answers`` says otherwise."""
    asked, refused = [], {}
    for p in group:
        name = p["metadata"]["name"]
        refusal = chain.refused(p)
        if refusal is None:
            asked.append(name)
            failure, status = (answers or {}).get(name, (None, 200))
            refusal = chain.answered(p, failure, status)
        if refusal is not None:
            refused[name] = refusal
    return asked, refused


def test_a_real_drain_with_the_budgets_read_stops_each_chain_at_the_allowance() -> None:
    # The server would go on accepting while the budget regains room, but the pass ends at what it allows
    # now: a long chain held every other group's retry to its end (issue 39).
    group = [pod(f"web-{i}", app="web") for i in range(5)]
    asked, refused = run_chain(BudgetChain(group, [web_budget(2)], predict=True), group)
    assert asked == ["web-0", "web-1"]
    assert set(refused) == {"web-2", "web-3", "web-4"}
    assert refused["web-2"].startswith(PDB), "refused with the server's text, so the budget watch wakes the retry"


def test_a_budget_that_allows_nothing_is_not_asked_but_pods_not_ready_still_are() -> None:
    group = budget_groups([pod("web-0", app="web"), pod("web-1", ready=False, app="web")], [web_budget(0)])[0]
    asked, refused = run_chain(BudgetChain(group, [web_budget(0)], predict=True), group)
    assert (asked, list(refused)) == (["web-1"], ["web-0"]), "the API evicts a Pod that is not Ready whatever the budget allows"


def test_without_prediction_the_server_decides_until_its_first_refusal() -> None:
    group = [pod(f"web-{i}", app="web") for i in range(4)]
    refusal = f"{PDB} The disruption budget web needs 2 healthy pods and has 2 currently"
    asked, refused = run_chain(BudgetChain(group, [web_budget(1)]), group, {"web-2": (refusal, 429)})
    assert asked == ["web-0", "web-1", "web-2"], "no prediction: asked past the allowance, as the server still accepts"
    assert refused == {"web-2": refusal, "web-3": refusal}


def test_a_chain_without_exactly_one_observed_budget_is_not_predicted() -> None:
    group = [pod(f"web-{i}", app="web") for i in range(3)]
    asked, refused = run_chain(BudgetChain(group, [budget("web", {"matchLabels": {"app": "web"}})], predict=True), group)
    assert (asked, refused) == (["web-0", "web-1", "web-2"], {}), "no status: the server decides"


def test_a_dry_run_asks_every_pod_and_refuses_those_past_the_allowance() -> None:
    group = [pod(f"web-{i}", app="web") for i in range(3)]
    asked, refused = run_chain(BudgetChain(group, [web_budget(1)], dry_run=True), group)
    assert asked == ["web-0", "web-1"], "the second dry run is turned into the refusal, and the chain stops there"
    assert set(refused) == {"web-1", "web-2"}
