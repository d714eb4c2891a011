"""Unit tests for how long the drain waits between two passes (_drain/pacing.py, pure)."""

from __future__ import annotations

import pytest
from pod_objects import PDB, decision, pass_of

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pacing import pause_limit, pause_until
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import EvictionOutcome


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
    drain = pass_of(decisions, outcome, unreachable)
    assert pause_limit(drain, wait_sleep=2, resync=30) == expected


def test_a_pause_ends_by_the_deadline_and_never_before_now() -> None:
    drain = pass_of([decision("web")], EvictionOutcome(evicted=["ns/web"]))
    # Instants of one clock (the transport's): the pause ends at the first of its limit, the deadline and ``until``.
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1004.5) == 1004.5
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1100.0) == 1030.0
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1100.0, until=1004.5) == 1004.5
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=999.0) == 1000.0
    assert pause_until(drain, now=1000.0, wait_sleep=2, deadline=1100.0, until=997.0) == 1000.0


def test_wait_sleep_longer_than_resync_wins() -> None:
    drain = pass_of([decision("web")], EvictionOutcome(evicted=["ns/web"]))
    assert pause_limit(drain, wait_sleep=60, resync=30) == 60
