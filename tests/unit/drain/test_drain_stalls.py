"""What holds a drain after a pass, and the verdicts (pure)."""

from __future__ import annotations

import datetime as dt

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import TERMINATING_NAMESPACE_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE, PodDecision, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass, EvictionOutcome
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, WAIT_COMPLETED
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stalls import drain_blockers, never_allows
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import CLEARS, NEEDS_ACTION, NEVER

NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
NS = "shop"


def pod(name: str, app: str = "web", *, deleting_at: dt.datetime | None = None, finalizers: tuple[str, ...] = ()) -> dict:
    meta: dict = {"name": name, "namespace": NS, "labels": {"app": app}, "uid": f"u-{name}"}
    if deleting_at is not None:
        meta["deletionTimestamp"] = deleting_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"metadata": meta, "spec": {"nodeName": "n1"}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def budget(name: str, app: str, *, spec: dict, expected: int, healthy: int, needed: int, allowed: int) -> dict:
    status = {"expectedPods": expected, "currentHealthy": healthy, "desiredHealthy": needed, "disruptionsAllowed": allowed}
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"selector": {"matchLabels": {"app": app}}, **spec}, "status": status}


def drain_of(pods: list[dict], decisions: list[PodDecision], failures: dict | None = None, unreachable: bool = False) -> DrainPass:
    drain = DrainPass(node={"metadata": {"name": "n1"}}, pods=pods, decisions=decisions, unreachable=unreachable)
    drain.plan = plan_drain(decisions)
    drain.outcome = EvictionOutcome(failures=failures or {})
    drain.message = "Drain not completed yet"
    return drain


def refusal(name: str) -> str:
    return f"{PDB_MESSAGE} The disruption budget {name} needs 3 healthy pods and has 3 currently"


def test_a_budget_that_needs_every_pod_healthy_can_never_allow_an_eviction() -> None:
    db = budget("db", "db", spec={"minAvailable": 3}, expected=3, healthy=3, needed=3, allowed=0)
    drain = drain_of([pod("db-0", "db")], [PodDecision(NS, "db-0", DRAIN)], {refusal("db"): [f"{NS}/db-0"]})
    drain.budgets = [db]
    [blocker] = drain_blockers(drain, drain.budgets, NOW)
    assert (blocker.kind, blocker.verdict, blocker.object) == ("budget refusal", NEVER, f"Pod {NS}/db-0")
    assert blocker.evidence == {
        "pod": f"{NS}/db-0",
        "budget": f"{NS}/db",
        "needed_healthy": 3,
        "healthy": 3,
        "expected_pods": 3,
        "disruptions_allowed": 0,
        "min_available": 3,
    }
    assert "needs all 3 of its Pods healthy" in blocker.reason


def test_a_budget_short_of_healthy_pods_clears_by_itself() -> None:
    web = budget("web", "web", spec={"maxUnavailable": 1}, expected=3, healthy=2, needed=2, allowed=0)
    drain = drain_of([pod("web-0")], [PodDecision(NS, "web-0", DRAIN)], {refusal("web"): [f"{NS}/web-0"]})
    [blocker] = drain_blockers(drain, [web], NOW)
    assert blocker.verdict == CLEARS and blocker.evidence["budget"] == f"{NS}/web"


def test_budgets_that_allow_nothing_by_their_spec() -> None:
    assert "maxUnavailable is 0" in never_allows(budget("a", "a", spec={"maxUnavailable": 0}, expected=2, healthy=1, needed=2, allowed=0))
    assert "minAvailable is 100%" in never_allows(budget("a", "a", spec={"minAvailable": "100%"}, expected=2, healthy=1, needed=2, allowed=0))
    assert never_allows(budget("a", "a", spec={"minAvailable": 1}, expected=2, healthy=2, needed=1, allowed=1)) is None
    assert never_allows({"spec": {}, "status": {}}) is None, "a budget the disruption controller has not counted yet"


def test_a_pod_two_budgets_select_can_never_be_evicted() -> None:
    both = [budget("a", "web", spec={}, expected=1, healthy=1, needed=0, allowed=1), budget("b", "web", spec={}, expected=1, healthy=1, needed=0, allowed=1)]
    answer = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    drain = drain_of([pod("web-0")], [PodDecision(NS, "web-0", DRAIN)], {answer: [f"{NS}/web-0"]})
    [blocker] = drain_blockers(drain, both, NOW)
    assert (blocker.kind, blocker.verdict) == ("two budgets", NEVER)
    assert blocker.evidence["budgets"] == [f"{NS}/a", f"{NS}/b"]


def test_terminating_pods_within_and_past_their_grace() -> None:
    pods = [
        pod("a", deleting_at=NOW + dt.timedelta(seconds=20)),
        pod("b", deleting_at=NOW - dt.timedelta(seconds=90)),
        pod("c", deleting_at=NOW - dt.timedelta(seconds=90), finalizers=("example.com/backup",)),
    ]
    decisions = [PodDecision(NS, name, DRAIN, terminating=True) for name in ("a", "b", "c")]
    blockers = {b.object: b for b in drain_blockers(drain_of(pods, decisions), [], NOW)}
    assert (blockers[f"Pod {NS}/a"].kind, blockers[f"Pod {NS}/a"].evidence) == ("pod terminating", {"grace_left_seconds": 20})
    assert (blockers[f"Pod {NS}/b"].kind, blockers[f"Pod {NS}/b"].verdict) == ("pod terminating past its grace", CLEARS)
    held = blockers[f"Pod {NS}/c"]
    assert (held.kind, held.verdict, held.evidence["finalizers"]) == ("finalizer", NEEDS_ACTION, ["example.com/backup"])
    assert held.since == "2026-05-01T11:58:30Z"


def test_an_unreachable_node_clears_and_so_do_waits_and_terminating_namespaces() -> None:
    pods = [pod("a", deleting_at=NOW - dt.timedelta(seconds=5)), pod("job-0", "job"), pod("x", "x")]
    decisions = [PodDecision(NS, "a", DRAIN, terminating=True), PodDecision(NS, "job-0", WAIT_COMPLETED), PodDecision(NS, "x", DRAIN)]
    drain = drain_of(pods, decisions, {TERMINATING_NAMESPACE_MESSAGE: [f"{NS}/x"]}, unreachable=True)
    kinds = sorted((b.kind, b.verdict) for b in drain_blockers(drain, [], NOW))
    assert kinds == [("namespace terminating", CLEARS), ("unreachable node", CLEARS), ("wait-for-completion", CLEARS)]


def test_a_completed_drain_has_no_blockers() -> None:
    assert drain_blockers(DrainPass(node=None), [], NOW) == []


def test_a_budget_holding_an_eviction_that_never_deleted_its_pod_says_when_it_lets_go() -> None:
    """A run killed in the middle of an eviction: the budget granted it (status.disruptedPods)
    but the Pod was never deleted, so the budget refuses until the disruption controller gives up on it."""
    web = budget("web", "web", spec={"minAvailable": 1}, expected=2, healthy=1, needed=1, allowed=0)
    web["status"]["disruptedPods"] = {"web-1": "2026-05-01T11:59:30Z"}
    mine = pod("web-1")
    mine["metadata"]["creationTimestamp"] = "2026-05-01T11:00:00Z"
    drain = drain_of([mine], [PodDecision(NS, "web-1", DRAIN)], {refusal("web"): [f"{NS}/web-1"]})
    [blocker] = drain_blockers(drain, [web], NOW)
    assert (blocker.kind, blocker.verdict, blocker.since) == ("budget refusal", CLEARS, "2026-05-01T11:59:30Z")
    assert blocker.evidence["unfinished_evictions"] == {"web-1": "2026-05-01T11:59:30Z"}
    assert blocker.evidence["counted_again_at"] == "2026-05-01T12:01:30Z"
    assert blocker.reason == (
        f"budget {NS}/web still counts Pod {NS}/web-1 as being evicted: it granted an eviction that never deleted it"
        " (the request was cut, as when a run is killed in the middle of one); the disruption controller counts it again"
        " from 2026-05-01T12:01:30Z, and the drain retries then"
    )


def test_evictions_a_budget_counts_that_are_under_way_or_of_another_pod_are_not_unfinished() -> None:
    web = budget("web", "web", spec={"minAvailable": 1}, expected=3, healthy=1, needed=1, allowed=0)
    granted = "2026-05-01T11:59:30Z"
    web["status"]["disruptedPods"] = {"going": granted, "renewed": granted, "elsewhere": granted}
    going = pod("going", deleting_at=NOW + dt.timedelta(seconds=10))
    renewed = pod("renewed")  # a Pod created again under the name after the grant
    renewed["metadata"]["creationTimestamp"] = "2026-05-01T11:59:50Z"
    waiting = pod("web-2")
    drain = drain_of([going, renewed, waiting], [PodDecision(NS, "web-2", DRAIN)], {refusal("web"): [f"{NS}/web-2"]})
    [blocker] = drain_blockers(drain, [web], NOW)
    assert "unfinished_evictions" not in blocker.evidence
    assert blocker.reason == f"budget {NS}/web allows another eviction once enough of its Pods are healthy again"


def test_a_pod_on_an_unreachable_node_says_when_the_drain_lets_it_go() -> None:
    pods = [pod("a", deleting_at=NOW + dt.timedelta(seconds=30))]
    drain = drain_of(pods, [PodDecision(NS, "a", DRAIN, terminating=True)], unreachable=True)
    [blocker] = drain_blockers(drain, [], NOW)
    assert (blocker.kind, blocker.verdict, blocker.since) == ("unreachable node", CLEARS, None)
    assert blocker.evidence == {"grace_left_seconds": 30, "let_go_at": "2026-05-01T12:00:31Z"}, blocker.evidence
    assert "the drain lets it go at 2026-05-01T12:00:31Z, 1 s after its grace ends" in blocker.reason


# -- the eviction API's own rules: an unready Pod, typed causes -------------------------------------------


def unready(name: str, app: str = "web") -> dict:
    p = pod(name, app)
    p["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    return p


def test_an_unready_pod_if_healthy_budget_holds_is_reported_with_the_policy() -> None:
    """IfHealthyBudget: it goes once the budget has the healthy Pods it needs - never, when it needs every Pod (this one too)."""
    web = budget("web", "web", spec={"minAvailable": 2}, expected=3, healthy=1, needed=2, allowed=0)
    drain = drain_of([unready("web-0")], [PodDecision(NS, "web-0", DRAIN)], {refusal("web"): [f"{NS}/web-0"]})
    [blocker] = drain_blockers(drain, [web], NOW)
    assert blocker.verdict == CLEARS and "under unhealthyPodEvictionPolicy IfHealthyBudget it goes once the budget has" in blocker.reason
    assert blocker.evidence["unhealthy_pod_eviction_policy"] == "IfHealthyBudget" and blocker.evidence["pod_ready"] is False
    db = budget("db", "db", spec={"maxUnavailable": 0}, expected=3, healthy=2, needed=3, allowed=0)
    drain = drain_of([unready("db-0", "db")], [PodDecision(NS, "db-0", DRAIN)], {refusal("db"): [f"{NS}/db-0"]})
    [blocker] = drain_blockers(drain, [db], NOW)
    assert blocker.verdict == NEVER and "unhealthyPodEvictionPolicy: AlwaysAllow lets it go" in blocker.reason


def test_an_unready_pod_always_allow_lets_go_is_never_called_never() -> None:
    """A refusal under AlwaysAllow is a budget not counted yet ('still being processed'): it clears, whatever the spec."""
    db = budget("db", "db", spec={"maxUnavailable": 0, "unhealthyPodEvictionPolicy": "AlwaysAllow"}, expected=3, healthy=2, needed=3, allowed=0)
    answer = f"{PDB_MESSAGE} The disruption budget db is still being processed by the server."
    drain = drain_of([unready("db-0", "db")], [PodDecision(NS, "db-0", DRAIN)], {answer: [f"{NS}/db-0"]})
    [blocker] = drain_blockers(drain, [db], NOW)
    assert blocker.verdict == CLEARS and "AlwaysAllow" in blocker.reason


def test_the_typed_causes_are_read_before_the_words() -> None:
    web = budget("web", "web", spec={}, expected=3, healthy=3, needed=2, allowed=1)
    answer = 'poddisruptionbudgets.policy "web" is forbidden: something new'
    for cause, verdict in (("DisruptionBudgetTooManyDisruptedPods", CLEARS), ("DisruptionBudgetNegativeAllowedDisruptions", NEEDS_ACTION)):
        drain = drain_of([pod("web-0")], [PodDecision(NS, "web-0", DRAIN)], {answer: [f"{NS}/web-0"]})
        drain.outcome.causes[answer] = cause
        [blocker] = drain_blockers(drain, [web], NOW)
        assert (blocker.kind, blocker.verdict, blocker.evidence["cause"], blocker.evidence["budgets"]) == ("budget refusal", verdict, cause, [f"{NS}/web"])
    drain = drain_of([pod("web-0")], [PodDecision(NS, "web-0", DRAIN)], {answer: [f"{NS}/web-0"]})
    [blocker] = drain_blockers(drain, [web], NOW)
    assert blocker.kind == "eviction error"  # no cause, no budget's words: an error someone must look at
