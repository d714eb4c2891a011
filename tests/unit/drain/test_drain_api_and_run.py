"""Unit tests for the pure parts of the drain's API side and of the machine_drain run:
how a refused eviction is reported, what a pass waits for, how long to wait,
how rules are merged and how Pods are tracked across passes."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import (
    DrainPass,
    EvictionOutcome,
    _failure,
    evict_pods,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import TERMINATING_NAMESPACE_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pacing import pause_limit, pause_until
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import PodWait
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.report import PodLedger, go_quote
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, SKIP, WAIT_COMPLETED, DrainRuleError, merge_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Hook, hooks_text

PDB = "Cannot evict pod as it would violate the pod's disruption budget."


def decision(name: str, behavior: str = DRAIN, order: int = 0, terminating: bool = False) -> PodDecision:
    return PodDecision(namespace="ns", name=name, behavior=behavior, order=order, terminating=terminating)


def a_pass(decisions: list[PodDecision], outcome: EvictionOutcome | None = None, unreachable: bool = False, message: str = "x") -> DrainPass:
    return DrainPass(
        node={"metadata": {"name": "n"}},
        decisions=decisions,
        plan=plan_drain(decisions),
        outcome=outcome or EvictionOutcome(),
        message=message,
        unreachable=unreachable,
    )


# ---------------------------------------------------------------------------
# Refused evictions


def test_pdb_refusal_keeps_the_causes() -> None:
    cause = {"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}
    body = {"message": PDB, "details": {"causes": [cause]}}
    assert _failure(ApiError(429, "Too Many Requests", body)) == (f"{PDB} The disruption budget web needs 2 healthy pods and has 2 currently", False)


def test_429_without_details_is_the_message_alone() -> None:
    assert _failure(ApiError(429, "Too Many Requests", {"message": PDB})) == (PDB, False)


def test_404_means_gone() -> None:
    assert _failure(ApiError(404, "Not Found", {"message": 'pods "a" not found'})) == (None, True)


def test_uid_precondition_conflict_means_the_classified_pod_is_gone() -> None:
    body = {"message": "Precondition failed: UID in precondition: 1, UID in object meta: 2"}
    assert _failure(ApiError(409, "Conflict", body)) == (None, True)


def test_other_conflicts_are_failures() -> None:
    assert _failure(ApiError(409, "Conflict", {"message": "the object has been modified"})) == ("the object has been modified", False)


def test_terminating_namespace_gets_the_upstream_text() -> None:
    message = "unable to create new content in namespace ns because it is being terminated"
    body = {"message": message, "details": {"causes": [{"reason": "NamespaceTerminating"}]}}
    assert _failure(ApiError(403, "Forbidden", body)) == (TERMINATING_NAMESPACE_MESSAGE, False)


def test_forbidden_for_other_reasons_keeps_the_server_message() -> None:
    assert _failure(ApiError(403, "Forbidden", {"message": "denied"})) == ("denied", False)


class _LostAnswer:
    """A transport whose every eviction took effect on the server, its answer lost:
    the transport asks ``verify`` what the Pod shows, as the real one does."""

    def __init__(self, pod_now: dict | None) -> None:
        self.pod_now = pod_now
        self.verified = 0

    def create(self, path, body, *, verify=None, **_options):
        self.verified += 1
        landed = verify()
        assert landed is not None, "the eviction landed: the transport must not send it again"
        return landed

    def get(self, path):
        return self.pod_now


POD = {"metadata": {"namespace": "ns", "name": "web-1", "uid": "u-1"}, "spec": {}, "status": {}}


@pytest.mark.parametrize(
    "pod_now",
    [
        None,  # deleted at once (no grace period left)
        {"metadata": {"namespace": "ns", "name": "web-1", "uid": "u-1", "deletionTimestamp": "2026-11-25T00:00:00Z"}},
        {"metadata": {"namespace": "ns", "name": "web-1", "uid": "u-2"}},  # a new Pod took the name
    ],
    ids=["gone", "terminating", "replaced"],
)
def test_an_eviction_whose_answer_was_lost_but_that_took_effect_is_reported_as_evicted(pod_now) -> None:
    api = _LostAnswer(pod_now)
    outcome = evict_pods(api, [POD], grace_period=None)
    assert api.verified == 1
    assert (outcome.evicted, outcome.gone, outcome.failures) == (["ns/web-1"], [], {})


# ---------------------------------------------------------------------------
# What a pass waits for


def test_a_pass_waits_for_the_current_batch_only() -> None:
    decisions = [
        decision("gone-soon", terminating=True),
        decision("later-terminating", order=5, terminating=True),
        decision("job", WAIT_COMPLETED),
        decision("web"),
        decision("db", order=5),
        decision("agent", SKIP),
    ]
    drain = a_pass(decisions, EvictionOutcome(evicted=["ns/web"]))
    assert drain.waiting_for() == {"ns/gone-soon", "ns/job", "ns/web"}


def test_refused_pods_are_not_waited_for() -> None:
    drain = a_pass([decision("web"), decision("api")], EvictionOutcome(evicted=["ns/web"], failures={PDB: ["ns/api"]}))
    assert drain.waiting_for() == {"ns/web"}
    assert drain.needs_retry is True


def test_unreachable_node_needs_retry() -> None:
    assert a_pass([decision("web", terminating=True)], unreachable=True).needs_retry is True
    assert a_pass([decision("web", terminating=True)]).needs_retry is False


def test_completion() -> None:
    assert DrainPass(node=None).completed is True
    assert a_pass([decision("agent", SKIP)], message="").completed is True
    assert a_pass([decision("web", terminating=True)], message="Drain not completed yet").completed is False


@pytest.mark.parametrize(
    ("outcome", "unreachable", "decisions", "expected"),
    [
        (EvictionOutcome(failures={PDB: ["ns/web"]}), False, [decision("web")], 2),  # retry after wait_sleep
        (EvictionOutcome(), True, [decision("web", terminating=True)], 2),  # unreachable: poll
        (EvictionOutcome(evicted=["ns/web"]), False, [decision("web")], 30),  # the watch reports; resync bound
        (EvictionOutcome(gone=["ns/web"]), False, [decision("web"), decision("db", order=5)], 0),  # next batch now
    ],
)
def test_pause_limit(outcome, unreachable, decisions, expected) -> None:
    drain = a_pass(decisions, outcome, unreachable)
    assert pause_limit(drain, wait_sleep=2, resync=30) == expected


def test_a_pause_ends_by_the_deadline_and_never_before_now() -> None:
    drain = a_pass([decision("web")], EvictionOutcome(evicted=["ns/web"]))
    # Instants of one clock (the transport's): the pause ends at the first of its limit, the deadline and ``until``.
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1004.5) == 1004.5
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1100.0) == 1030.0
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1100.0, until=1004.5) == 1004.5
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=999.0) == 1000.0
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1100.0, until=997.0) == 1000.0


def test_wait_sleep_longer_than_resync_wins() -> None:
    drain = a_pass([decision("web")], EvictionOutcome(evicted=["ns/web"]))
    assert pause_limit(drain, wait_sleep=60, resync=30) == 60


# ---------------------------------------------------------------------------
# The watch between passes


def event(kind: str, name: str, rv: str = "7") -> dict:
    return {"type": kind, "object": {"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv}}}


def test_watch_stops_when_every_pod_waited_for_is_gone() -> None:
    wait = PodWait({"ns/a", "ns/b"})
    assert wait.see(event("MODIFIED", "a", "2")) is None
    assert wait.see(event("DELETED", "a", "3")) is None
    assert wait.see(event("DELETED", "other", "4")) is None
    assert wait.see(event("DELETED", "b", "5")) == "gone"


def test_watch_stops_when_a_pod_is_added() -> None:
    assert PodWait({"ns/a"}).see(event("ADDED", "new")) == "added"


def test_watch_without_pods_to_wait_for_only_stops_on_additions() -> None:
    wait = PodWait(set())
    assert wait.see(event("DELETED", "a")) is None
    assert wait.see(event("MODIFIED", "a", "9")) is None
    assert wait.see(event("ADDED", "b", "10")) == "added"


# ---------------------------------------------------------------------------
# Rules, hooks, quoting


def served(name: str, namespace: str, behavior: str = SKIP) -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"drain": {"behavior": behavior}}}


def test_inline_rules_add_to_cluster_rules_and_replace_same_names() -> None:
    inline = [{"name": "b-rule", "drain": {"behavior": "Drain", "order": 7}}, {"name": "a-rule", "drain": {"behavior": "WaitCompleted"}}]
    rules = merge_rules(inline, [served("b-rule", "ns"), served("c-rule", "ns"), served("elsewhere", "other")], "ns")
    assert [(r["name"], r["drain"]["behavior"], r["drain"]["order"]) for r in rules] == [
        ("a-rule", "WaitCompleted", None),
        ("b-rule", "Drain", 7),
        ("c-rule", "Skip", None),
    ]


def test_merge_rules_names_an_invalid_cluster_rule() -> None:
    broken = served("broken", "ns")
    broken["spec"]["pods"] = [{"selector": {"matchExpressions": [{"key": "a", "operator": "Maybe"}]}}]
    with pytest.raises(DrainRuleError, match=r"^Invalid MachineDrainRule ns/broken: spec.pods\[0\].selector: "):
        merge_rules([], [broken], "ns")


def test_merge_rules_names_an_invalid_inline_rule() -> None:
    with pytest.raises(DrainRuleError, match=r"^Invalid MachineDrainRule bad: "):
        merge_rules([{"name": "bad", "drain": {"behavior": "Skip", "order": 1}}], [], None)


def test_hooks_text() -> None:
    hooks = [Hook("preDrain", "quorum", "etcd"), Hook("preDrain", "backup", "velero")]
    assert hooks_text(hooks) == "quorum (owner etcd), backup (owner velero)"


def test_go_quote() -> None:
    assert go_quote("worker-1") == '"worker-1"'
    assert go_quote('a"b') == '"a\\"b"'


# ---------------------------------------------------------------------------
# Tracking Pods across passes


def test_ledger_keeps_every_pod_seen_with_its_latest_state() -> None:
    ledger = PodLedger()
    ledger.record(a_pass([decision("web"), decision("api"), decision("agent", SKIP)], EvictionOutcome(evicted=["ns/web"], failures={PDB: ["ns/api"]})))
    ledger.record(a_pass([decision("api"), decision("agent", SKIP), decision("web", terminating=True)], EvictionOutcome(evicted=["ns/api"])))
    ledger.record(a_pass([decision("agent", SKIP)]))
    pods = {p["name"]: p for p in ledger.pods()}
    assert [p["name"] for p in ledger.pods()] == ["agent", "api", "web"]
    assert (pods["web"]["present"], pods["web"]["terminating"], pods["web"]["eviction_error"]) == (False, True, None)
    assert (pods["api"]["present"], pods["api"]["eviction_error"]) == (False, None)
    assert pods["agent"]["present"] is True
    assert ledger.evicted == ["ns/web", "ns/api"]
    assert [(b["order"], b["pods"]) for b in ledger.batches()] == [(0, ["ns/api", "ns/web"])]


def test_ledger_keeps_the_last_refusal() -> None:
    ledger = PodLedger()
    ledger.record(a_pass([decision("api")], EvictionOutcome(failures={PDB: ["ns/api"]})))
    assert ledger.pods()[0]["eviction_error"] == PDB
    assert ledger.evicted == []


def test_check_mode_passes_count_no_evictions() -> None:
    ledger = PodLedger()
    ledger.record(a_pass([decision("web")], EvictionOutcome(evicted=["ns/web"])), count_evictions=False)
    assert ledger.evicted == []
