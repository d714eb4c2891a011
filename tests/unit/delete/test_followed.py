"""The budget refusals a followed controller reports, judged as the collection's own drain judges them (pure)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.followed import judge_reported_budgets
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stall_policy import never_message
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    CLEARS,
    KIND_CONTROLLER,
    NEVER,
    PHASE_CONTROLLER,
    REPORTED_BUDGET_REASON,
    Blocker,
    budget_refused_pods,
    reported_pod_blockers,
)

REPORT = "cannot evict pod as it would violate the pod's disruption budget. The disruption budget db does not allow evicting pods currently"
WHO = "controller capi-manager"


def pod(name: str, app: str, namespace: str = "apps") -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"app": app}, "creationTimestamp": "2026-01-01T00:00:00Z"}}


def budget(name: str, spec: dict, status: dict, namespace: str = "apps") -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status}


def reported(*pods: str) -> list[Blocker]:
    following = Blocker(PHASE_CONTROLLER, KIND_CONTROLLER, WHO, CLEARS, "it carries out the deletion")
    return [following, *reported_pod_blockers([f"* Pods {', '.join(pods)}: {REPORT}"], WHO)]


def test_only_the_budget_refusals_a_controller_reports_are_read() -> None:
    found = reported("apps/db-0", "apps/db-0", "apps/web-0")
    assert budget_refused_pods(found) == ["apps/db-0", "apps/web-0"]
    assert budget_refused_pods(found[:1]) == []


def test_a_max_unavailable_zero_budget_can_never_clear_with_the_drains_evidence() -> None:
    db = budget("db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}, {"desiredHealthy": 1, "currentHealthy": 1, "expectedPods": 1})
    following, refusal = judge_reported_budgets(reported("apps/db-0"), {"apps/db-0": pod("db-0", "db")}, [db])
    assert following.kind == KIND_CONTROLLER
    assert (refusal.kind, refusal.object, refusal.verdict) == ("budget refusal", "Pod apps/db-0", NEVER)
    assert refusal.reason == "budget apps/db: its maxUnavailable is 0: it allows no eviction at all"
    assert refusal.evidence == {
        "reported_by": WHO,
        "report": REPORT,
        "pod": "apps/db-0",
        "budget": "apps/db",
        "needed_healthy": 1,
        "healthy": 1,
        "expected_pods": 1,
        "disruptions_allowed": None,
        "max_unavailable": 0,
    }


def test_the_other_never_rules_and_a_budget_that_can_allow_again() -> None:
    selector = {"matchLabels": {"app": "web"}}
    full = {"desiredHealthy": 3, "currentHealthy": 3, "expectedPods": 3, "disruptionsAllowed": 0}
    waiting = {"desiredHealthy": 2, "currentHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 0}
    pods = {"apps/web-0": pod("web-0", "web")}
    cases = [
        (budget("web", {"minAvailable": "100%", "selector": selector}, waiting), NEVER, "its minAvailable is 100%"),
        (budget("web", {"minAvailable": 3, "selector": selector}, full), NEVER, "it needs all 3 of its Pods healthy and all are"),
        (budget("web", {"minAvailable": 2, "selector": selector}, waiting), CLEARS, "allows another eviction once enough of its Pods are healthy again"),
    ]
    for found, verdict, words in cases:
        [_following, refusal] = judge_reported_budgets(reported("apps/web-0"), pods, [found])
        assert refusal.verdict == verdict and words in refusal.reason, refusal


def test_a_budget_still_counting_the_pod_as_evicted_clears_by_itself() -> None:
    status = {"desiredHealthy": 2, "currentHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 0, "disruptedPods": {"web-0": "2026-01-02T00:00:00Z"}}
    found = budget("web", {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}, status)
    [_following, refusal] = judge_reported_budgets(reported("apps/web-0"), {"apps/web-0": pod("web-0", "web")}, [found])
    assert refusal.verdict == CLEARS and refusal.evidence["unfinished_evictions"] == {"web-0": "2026-01-02T00:00:00Z"}


def test_two_budgets_give_a_blocker_each_and_other_namespaces_budgets_do_not_count() -> None:
    selector = {"matchLabels": {"app": "db"}}
    never = budget("a", {"maxUnavailable": "0%", "selector": selector}, {})
    other = budget("b", {"maxUnavailable": 0, "selector": selector}, {}, namespace="elsewhere")
    can = budget("c", {"maxUnavailable": 1, "selector": selector}, {"desiredHealthy": 0, "currentHealthy": 0, "expectedPods": 1})
    found = judge_reported_budgets(reported("apps/db-0"), {"apps/db-0": pod("db-0", "db")}, [never, other, can])
    assert [(b.verdict, b.evidence.get("budget")) for b in found[1:]] == [(NEVER, "apps/a"), (CLEARS, "apps/c")]


def test_a_budget_that_could_not_be_read_keeps_clears_by_itself_and_says_so() -> None:
    [_following, refusal] = judge_reported_budgets(reported("apps/db-0"), {}, None, "workload cluster apps/real: connection refused")
    assert refusal.verdict == CLEARS
    assert refusal.reason == f"{REPORTED_BUDGET_REASON}; its budget could not be read: workload cluster apps/real: connection refused"
    assert refusal.evidence["budget_unread"] == "workload cluster apps/real: connection refused"


def test_a_pod_gone_or_selected_by_no_budget_keeps_clears_by_itself() -> None:
    found = judge_reported_budgets(reported("apps/db-0", "apps/web-0"), {"apps/db-0": None, "apps/web-0": pod("web-0", "web")}, [])
    assert [(b.verdict, b.evidence.get("pod_gone"), b.evidence.get("budgets")) for b in found[1:]] == [(CLEARS, True, None), (CLEARS, None, [])]


def test_on_stall_fail_names_what_can_never_clear() -> None:
    db = budget("db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}, {})
    found = judge_reported_budgets(reported("apps/db-0"), {"apps/db-0": pod("db-0", "db")}, [db])
    message = never_message(found, "its controller (capi-manager)")
    assert message is not None and message.startswith("Stopped following the deletion: its controller (capi-manager) cannot finish its drain")
    assert "Pod apps/db-0: budget apps/db: its maxUnavailable is 0" in message and "the Machine stays with its controller" in message
    assert never_message(found[:1], "its controller") is None
