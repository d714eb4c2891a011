"""A Pod this task evicted is never evicted again, even when the watched view of
the Node's Pods is older than the eviction (``passes.EvictionMemory``).

The passes here run against the fake transport with a watch that keeps
reporting the Pods as the first pass listed them: what the drain sees when its
Pod watch opens late while another watch (a budget allowing again) wakes the
next pass. FakeKube, as the API server, accepts an eviction of a terminating
Pod, so a second eviction would not be refused."""

from __future__ import annotations

import copy
import datetime as dt

from drain_run_helpers import LATE_DB, NODE, NODE_PATH, PODS, add_pod, finish_terminating_pods, pdb_refusal, pod_path, shop
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.logic import PDB_MESSAGE, PodDecision
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.passes import FAILED_EVICTION_RETRY_SECONDS, EvictionMemory, EvictionOutcome
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, normalize_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import DrainPasses

STARTED = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


class StaleWatch:
    """A NodeWatch that has not caught up: it reports the Node's Pods as they were at one moment."""

    failed = False

    def __init__(self, node: dict, pods: list[dict]):
        self.node, self.pods = copy.deepcopy(node), copy.deepcopy(pods)

    def snapshot(self) -> tuple[dict, list[dict], list[dict]]:
        return copy.deepcopy(self.node), copy.deepcopy(self.pods), []

    def stop(self) -> None:
        pass


def passes_for(fake: FakeKube, **options) -> DrainPasses:
    request = DrainRequest(node=NODE, rules=[LATE_DB], wait_timeout=600, **options)
    return DrainPasses(fake, request, inline_rules=normalize_rules(request.rules), deadline=fake.monotonic() + 600)


def one_pass(passes: DrainPasses, act: bool = True):
    return passes.one_pass(NODE, machine=None, started_at=STARTED, act=act)


def evictions(fake: FakeKube, since: int = 0) -> list[str]:
    """Names of the Pods evictions (or deletions) were sent for, from request ``since`` on."""
    sent = fake.requests[since:]
    return [path.split("/")[-2] for method, path in sent if method == "POST" and path.endswith("/eviction")] + [
        path.split("/")[-1] for method, path in sent if method == "DELETE" and "/pods/" in path
    ]


def node_pods(fake: FakeKube) -> list[dict]:
    return fake.list(PODS, field_selector=f"spec.nodeName={NODE}")


def stale_after_first_pass(fake: FakeKube, passes: DrainPasses, drain) -> int:
    """From now on the passes see the Node's Pods as the first pass listed them; the request count so far."""
    passes.watch = StaleWatch(fake.objects[NODE_PATH], drain.pods)
    return len(fake.requests)


# -- the rule, through the passes ---------------------------------------------------------


def test_a_pod_evicted_by_an_earlier_pass_is_not_evicted_again_from_a_stale_view() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake)
    first = one_pass(passes)
    assert first.outcome.evicted == ["shop/web-0", "shop/web-1"]
    since = stale_after_first_pass(fake, passes, first)
    assert not any(pod["metadata"].get("deletionTimestamp") for pod in passes.watch.pods), "the view predates the evictions"

    second = one_pass(passes)

    assert evictions(fake, since) == [], "a Pod the first pass evicted was evicted again"
    assert second.outcome.evicted == [] and second.plan.evict_now == []
    assert sorted(d.key for d in second.plan.terminating) == ["shop/web-0", "shop/web-1"]
    assert [d.key for d in second.plan.evict_later] == ["shop/db-0"], "the next batch still waits for them"
    assert second.waiting_for() == {"shop/web-0", "shop/web-1"}
    assert "* Pods shop/web-0, shop/web-1: deletionTimestamp set, but still not removed from the Node" in second.message


def test_a_pod_a_budget_refused_is_asked_again() -> None:
    fake = FakeKube()
    shop(fake)
    fake.fail("POST", pod_path("web-1") + "/eviction", pdb_refusal())
    passes = passes_for(fake)
    first = one_pass(passes)
    assert first.outcome.evicted == ["shop/web-0"] and first.needs_retry
    since = stale_after_first_pass(fake, passes, first)

    second = one_pass(passes)

    assert evictions(fake, since) == ["web-1"], "the refused Pod is retried, the evicted one is not"
    assert second.outcome.evicted == ["shop/web-1"] and not second.outcome.failures
    assert [d.key for d in second.plan.terminating] == ["shop/web-0"]


def test_a_pod_an_eviction_found_gone_counts_as_gone() -> None:
    fake = FakeKube()
    shop(fake)
    fake.fail("POST", pod_path("web-0") + "/eviction", FakeKube.error(404, 'pods "web-0" not found'))
    passes = passes_for(fake)
    first = one_pass(passes)
    assert first.outcome.gone == ["shop/web-0"] and first.outcome.evicted == ["shop/web-1"]
    since = stale_after_first_pass(fake, passes, first)

    second = one_pass(passes)

    assert evictions(fake, since) == []
    assert "shop/web-0" not in {d.key for d in second.decisions}
    assert second.waiting_for() == {"shop/web-1"}


def test_a_pod_recreated_under_the_same_name_is_evicted() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake)
    first = one_pass(passes)
    old_uid = fake.objects[pod_path("web-0")]["metadata"]["uid"]
    # web-0 goes, and a new Pod takes its name on the Node (a StatefulSet's, say); web-1 is still terminating.
    fake.finish(pod_path("web-0"))
    add_pod(fake, "web-0")
    assert fake.objects[pod_path("web-0")]["metadata"]["uid"] != old_uid
    since = stale_after_first_pass(fake, passes, first)
    passes.watch.pods = [pod for pod in passes.watch.pods if pod["metadata"]["name"] != "web-0"] + [fake.get(pod_path("web-0"))]

    second = one_pass(passes)

    assert evictions(fake, since) == ["web-0"]
    assert second.outcome.evicted == ["shop/web-0"]
    assert [d.key for d in second.plan.terminating] == ["shop/web-1"]


def test_a_pod_recreated_before_its_eviction_is_evicted_by_the_next_pass() -> None:
    fake = FakeKube()
    shop(fake)
    # The UID precondition fails: the Pod the first pass classified is gone, another took its name.
    fake.fail("POST", pod_path("web-0") + "/eviction", FakeKube.error(409, "Precondition failed: UID in precondition: 1, UID in object meta: 9"))
    passes = passes_for(fake)
    first = one_pass(passes)
    assert first.outcome.gone == ["shop/web-0"]
    since = len(fake.requests)
    passes.watch = StaleWatch(fake.objects[NODE_PATH], [pod for pod in node_pods(fake) if pod["metadata"]["name"] != "web-0"])
    fake.finish(pod_path("web-0"))
    add_pod(fake, "web-0")
    passes.watch.pods.append(fake.get(pod_path("web-0")))

    second = one_pass(passes)

    assert evictions(fake, since) == ["web-0"], "the new web-0 is not the one found gone"
    assert second.outcome.evicted == ["shop/web-0"]


def test_deleted_pods_are_remembered_too() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake, disable_eviction=True)
    first = one_pass(passes)
    assert first.outcome.evicted == ["shop/web-0", "shop/web-1"]
    since = stale_after_first_pass(fake, passes, first)

    one_pass(passes)

    assert evictions(fake, since) == []


def test_once_the_view_catches_up_the_pods_go_on_as_the_api_shows_them() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake)
    first = one_pass(passes)
    stale_after_first_pass(fake, passes, first)
    assert one_pass(passes).outcome.evicted == []
    finish_terminating_pods(fake)
    passes.watch.pods = node_pods(fake)  # the watch reported them deleted

    third = one_pass(passes)

    assert third.outcome.evicted == ["shop/db-0"], "the next batch starts"


def test_a_dry_pass_remembers_nothing() -> None:
    fake = FakeKube()
    shop(fake)
    passes = passes_for(fake)
    dry = one_pass(passes, act=False)
    assert dry.outcome.evicted == ["shop/web-0", "shop/web-1"], "as the server's dry runs answered"
    assert passes.memory.evicted == set() and passes.memory.gone == set()
    assert one_pass(passes).outcome.evicted == ["shop/web-0", "shop/web-1"]


# -- the memory itself (pure) --------------------------------------------------------------


def pod(name: str, uid: str, *, deleting: bool = False) -> dict:
    meta = {"name": name, "namespace": "ns", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_the_memory_is_keyed_by_uid() -> None:
    memory = EvictionMemory()
    sent = [pod("a", "u-a"), pod("b", "u-b"), pod("c", "u-c"), pod("d", "u-d")]
    memory.remember(sent, EvictionOutcome(evicted=["ns/a"], gone=["ns/b"], failures={"refused": ["ns/c"]}))
    assert memory.evicted == {"u-a"} and memory.gone == {"u-b"}
    later = [pod("a", "u-a"), pod("b", "u-b"), pod("c", "u-c"), pod("a2", "u-x"), pod("d", "u-d2")]
    assert [p["metadata"]["name"] for p in memory.present(later)] == ["a", "c", "a2", "d"]
    assert memory.terminating(later) == {"ns/a"}
    assert memory.terminating([pod("a", "u-new")]) == set(), "the same name with another UID is another Pod"


def test_applying_the_memory_marks_decisions_terminating() -> None:
    memory = EvictionMemory()
    memory.remember([pod("a", "u-a")], EvictionOutcome(evicted=["ns/a"]))
    decisions = [PodDecision(namespace="ns", name=name, behavior=DRAIN) for name in ("a", "b")]
    memory.apply([pod("a", "u-a"), pod("b", "u-b")], decisions)
    assert [(d.name, d.terminating) for d in decisions] == [("a", True), ("b", False)]


def test_pods_without_a_uid_are_never_remembered() -> None:
    memory = EvictionMemory()
    memory.remember([{"metadata": {"name": "a", "namespace": "ns"}}], EvictionOutcome(evicted=["ns/a"], gone=[]))
    assert memory.evicted == set()
    assert memory.present([{"metadata": {"name": "a", "namespace": "ns"}}]) != []


def test_a_failed_eviction_other_than_a_budgets_is_held_back_for_the_retry_interval() -> None:
    memory = EvictionMemory()
    pods = [{"metadata": {"name": name, "namespace": "shop", "uid": f"u-{name}"}} for name in ("web-0", "db-0")]
    two_budgets = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    outcome = EvictionOutcome(failures={two_budgets: ["shop/web-0"], PDB_MESSAGE: ["shop/db-0"]})
    memory.remember(pods, outcome, now=100.0)
    assert memory.held_back(pods, 100.0 + FAILED_EVICTION_RETRY_SECONDS - 0.1) == {"shop/web-0": two_budgets}
    assert memory.held_back(pods, 100.0 + FAILED_EVICTION_RETRY_SECONDS) == {}, "then asked again"
    assert FAILED_EVICTION_RETRY_SECONDS == 20, "Cluster API's drain retry interval"


def test_a_pass_does_not_ask_again_for_a_pod_whose_eviction_failed_just_now() -> None:
    fake = FakeKube()
    shop(fake, ("web-0", "web"))
    fake.fail("POST", pod_path("web-0") + "/eviction", FakeKube.error(500, "This pod has more than one PodDisruptionBudget"))
    request = DrainRequest(node=NODE, wait=True, wait_timeout=120)
    passes = DrainPasses(fake, request, inline_rules=[], deadline=fake.monotonic() + 120)
    first = passes.one_pass(NODE, machine=None, started_at=STARTED)
    second = passes.one_pass(NODE, machine=None, started_at=STARTED)
    evictions = [path for method, path in fake.requests if method == "POST" and path.endswith("/eviction")]
    assert evictions == [pod_path("web-0") + "/eviction"], "one eviction within the retry interval"
    assert first.outcome.failures == second.outcome.failures == {"This pod has more than one PodDisruptionBudget": ["shop/web-0"]}
