"""The pause between passes (``_drain/feed.py``): NodeWatch keeps the drain's view current from informers started
from what the first pass listed - no list of its own - and a change the watch delivers ends the pause; the
budgets come from the run's cache when it keeps one. The watches against the real API server:
tests/integration/test_machine_drain.py, test_drain_stale_view.py."""

from __future__ import annotations

import threading

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.feed import NodeWatch
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PodDecision, plan_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import DrainPass, EvictionOutcome
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Cache
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.informer import Informer
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import BUDGETS, PODS

NODE = "/api/v1/nodes/n1"
WEB = "/api/v1/namespaces/shop/pods/web-0"


class Streaming(FakeKube):
    """A stand-in whose watches run in the informers' threads (each replays the store's changes, then ends)."""

    background_watches = True


def first_pass(fake: FakeKube) -> DrainPass:
    """The first pass as the drain makes it: the Node read, its Pods listed (the version to watch from), web-0 evicted."""
    node = fake.put(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    fake.put(WEB, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "shop"}, "spec": {"nodeName": "n1"}})
    pods, version = fake.list_with_version(PODS, field_selector="spec.nodeName=n1")
    drain = DrainPass(node=node, pods=pods, decisions=[PodDecision(namespace="shop", name="web-0", behavior=DRAIN, order=0)], resource_version=version)
    drain.plan = plan_drain(drain.decisions)
    drain.outcome = EvictionOutcome(evicted=["shop/web-0"])
    return drain


def waited(watch: NodeWatch, drain: DrainPass, retry_budgets: set[str], end: float) -> str | None:
    """``watch.wait(...)``, given 10 s of real time (the stand-in's clock stands still while nothing watches)."""
    found: list[str] = []
    waiter = threading.Thread(target=lambda: found.append(watch.wait(drain, retry_budgets, end)), daemon=True)
    waiter.start()
    waiter.join(10)
    return found[0] if found else None


def test_the_pause_ends_when_the_pods_waited_for_are_gone_and_nothing_is_listed_again() -> None:
    fake = Streaming()
    drain = first_pass(fake)
    fake.finish(WEB)  # the evicted Pod goes, after the pass's list
    before = len(fake.requests)
    watch = NodeWatch.start(fake, drain, "n1", deadline=fake.monotonic() + 60)
    try:
        assert watch is not None
        assert waited(watch, drain, set(), fake.monotonic() + 60) == "gone"
        node, pods, budgets = watch.snapshot()
        assert node["metadata"]["name"] == "n1" and pods == [] and budgets == []
        reads = [request for request in fake.requests[before:] if "?watch" not in request[1]]
        assert reads == [("GET", BUDGETS)], "the budgets listed once (no cache); the Node and its Pods watched from the pass's list"
    finally:
        watch.stop()


def test_with_the_runs_cache_the_budgets_are_heard_not_listed() -> None:
    fake = Streaming()
    drain = first_pass(fake)
    fake.cache = Cache(fake)
    budget = {"metadata": {"name": "web", "namespace": "shop", "resourceVersion": "1"}, "status": {"disruptionsAllowed": 0}}
    # The run's cache of budgets, listed and watched (its watch's time soon over: the stand-in's clock runs with it).
    cached = fake.cache._informers[BUDGETS] = Informer(fake, BUDGETS, "policy/v1", "PodDisruptionBudget", every_namespace=True, until=fake.monotonic() + 1)
    cached.start_from([budget], "1")
    cached._thread.join(10)
    before = len(fake.requests)
    watch = NodeWatch.start(fake, drain, "n1", deadline=fake.monotonic() + 60)
    try:
        assert watch is not None and watch._budgets is cached
        assert ("GET", BUDGETS) not in fake.requests[before:]
        assert [b["metadata"]["name"] for b in watch.snapshot()[2]] == ["web"]
        allows = {**budget, "metadata": {**budget["metadata"], "resourceVersion": "9"}, "status": {"disruptionsAllowed": 1}}
        woke = threading.Timer(0.05, lambda: cached._on_event({"type": "MODIFIED", "object": allows}))
        woke.start()
        try:
            assert waited(watch, drain, {"shop/web"}, fake.monotonic() + 60) == "budget"
        finally:
            woke.join()
    finally:
        watch.stop()
    assert watch._budget_change not in cached._listeners, "stopped: the view listens to the cache no more"
