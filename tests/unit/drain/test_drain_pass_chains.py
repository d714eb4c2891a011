"""A pass's budget chains: going on while another still sends (``_drain/feed.PassChains``: who waits, what
wakes it, and when the pass's chains end; the view's rule for a budget's room is ``test_drain_view.py``'s), and
an eviction slow to answer getting the next beside it (``_drain/api._Chain``)."""

from __future__ import annotations

import threading
import time

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import evict_pods
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.feed import NodeWatch
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.view import DrainView, disruptions_allowed


def budget(allowed: int, version: int) -> dict:
    return {"metadata": {"name": "web", "namespace": "shop", "resourceVersion": str(version)}, "status": {"disruptionsAllowed": allowed}}


def terminating(uid: str, version: int) -> dict:
    meta = {"name": uid, "namespace": "shop", "uid": uid, "resourceVersion": str(version), "deletionTimestamp": "2026-12-07T00:00:00Z"}
    return {"metadata": meta, "spec": {"nodeName": "n1"}}


def watch_of(fake: FakeKube) -> NodeWatch:
    view = DrainView({"metadata": {"name": "n1"}}, [], [budget(0, 10)])
    return NodeWatch(fake, "n1", view, deadline=fake.monotonic() + 600)


def in_thread(call) -> tuple[threading.Thread, list]:
    found: list = []
    thread = threading.Thread(target=lambda: found.append(call()), daemon=True)
    thread.start()
    return thread, found


def test_a_chain_out_of_room_goes_on_when_its_budget_has_room_while_another_sends() -> None:
    watch = watch_of(FakeKube())
    chains = watch.chains(2)
    thread, found = in_thread(lambda: chains.room("shop/web", {"uid-a"}, 10))
    watch._pod_change("MODIFIED", terminating("uid-a", 11))
    watch._budget_change("MODIFIED", budget(0, 12))  # its own eviction counted: no room
    thread.join(0.5)
    assert thread.is_alive(), "waits while the other chain sends"
    watch._budget_change("MODIFIED", budget(2, 13))
    thread.join(5)
    assert not thread.is_alive() and disruptions_allowed(found[0]) == 2
    assert chains.sending == 2, "sending again"


def test_a_waiting_chain_ends_when_no_other_chain_sends() -> None:
    watch = watch_of(FakeKube())
    chains = watch.chains(2)
    thread, found = in_thread(lambda: chains.room("shop/web", {"uid-a"}, 10))
    thread.join(0.3)
    assert thread.is_alive()
    chains.done()
    thread.join(5)
    assert found == [None] and chains.sending == 0


def test_the_last_chain_sending_does_not_wait() -> None:
    watch = watch_of(FakeKube())
    chains = watch.chains(1)
    assert chains.room("shop/web", {"uid-a"}, 10) is None
    assert chains.sending == 0


def test_a_chain_does_not_wait_past_the_pass_s_end_nor_a_cancelled_run() -> None:
    fake = FakeKube()
    watch = watch_of(fake)
    chains = watch.chains(2)
    fake.clock = chains.end
    assert chains.room("shop/web", {"uid-a"}, 10) is None
    fake.clock -= 10
    cancelled = watch.chains(2)
    fake.cancel()
    assert cancelled.room("shop/web", {"uid-a"}, 10) is None


def ready_pod(fake: FakeKube, name: str) -> dict:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}}, "spec": {"nodeName": "n1"}}
    body["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return fake.put(f"/api/v1/namespaces/ns/pods/{name}", body)


def web_budget(allowed: int) -> dict:
    status = {"disruptionsAllowed": allowed, "desiredHealthy": 2, "currentHealthy": 2 + allowed}
    return {"metadata": {"name": "web", "namespace": "ns", "resourceVersion": "5"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": status}


class Timed:
    """Evictions the stand-in answers, ``slow`` ones after ``delay`` seconds: which were sent, and the most under way at once."""

    def __init__(self, fake: FakeKube, slow: set[str], delay: float):
        self.sent: list[str] = []
        self.under_way = self.peak = 0
        self._lock = threading.Lock()
        self._slow, self._delay = slow, delay
        fake.on_request = self.heard

    def heard(self, method: str, path: str) -> None:
        if not path.endswith("/eviction"):
            return
        name = path.split("/")[-2]
        with self._lock:
            self.sent.append(name)
            self.under_way += 1
            self.peak = max(self.peak, self.under_way)
        if name in self._slow:
            time.sleep(self._delay)
        with self._lock:
            self.under_way -= 1


def test_an_eviction_slow_to_answer_gets_the_next_beside_it_never_past_what_the_budget_allows() -> None:
    fake = FakeKube()
    pods = [ready_pod(fake, f"web-{i}") for i in range(4)]
    timed = Timed(fake, {"web-0"}, 0.8)
    outcome = evict_pods(fake, pods, grace_period=None, budgets=[web_budget(3)], predict=True)
    assert timed.sent == ["web-0", "web-1", "web-2"], "web-1 and web-2 went while web-0 waited; web-3 is past the allowance"
    assert timed.peak == 2
    assert sorted(outcome.evicted) == ["ns/web-0", "ns/web-1", "ns/web-2"]
    assert list(outcome.failures.values()) == [["ns/web-3"]]
    assert next(iter(outcome.failures)).startswith("Cannot evict pod as it would violate the pod's disruption budget.")


def test_quick_answers_keep_a_budget_s_evictions_one_after_the_other() -> None:
    fake = FakeKube()
    pods = [ready_pod(fake, f"web-{i}") for i in range(4)]
    timed = Timed(fake, set(), 0.0)
    outcome = evict_pods(fake, pods, grace_period=None, budgets=[web_budget(4)], predict=True)
    assert timed.peak == 1 and len(outcome.evicted) == 4


def test_without_a_prediction_a_budget_s_evictions_never_overlap() -> None:
    # A dry run (and a drain with no budgets read) asks the server one Pod after the other, as before.
    fake = FakeKube()
    pods = [ready_pod(fake, f"web-{i}") for i in range(3)]
    timed = Timed(fake, {"web-0"}, 0.4)
    evict_pods(fake, pods, grace_period=None, budgets=[web_budget(3)], dry_run=True)
    assert timed.peak == 1
