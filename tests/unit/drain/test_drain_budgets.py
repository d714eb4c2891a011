"""Unit tests for how a drain groups Pods by PodDisruptionBudget and what a
dry run predicts a budget allows (``_drain/budgets.py``, pure)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.budgets import (
    CHARGED,
    LET_GO,
    REFUSED,
    BudgetChain,
    budget_groups,
    charges,
    dry_run_allowance,
    eviction_answer,
    running_unready,
)

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


# -- the eviction API's own rules: unhealthyPodEvictionPolicy --------------------------------------------


def running(name: str, ready: bool, phase: str = "Running", deleting: bool = False) -> dict:
    p = pod(name, ready=ready, app="web")
    p["status"]["phase"] = phase
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-11-27T08:00:00Z"
    return p


def counted(policy: str | None = None, *, healthy: int, needed: int, expected: int, allowed: int) -> dict:
    spec: dict = {"selector": {"matchLabels": {"app": "web"}}}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    status = {"currentHealthy": healthy, "desiredHealthy": needed, "expectedPods": expected, "disruptionsAllowed": allowed}
    return {"metadata": {"namespace": "ns", "name": "web"}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("policy", "healthy", "needed", "wanted"),
    [
        # AlwaysAllow: an unready Pod goes whatever the budget allows.
        ("AlwaysAllow", 1, 3, LET_GO),
        # IfHealthyBudget (also when unset): only while the budget has the healthy Pods it needs.
        ("IfHealthyBudget", 2, 2, LET_GO),
        (None, 2, 2, LET_GO),
        ("IfHealthyBudget", 1, 2, REFUSED),
        (None, 2, 3, REFUSED),
    ],
)
def test_an_unready_pod_meets_the_budgets_unhealthy_pod_eviction_policy(policy, healthy, needed, wanted) -> None:
    budget_now = counted(policy, healthy=healthy, needed=needed, expected=3, allowed=max(0, healthy - needed))
    answer, why = eviction_answer(running("web-0", ready=False), budget_now)
    assert answer == wanted, why
    assert charges(running("web-0", ready=False), budget_now) == (answer != LET_GO)
    assert ("AlwaysAllow" in why) == (policy == "AlwaysAllow")


def test_a_pod_the_eviction_api_does_not_ask_the_budget_about_is_let_go() -> None:
    exhausted = counted(healthy=2, needed=2, expected=2, allowed=0)
    for p in (running("a", True, phase="Pending"), running("b", True, phase="Succeeded"), running("c", True, deleting=True)):
        assert eviction_answer(p, exhausted)[0] == LET_GO and not charges(p, exhausted)
    assert eviction_answer(running("d", True), exhausted)[0] == REFUSED
    assert eviction_answer(running("e", True), counted(healthy=3, needed=2, expected=3, allowed=1))[0] == CHARGED


def test_a_zero_desired_healthy_budget_charges_an_unready_pod() -> None:
    """IfHealthyBudget lets an unready Pod go without charge only while desiredHealthy is above 0."""
    assert charges(running("a", False), counted(healthy=0, needed=0, expected=1, allowed=0))
    assert not running_unready(running("b", False, phase="Pending")) and running_unready(running("c", False))


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
            refusal, _cause = chain.answered(p, failure, status)
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


def test_a_chain_refilled_with_its_budget_read_again_goes_on_to_the_new_allowance() -> None:
    # What feed.PassChains does when the budget has room again while another chain of the pass still sends.
    group = [pod(f"web-{i}", app="web") for i in range(5)]
    chain = BudgetChain(group, [web_budget(1)], predict=True)
    assert chain.refused(group[0]) is None
    chain.answered(group[0], None, 200)
    assert chain.refused(group[1]) is not None
    chain.refill(web_budget(2))
    asked, refused = run_chain(chain, group[1:])
    assert asked == ["web-1", "web-2"] and set(refused) == {"web-3", "web-4"}


def test_a_budget_that_allows_nothing_is_not_asked_but_a_pod_it_lets_go_still_is() -> None:
    group = budget_groups([pod("web-0", app="web"), pod("web-1", ready=False, app="web")], [web_budget(0)])[0]
    asked, refused = run_chain(BudgetChain(group, [web_budget(0)], predict=True), group)
    # web-1 is not Ready and the budget has the healthy Pods it needs: the API lets it go without using up the budget.
    assert (asked, list(refused)) == (["web-1"], ["web-0"])


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
