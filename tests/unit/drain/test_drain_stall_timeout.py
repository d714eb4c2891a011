"""stall_timeout (``_drain/stall_policy.py`` ProgressClock): what counts as progress from one pass to the next, and when a drain
without any counts as stalled."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass, EvictionOutcome
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, SKIP, WAIT_COMPLETED
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stall_policy import ProgressClock, progress_since, stall_message
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import CLEARS, PHASE_DRAIN, Blocker

NS = "shop"


def pod(name: str, uid: str | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": NS, "uid": uid or f"u-{name}"}}


def a_pass(names: dict[str, tuple[str, int]], *, evicted: tuple[str, ...] = (), uids: dict[str, str] | None = None) -> DrainPass:
    """A pass over Pods ``name -> (behavior, order)``; ``evicted``: the keys whose eviction was granted."""
    uids = uids or {}
    decisions = [PodDecision(namespace=NS, name=name, behavior=behavior, order=order) for name, (behavior, order) in names.items()]
    drain = DrainPass(node={"metadata": {"name": "n1"}}, pods=[pod(name, uids.get(name)) for name in names], decisions=decisions)
    drain.plan = plan_drain(decisions)
    drain.outcome = EvictionOutcome(evicted=list(evicted))
    return drain


def test_the_first_pass_starts_the_clock_and_nothing_else_is_progress() -> None:
    clock = ProgressClock(timeout=30)
    assert clock.left(100.0) is None and not clock.stalled(1e9), "not started before the first pass"
    held = {"web-0": (DRAIN, 0), "ds-0": (SKIP, 0)}
    assert clock.after_pass(a_pass(held), 100.0) == "the drain's first pass"
    # Refusals, retries, a new Pod on the Node: no progress.
    assert clock.after_pass(a_pass(held), 110.0) is None
    assert clock.after_pass(a_pass({**held, "new-0": (DRAIN, 0)}), 120.0) is None
    assert (clock.since, clock.left(125.0), clock.stalled(129.9), clock.stalled(130.0)) == (100.0, 5.0, False, True)


def test_a_granted_eviction_a_pod_gone_or_replaced_and_the_next_batch_are_progress() -> None:
    clock = ProgressClock(timeout=30, since=50.0)
    both = {"web-0": (DRAIN, 0), "db-0": (DRAIN, 10), "job-0": (WAIT_COMPLETED, 0)}
    assert clock.after_pass(a_pass(both), 60.0) is None, "a clock carried from an earlier call: the first pass is no progress"
    assert clock.after_pass(a_pass(both, evicted=(f"{NS}/web-0",)), 70.0) == f"eviction granted: Pod {NS}/web-0"
    assert clock.after_pass(a_pass({k: v for k, v in both.items() if k != "job-0"}), 80.0) == f"Pod {NS}/job-0 left the Node"
    assert clock.after_pass(a_pass({"web-0": (DRAIN, 0), "db-0": (DRAIN, 10)}, uids={"web-0": "other"}), 90.0) == f"Pod {NS}/web-0 left the Node"
    assert clock.after_pass(a_pass({"db-0": (DRAIN, 10)}), 100.0) == f"Pod {NS}/web-0 left the Node"
    assert clock.after_pass(a_pass({"db-0": (DRAIN, 10)}), 110.0) is None
    assert (clock.since, clock.what) == (100.0, f"Pod {NS}/web-0 left the Node")
    # A skipped Pod leaving is no progress of the drain; the order moving on is.
    clock = ProgressClock(timeout=30)
    clock.after_pass(a_pass({"db-0": (DRAIN, 10), "ds-0": (SKIP, 0)}), 0.0)
    assert clock.after_pass(a_pass({"db-0": (DRAIN, 10)}), 5.0) is None
    clock.order = 0
    assert clock.after_pass(a_pass({"db-0": (DRAIN, 10)}), 6.0) == "next batch started (order 10)"


def test_without_a_timeout_the_drain_never_stalls() -> None:
    clock = ProgressClock()
    clock.after_pass(a_pass({"web-0": (DRAIN, 0)}), 0.0)
    assert clock.left(1e9) is None and not clock.stalled(1e9)


def test_the_message_says_how_long_since_what_and_what_holds_it() -> None:
    clock = ProgressClock(timeout=30, since=1_800_000_000.0, what="eviction granted: Pod shop/web-0")
    blockers = [Blocker(PHASE_DRAIN, "budget refusal", f"Pod {NS}/db-{index}", CLEARS, "budget shop/db allows another eviction later") for index in range(5)]
    message = stall_message("n1", clock, 1_800_000_045.0, blockers, most=3)
    assert message.startswith("Stopped draining Node n1: no progress for 45 s (stall_timeout is 30 s; the last was at 2027-01-15T08:00:00Z")
    assert "eviction granted: Pod shop/web-0" in message and "Pod shop/db-2: budget shop/db" in message and "(and 2 more)" in message
    assert "nothing was overridden" in message and "db-3" not in message


def params(**extra) -> dict:
    base = {
        "node": "n1",
        "machine": None,
        "namespace": None,
        "api_version": None,
        "state": "drained",
        "rules": [],
        "use_cluster_rules": True,
        "wait": True,
        "wait_timeout": 600,
        "wait_sleep": 2,
        "grace_period": None,
        "disable_eviction": False,
    }
    return {**base, **extra}


def test_the_request_takes_stall_timeout_and_the_previous_rounds_progress() -> None:
    request = DrainRequest.from_params(params(stall_timeout=1800, progress_since=1_700_000_000.5), check_mode=False)
    assert (request.stall.timeout, request.stall.since) == (1800, 1_700_000_000.5)
    assert DrainRequest.from_params(params(), check_mode=False).stall.timeout is None
    for bad, said in ((params(stall_timeout=0), "stall_timeout must be at least 1"), (params(progress_since=9e12), "progress_since must be epoch seconds")):
        try:
            DrainRequest.from_params(bad, check_mode=False)
        except MachineError as exc:
            assert said in exc.msg, exc.msg
        else:
            raise AssertionError(f"{bad} was accepted")
    assert progress_since("1700000000", 1_800_000_000.0) == 1_700_000_000.0
    assert [progress_since(value, 100.0) for value in (None, True, "soon", -1, 0, 161)] == [None] * 6
