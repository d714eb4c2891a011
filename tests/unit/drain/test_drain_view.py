"""The drain's view between passes: what wakes it (pure)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.view import ADDED, BUDGET, GONE, NODE, DrainView, budget_key, disruptions_allowed


def pod(name: str, namespace: str = "ns") -> dict:
    return {"metadata": {"name": name, "namespace": namespace}}


def budget(name: str, allowed: int, namespace: str = "ns") -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "status": {"disruptionsAllowed": allowed}}


def view(*names: str, budgets: tuple = ()) -> DrainView:
    return DrainView({"metadata": {"name": "n"}}, [pod(n) for n in names], list(budgets))


def test_wakes_when_the_last_pod_waited_for_is_gone() -> None:
    state = view("a", "b", "c")
    state.expect({"ns/a", "ns/b"}, set())
    assert state.pod_event("DELETED", pod("a")) is None
    assert state.pod_event("MODIFIED", pod("c")) is None
    assert state.pod_event("DELETED", pod("b")) == GONE


def test_pods_already_gone_wake_at_once() -> None:
    state = view("c")
    state.expect({"ns/a"}, set())
    assert state.reason == GONE


def test_an_unknown_pod_wakes_but_a_known_one_changing_does_not() -> None:
    state = view("a")
    state.expect({"ns/a"}, set())
    assert state.pod_event("MODIFIED", pod("a")) is None
    assert state.pod_event("ADDED", pod("new")) == ADDED


def test_a_refusing_budget_wakes_when_it_allows_again() -> None:
    state = view("a", budgets=(budget("web", 0), budget("other", 0)))
    state.expect({"ns/a"}, {"ns/web"})
    assert state.budget_event("MODIFIED", budget("other", 3)) is None, "not a budget that refused"
    assert state.budget_event("MODIFIED", budget("web", 0)) is None
    assert state.budget_event("MODIFIED", budget("web", 1)) == BUDGET


def test_a_deleted_budget_no_longer_holds() -> None:
    state = view("a", budgets=(budget("web", 0),))
    state.expect(set(), {"ns/web"})
    assert state.budget_event("DELETED", budget("web", 0)) == BUDGET
    assert budget_key(budget("web", 0)) not in state.budgets


def test_the_first_reason_stays_until_the_next_pause() -> None:
    state = view("a", budgets=(budget("web", 0),))
    state.expect({"ns/a"}, {"ns/web"})
    state.budget_event("MODIFIED", budget("web", 2))
    assert state.pod_event("DELETED", pod("a")) == BUDGET
    state.expect(set(), set())
    assert state.reason is None


def test_node_deleted_wakes() -> None:
    state = view("a")
    state.expect({"ns/a"}, set())
    assert state.node_event("DELETED", {}) == NODE
    assert state.snapshot()[0] is None


def test_a_fresh_list_replaces_the_pods_and_budgets() -> None:
    state = view("a", "b", budgets=(budget("web", 0),))
    state.expect({"ns/a"}, {"ns/web"})
    assert state.replace_pods([pod("b")]) == GONE
    assert sorted(state.pods) == ["ns/b"]
    state.expect(set(), {"ns/web"})
    assert state.replace_budgets([budget("web", 1)]) == BUDGET
    assert disruptions_allowed(state.budgets["ns/web"]) == 1


def test_a_change_while_the_pass_ran_wakes_at_once() -> None:
    state = view("a", "b", budgets=({**budget("web", 0), "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "4"}},))
    seen = state.budget_versions()
    # While the pass sent its evictions the budget allowed again, and a Pod was added.
    state.budget_event("MODIFIED", {**budget("web", 1), "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "9"}})
    state.expect({"ns/a"}, {"ns/web"}, seen_pods={"ns/a", "ns/b"}, seen_budgets=seen)
    assert state.reason == BUDGET
    state.pod_event("ADDED", pod("late"))
    state.expect({"ns/a"}, set(), seen_pods={"ns/a", "ns/b"})
    assert state.reason == ADDED


def test_an_allowance_the_pass_already_saw_does_not_wake() -> None:
    allowing = {**budget("web", 1), "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "5"}}
    state = view("a", budgets=(allowing,))
    state.expect({"ns/a"}, {"ns/web"}, seen_pods={"ns/a"}, seen_budgets=state.budget_versions())
    assert state.reason is None, "the pass was refused with this very status: only a newer one may wake it"


def versioned_budget(name: str, allowed: int, version: int) -> dict:
    found = budget(name, allowed)
    found["metadata"]["resourceVersion"] = str(version)
    return found


def ended(name: str, uid: str, version: int) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(version), "deletionTimestamp": "2026-12-07T00:00:00Z"}}


def test_a_budget_has_room_for_a_chain_only_in_a_version_that_counts_its_evictions() -> None:
    state = view("a", "b", budgets=(versioned_budget("web", 0, 10),))
    evicted = {"uid-a", "uid-b"}
    # A version older than the evicted Pods seen terminating may still show the room the chain used up.
    state.budget_event("MODIFIED", versioned_budget("web", 2, 12))
    assert state.room("ns/web", evicted, after=10) is None, "the evicted Pods are not seen terminating yet"
    state.pod_event("MODIFIED", ended("a", "uid-a", 13))
    state.pod_event("DELETED", ended("b", "uid-b", 14))
    assert state.room("ns/web", evicted, after=10) is None, "version 12 was written before the Pods went"
    state.budget_event("MODIFIED", versioned_budget("web", 0, 15))
    assert state.room("ns/web", evicted, after=10) is None, "no room"
    state.budget_event("MODIFIED", versioned_budget("web", 3, 16))
    assert disruptions_allowed(state.room("ns/web", evicted, after=10)) == 3
    assert state.room("ns/web", evicted, after=16) is None, "not newer than what the chain saw"
    assert state.room("ns/other", set(), after=1) is None, "no such budget"


def test_a_pod_seen_terminating_keeps_the_first_revision_it_was_seen_so() -> None:
    state = view("a", budgets=(versioned_budget("web", 1, 14),))
    state.pod_event("MODIFIED", ended("a", "uid-a", 13))
    state.pod_event("MODIFIED", ended("a", "uid-a", 20))
    assert state.room("ns/web", {"uid-a"}, after=10) is not None


def test_without_integer_revisions_no_room_is_ever_claimed() -> None:
    state = view("a", budgets=(budget("web", 5),))
    state.pod_event("MODIFIED", ended("a", "uid-a", 13))
    assert state.room("ns/web", {"uid-a"}, after=10) is None
