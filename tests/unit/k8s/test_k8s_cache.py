"""The run's caches (``_k8s/cache.py``) and an informer's listeners (``_k8s/informer.py``
``Informer.listen``): what a listener is told and when, objects of every namespace kept apart, one
cache per connection shared by every fork, nothing cached where the run keeps no cache, and the
rules of what a lagging cache may decide (``CachedObject``). The watches themselves run against the
real API server (tests/integration/test_delete_machine.py)."""

from __future__ import annotations

import threading

from fake_api_client import FakeApiClient, make_api, ok
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Cache, CachedObject, Reader, went_with, without_bulk
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.informer import Informer
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import BUDGETS, NAMESPACES, NODES


def budget(namespace: str, name: str, version: str, allowed: int = 1) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version}, "status": {"disruptionsAllowed": allowed}}


class Listening(Informer):
    """An informer that counts as listed and watched (the stand-in runs no background watch)."""

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
    fed = Informer(FakeKube(), BUDGETS, "policy/v1", "PodDisruptionBudget", lambda _obj: True, every_namespace=True)
    assert fed.items() is None
    assert not fed.listen(lambda kind, obj: None)
    assert fed._listeners == []


def test_nothing_is_shared_where_the_run_shares_nothing() -> None:
    fake = FakeKube()  # machine_drain's transport, say: no cache
    assert fake.cached_reader().cache is None
    assert fake.cached_reader().items(BUDGETS) is None


def test_one_feed_per_collection_and_all_stop_together() -> None:
    cache = Cache(FakeKube())
    assert cache.informer(BUDGETS) is cache.informer(BUDGETS) and cache.informer(NAMESPACES) is not cache.informer(BUDGETS)
    rules = cache.informer("/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedrainrules", "MachineDrainRule")
    assert (rules.api_version, rules.kind) == ("cluster.x-k8s.io/v1beta2", "MachineDrainRule")
    assert not rules.every_namespace and cache.informer(BUDGETS).every_namespace
    cache.stop()
    assert all(found._stopped.is_set() for found in (rules, cache.informer(BUDGETS), cache.informer(NAMESPACES)))


def test_a_shared_feed_keeps_no_managed_fields_and_no_node_images() -> None:
    """A feed holds its whole collection for the task's length: what nothing reads is left out of
    each copy, from the LIST and from the watch, and the object given is not changed."""
    cache = Cache(FakeKube())
    nodes = cache.informer(NODES)
    assert nodes.slim is without_bulk and cache.informer(BUDGETS).slim is without_bulk
    bulky = {
        "metadata": {"name": "w-1", "uid": "u-1", "resourceVersion": "5", "managedFields": [{"manager": "kubelet"}], "labels": {"a": "b"}},
        "spec": {"providerID": "fake://w-1"},
        "status": {"images": [{"names": ["registry/app:1"], "sizeBytes": 1}], "conditions": [{"type": "Ready", "status": "True"}]},
    }
    nodes._on_event({"type": "ADDED", "object": bulky})
    kept = nodes._seen["w-1"][1]
    assert "managedFields" not in kept["metadata"] and "images" not in kept["status"]
    assert kept["metadata"]["labels"] == {"a": "b"} and kept["status"]["conditions"][0]["type"] == "Ready"
    assert kept["spec"] == {"providerID": "fake://w-1"}
    assert bulky["metadata"]["managedFields"] and bulky["status"]["images"]
    assert without_bulk({"metadata": {"name": "x"}}) == {"metadata": {"name": "x"}}


# -- one object followed through the run's cache (CachedObject) ------------------------------------

NODE_PATH = f"{NODES}/w-1"


def node(version: str, uid: str = "u-1", **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w-1", "uid": uid, "resourceVersion": version, **meta}}


class Sharing(FakeKube):
    """A transport whose run caches Nodes (fed by hand: the stand-in runs no background watch)."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = Cache(self)
        self.nodes = self.cache._informers[NODES] = Listening(self, NODES, "v1", "Node", lambda _obj: True)


def followed(fake: FakeKube) -> CachedObject:
    return fake.cached_reader().follow(NODE_PATH, "Node")


def test_an_object_the_feed_shows_costs_no_request_and_never_goes_backwards() -> None:
    fake = Sharing()
    fake.nodes._on_event({"type": "ADDED", "object": node("5")})
    seen = followed(fake)
    assert seen.read()["metadata"]["resourceVersion"] == "5"
    seen.last = node("9")  # read or written here since: newer than the feed's copy
    assert seen.read()["metadata"]["resourceVersion"] == "9"
    fake.nodes._on_event({"type": "MODIFIED", "object": node("10")})
    assert seen.read()["metadata"]["resourceVersion"] == "10"
    assert fake.requests == []


def test_only_the_server_says_an_object_is_gone() -> None:
    fake = Sharing()
    fake.put(NODE_PATH, node("1"))  # made after the feed's LIST: the feed does not show it yet
    seen = followed(fake)
    assert seen.read() is not None and fake.requests == [("GET", NODE_PATH)]
    assert seen.read() is not None and len(fake.requests) == 2  # still not in the feed: read again
    fake.nodes._on_event({"type": "ADDED", "object": node("7")})
    assert seen.read()["metadata"]["resourceVersion"] == "7" and len(fake.requests) == 2
    fake.nodes._on_event({"type": "DELETED", "object": node("8")})
    assert seen.read() is None and len(fake.requests) == 2  # the watch, which had shown it, said it went


def test_an_object_never_seen_is_read_once_then_watched_for() -> None:
    fake = Sharing()
    seen = followed(fake)
    assert seen.read() is None and fake.requests == [("GET", NODE_PATH)]
    assert seen.read() is None and len(fake.requests) == 1
    fake.nodes._on_event({"type": "ADDED", "object": node("3", uid="u-2")})
    assert seen.read()["metadata"]["uid"] == "u-2"


def test_the_answer_to_a_delete_says_whether_it_went() -> None:
    fake = Sharing()
    fake.nodes._on_event({"type": "ADDED", "object": node("5")})
    seen = followed(fake)
    before = seen.read()
    assert seen.deleted({"kind": "Status", "status": "Success"}, before) is None
    assert seen.read() is None  # the feed's lagging copy of the same Node is not taken for it
    fake.nodes._on_event({"type": "ADDED", "object": node("9", uid="u-2")})
    assert seen.read()["metadata"]["uid"] == "u-2"  # a new Node of that name is
    held = node("12", uid="u-2", deletionTimestamp="2026-11-27T00:00:00Z", finalizers=["example.com/x"])
    assert seen.deleted(held, seen.last) == held and seen.read() == held
    assert fake.requests == []


def test_went_with_reads_the_answers_of_a_delete() -> None:
    assert went_with(None) and went_with({}) and went_with({"kind": "Status"})
    assert went_with(node("5"))  # the object as it was removed
    assert not went_with(node("5", deletionTimestamp="2026-11-27T00:00:00Z", finalizers=["f"]))


def test_waiting_for_an_object_to_go_wakes_on_the_feed() -> None:
    fake = Sharing()
    fake.nodes._on_event({"type": "ADDED", "object": node("5")})
    seen = followed(fake)
    seen.read()
    timer = threading.Timer(0.05, lambda: fake.nodes._on_event({"type": "DELETED", "object": node("6")}))
    timer.start()
    try:
        assert seen.wait_gone(fake.monotonic() + 5)
    finally:
        timer.join()
    assert fake.requests == []


def test_without_a_shared_feed_every_look_is_a_get() -> None:
    fake = FakeKube()
    fake.put(NODE_PATH, node("1"))
    seen = followed(fake)
    seen.read()
    seen.read()
    assert fake.requests == [("GET", NODE_PATH), ("GET", NODE_PATH)]


def test_without_a_feed_the_wait_watches_the_object_itself() -> None:
    fake = FakeKube()
    assert followed(fake).wait_gone(fake.monotonic() + 5)  # not there: gone at the first read
    assert fake.requests == [("GET", NODE_PATH)]
    fake = Sharing()
    fake.cache._informers[NODES] = Informer(fake, NODES, "v1", "Node", lambda _obj: True)  # runs no watch here: cannot answer
    assert followed(fake).wait_gone(fake.monotonic() + 5)
    assert fake.requests == [("GET", NODE_PATH)]


def test_shared_object_follows_the_feed_of_its_collection() -> None:
    """The termination and the drain follow a referenced object (an InfraMachine, say) through one informer per collection."""
    fake = FakeKube()
    fake.cache = Cache(fake)
    reader = fake.cached_reader()
    infra = reader.follow("/apis/infrastructure.example.com/v1beta1/namespaces/ns/fakemachines/m1", "FakeMachine")
    found = fake.cache.informer(infra.collection, infra.kind)
    assert (found.collection, found.api_version, found.kind) == (
        "/apis/infrastructure.example.com/v1beta1/namespaces/ns/fakemachines",
        "infrastructure.example.com/v1beta1",
        "FakeMachine",
    )
    other = reader.follow("/apis/infrastructure.example.com/v1beta1/namespaces/ns/fakemachines/m2", "FakeMachine")
    assert fake.cache.informer(other.collection, other.kind) is found
    core = reader.follow(f"{NODES}/w-1", "Node")
    node_informer = fake.cache.informer(core.collection, core.kind)
    assert (node_informer.collection, node_informer.api_version) == (NODES, "v1") and infra.name == "m1"


# -- one cache per connection, kept by the transport (KubeApi.cached_reader) -------------------------


def test_a_run_that_keeps_no_caches_reads_live() -> None:
    api, _client, _clock = make_api()
    assert api.cached_reader().cache is None
    assert api.fork().cached_reader().cache is None
    assert api.live_reader().cache is None


def test_one_cache_per_connection_shared_by_every_fork() -> None:
    api, _client, clock = make_api()
    task = api.fork(deadline=clock() + 30)
    api.keep_caches()
    first = task.cached_reader().cache
    assert first is not None and api.fork().cached_reader().cache is first
    assert isinstance(task.cached_reader(), Reader) and task.cached_reader().api is task
    assert task.live_reader().cache is None, "the live reader never reads from the cache"
    # The cache's own fork has no deadline: it outlives the task that made it.
    assert first.api.deadline is None
    workload = FakeApiClient(clock)
    workload.always = lambda sent: ok({})
    other = task.other_cluster("c1", lambda: (workload, None), label="the workload cluster ns/c1")
    theirs = other.cached_reader().cache
    assert theirs is not first and api.fork().other_cluster("c1", lambda: (workload, None), label="x").cached_reader().cache is theirs


def test_stopping_the_caches_stops_each_and_keeps_none_after() -> None:
    api, _client, _clock = make_api()
    api.keep_caches()
    cache = api.fork().cached_reader().cache
    informer = cache.informer(BUDGETS)
    api.stop_caches()
    assert informer._stopped.is_set()
    assert api.cached_reader().cache is None


def test_a_live_reader_always_asks_the_server_and_a_cached_one_only_what_its_cache_does_not_show() -> None:
    fake = Sharing()
    fake.put(NODE_PATH, node("1"))
    fake.nodes._on_event({"type": "ADDED", "object": node("5")})
    assert fake.live_reader().get(NODE_PATH)["metadata"]["resourceVersion"] == "1" and fake.requests == [("GET", NODE_PATH)]
    assert fake.cached_reader().get(NODE_PATH)["metadata"]["resourceVersion"] == "5" and len(fake.requests) == 1
    assert fake.cached_reader().get(f"{NODES}/w-2") is None and fake.requests[-1] == ("GET", f"{NODES}/w-2"), "not shown: read"
