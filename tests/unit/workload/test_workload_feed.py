"""The whole-cluster reads a machine_delete task's Machines share (``_workload/feed.py``) and the
feed's listeners (``_machine/feed.py`` ``ObjectFeed.listen``): what a listener is told and when,
objects of every namespace kept apart, and nothing shared where the run shares nothing. The
watches themselves run against the real API server (tests/integration/test_delete_machine.py)."""

from __future__ import annotations

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.feed import ObjectFeed
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.feed import BUDGETS, ClusterFeeds, cluster_feeds, shared_items


def budget(namespace: str, name: str, version: str, allowed: int = 1) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version}, "status": {"disruptionsAllowed": allowed}}


class Listening(ObjectFeed):
    """A feed that counts as listed and watched (the stand-in runs no background watch)."""

    def ready(self) -> bool:
        return True


def feed() -> Listening:
    return Listening(FakeKube(), BUDGETS, "policy/v1", "PodDisruptionBudget", lambda _obj: True, every_namespace=True)


def test_objects_of_every_namespace_are_kept_apart() -> None:
    fed = feed()
    fed._on_event({"type": "ADDED", "object": budget("a", "pdb", "5")})
    fed._on_event({"type": "ADDED", "object": budget("b", "pdb", "6")})
    assert set(fed._seen) == {"a/pdb", "b/pdb"}
    assert sorted(item["metadata"]["namespace"] for item in fed.items()) == ["a", "b"]
    assert all(item["kind"] == "PodDisruptionBudget" and item["apiVersion"] == "policy/v1" for item in fed.items())


def test_a_listener_hears_what_is_kept_then_each_change_until_it_stops() -> None:
    fed = feed()
    fed._on_event({"type": "ADDED", "object": budget("a", "pdb", "5")})
    heard: list[tuple[str, object]] = []

    def listener(kind, obj):
        heard.append((kind, obj))

    assert fed.listen(listener)
    assert heard[0][0] == "RELISTED" and [b["metadata"]["name"] for b in heard[0][1]] == ["pdb"]
    fed._on_event({"type": "MODIFIED", "object": budget("a", "pdb", "7", allowed=0)})
    fed._on_event({"type": "MODIFIED", "object": budget("a", "pdb", "6", allowed=3)})  # an older copy: neither kept nor told
    fed._on_event({"type": "DELETED", "object": budget("a", "pdb", "8")})
    assert [kind for kind, _obj in heard] == ["RELISTED", "MODIFIED", "DELETED"]
    assert heard[1][1]["status"]["disruptionsAllowed"] == 0
    assert fed._seen["a/pdb"] == (8, None)
    fed.unlisten(listener)
    fed._on_event({"type": "ADDED", "object": budget("a", "pdb2", "9")})
    assert len(heard) == 3


def test_a_relist_is_told_as_the_whole_list() -> None:
    fed = feed()
    heard: list[tuple[str, object]] = []
    fed.listen(lambda kind, obj: heard.append((kind, obj)))
    fed.api.create("/apis/policy/v1/namespaces/a/poddisruptionbudgets", budget("a", "pdb", "1"))
    fed._relist()
    kind, items = heard[-1]
    assert kind == "RELISTED" and [b["metadata"]["name"] for b in items] == ["pdb"]


def test_a_failing_listener_is_dropped_and_the_others_still_hear() -> None:
    fed = feed()
    heard: list[str] = []

    def broken(kind, obj):
        if kind != "RELISTED":
            raise RuntimeError("boom")

    fed.listen(broken)
    fed.listen(lambda kind, obj: heard.append(kind))
    fed._on_event({"type": "ADDED", "object": budget("a", "pdb", "5")})
    fed._on_event({"type": "ADDED", "object": budget("a", "pdb2", "6")})
    assert heard == ["RELISTED", "ADDED", "ADDED"] and len(fed._listeners) == 1 and broken not in fed._listeners


def test_a_feed_that_cannot_answer_tells_nothing() -> None:
    fed = ObjectFeed(FakeKube(), BUDGETS, "policy/v1", "PodDisruptionBudget", lambda _obj: True, every_namespace=True)
    assert fed.items() is None
    assert not fed.listen(lambda kind, obj: None)
    assert fed._listeners == []


def test_nothing_is_shared_where_the_run_shares_nothing() -> None:
    fake = FakeKube()  # machine_drain's transport, say: no shared views
    assert cluster_feeds(fake) is None
    assert shared_items(fake, lambda feeds: feeds.budgets()) is None


def test_one_feed_per_collection_and_all_stop_together() -> None:
    feeds = ClusterFeeds(FakeKube())
    assert feeds.budgets() is feeds.budgets() and feeds.namespaces() is not feeds.budgets()
    rules = feeds.feed("/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedrainrules", "cluster.x-k8s.io/v1beta2", "MachineDrainRule")
    assert not rules.every_namespace and feeds.budgets().every_namespace
    feeds.stop()
    assert all(found._stopped.is_set() for found in (rules, feeds.budgets(), feeds.namespaces()))
