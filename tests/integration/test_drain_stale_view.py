"""machine_drain never evicts a Pod twice, even when its watch of the Node's Pods
lags behind its own evictions.

After the first pass the drain works from watches of the Node, its Pods and the
PodDisruptionBudgets. Those are separate streams: the budget watch can report a
budget that allows again while the Pod watch has not yet reported (or, opened
late, not even started to report) the deletionTimestamp of the Pod the first
pass evicted. The next pass must still count that Pod as terminating: the API
server accepts an eviction of a terminating Pod (it deletes it again, budget or
not), so a second eviction would not even be refused.

The fault proxy delays only the drain's Pod watch, by more than a replacement
Pod takes to become Ready elsewhere; the API server's audit log then shows
whether any Pod was evicted more than once.
"""

from __future__ import annotations

import threading
import urllib.parse

from faultproxy import is_eviction, is_watch
from khelpers import deployment, ready_pods_on, wait_for
from test_machine_drain import evictions

GRACE = 10  # the evicted Pods stay terminating well past the drain's next passes
WATCH_DELAY = 5  # seconds the Pod watch is held back: a replacement is Ready sooner


def pod_watch(method: str, target: str) -> bool:
    """The drain's watch of the Node's Pods (the Node's and the budgets' watches are other paths)."""
    return method == "GET" and is_watch(target) and urllib.parse.urlsplit(target).path == "/api/v1/pods"


def test_a_pod_evicted_while_the_pod_watch_lags_is_not_evicted_again(*, kube, namespace, make_node, fault_proxy, run_module, audit_events) -> None:
    pool = {"lm-pool": namespace}
    node, spare = make_node(labels=pool), make_node(labels=pool)
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": True}})
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 3, pool, GRACE))

    def ready_web(on: str) -> list[str]:
        return ready_pods_on(kube, namespace, "app=web", on)

    originals = wait_for(lambda: len(ready_web(node)) == 3 and ready_web(node), what="3 web Pods Ready")
    pdb_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/web"
    budget = {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    kube.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"}, "spec": budget},
    )
    wait_for(lambda: ((kube.get(pdb_path) or {}).get("status") or {}).get("disruptionsAllowed") == 1, what="the budget allowing one disruption")

    proxy = fault_proxy(rate=1.0, kinds=["delay"], delay_seconds=WATCH_DELAY, exclude=lambda method, target: not pod_watch(method, target))
    stop = threading.Event()
    seen: dict = {}

    def evicted_through_proxy() -> int:
        return sum(1 for r in proxy.records if r.method == "POST" and is_eviction(r.path) and r.status == 201)

    def spare_after_first_eviction() -> None:
        """Uncordon the spare Node once the first Pod is evicted (its replacement becomes Ready
        there and the budget allows again), and count the evictions the API server granted
        before the drain's Pod watch was opened at all."""
        while not stop.is_set() and evicted_through_proxy() == 0:
            stop.wait(0.02)
        kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": None}})
        while not stop.is_set():
            granted = evicted_through_proxy()
            if any(pod_watch(r.method, r.path) and r.forwarded for r in proxy.records):
                seen["before_pod_watch"] = granted
                return
            stop.wait(0.02)

    helper = threading.Thread(target=spare_after_first_eviction, daemon=True)
    helper.start()
    try:
        result = run_module("machine_drain", {"node": node, "wait_sleep": 1, "wait_timeout": 120}, via=proxy.kubeconfig, timeout=300)
    finally:
        stop.set()
        helper.join(timeout=10)

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True
    assert sorted(result["evicted"]) == sorted(f"{namespace}/{name}" for name in originals)
    assert proxy.stats().faults.get("delay", 0) >= 1, "the Pod watch was not delayed: the test proves nothing"
    # A later pass evicted while the drain's Pod watch was still held back: it worked from a stale view.
    assert seen.get("before_pod_watch", 0) >= 2, f"no pass ran before the Pod watch opened: {seen}"
    # The API server's own log: every Pod evicted exactly once with success, refusals (429) aside.
    logged = evictions(audit_events, namespace)
    assert sorted(logged) == sorted(originals), logged
    assert all(codes.count(201) == 1 and set(codes) <= {201, 429} for codes in logged.values()), f"a Pod was evicted more than once: {logged}"
