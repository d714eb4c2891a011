"""Unit tests for a pass over a Node (_drain/passes.py, pure): what it waits
for, whether it needs a retry, and which watch event ends the wait between passes."""

from __future__ import annotations

from pod_objects import PDB, decision, pass_of

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass, EvictionOutcome, PodWait
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import SKIP, WAIT_COMPLETED

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
    drain = pass_of(decisions, EvictionOutcome(evicted=["ns/web"]))
    assert drain.waiting_for() == {"ns/gone-soon", "ns/job", "ns/web"}


def test_refused_pods_are_not_waited_for() -> None:
    drain = pass_of([decision("web"), decision("api")], EvictionOutcome(evicted=["ns/web"], failures={PDB: ["ns/api"]}))
    assert drain.waiting_for() == {"ns/web"}
    assert drain.needs_retry is True


def test_unreachable_node_needs_retry() -> None:
    assert pass_of([decision("web", terminating=True)], unreachable=True).needs_retry is True
    assert pass_of([decision("web", terminating=True)]).needs_retry is False


def test_completion() -> None:
    assert DrainPass(node=None).completed is True
    assert pass_of([decision("agent", SKIP)], message="").completed is True
    assert pass_of([decision("web", terminating=True)], message="Drain not completed yet").completed is False


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
