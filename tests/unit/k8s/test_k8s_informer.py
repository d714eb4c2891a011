"""The one list-and-watch informer (``_k8s/informer.py``): which copy is newer, what a watch event
and a relist leave, and the fall-back to a read when it cannot tell. The watch itself runs against
the real API server (tests/integration/test_delete_machine.py)."""

from __future__ import annotations

import threading

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.informer import Informer, newer, version_of

API = "cluster.x-k8s.io/v1beta2"
COLLECTION = f"/apis/{API}/namespaces/ns/machines"


def machine(name: str = "m-1", version: str = "10", uid: str = "u-1", **meta) -> dict:
    return {"apiVersion": API, "kind": "Machine", "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": version, **meta}}


def test_versions_compare_as_numbers_and_anything_else_is_not_compared() -> None:
    assert version_of(machine(version="9")) == 9
    assert version_of(machine(version="abc")) is None
    assert version_of({"metadata": {}}) is None
    known = machine(version="abc")
    assert newer(known, (50, machine(version="50"))) == (False, known)


def test_the_feeds_copy_counts_only_when_newer() -> None:
    known = machine(version="10")
    assert newer(known, None) == (False, known)
    assert newer(known, (10, machine(version="10", labels={"x": "y"}))) == (False, known)
    changed, current = newer(known, (12, machine(version="12", annotations={"a": "b"})))
    assert changed and current["metadata"]["annotations"] == {"a": "b"} and current["apiVersion"] == API


def test_a_deleted_or_recreated_machine_is_gone() -> None:
    known = machine(version="10")
    assert newer(known, (11, None)) == (True, None)
    assert newer(known, (11, machine(version="11", uid="u-2"))) == (True, None)


def feed() -> Informer:
    names = {"m-1", "m-2"}
    return Informer(FakeKube(), COLLECTION, API, "Machine", lambda obj: obj["metadata"]["name"] in names)


def test_watch_events_keep_the_newest_copy_of_the_tasks_machines_only() -> None:
    fed = feed()
    fed._on_event({"type": "MODIFIED", "object": machine(version="12", labels={"new": "1"})})
    fed._on_event({"type": "MODIFIED", "object": machine(version="11", labels={"old": "1"})})  # a replayed, older one
    fed._on_event({"type": "ADDED", "object": machine(name="other", version="13")})
    assert fed._seen["m-1"][0] == 12 and fed._seen["m-1"][1]["metadata"]["labels"] == {"new": "1"}
    assert "other" not in fed._seen and fed._version == "13"
    fed._on_event({"type": "DELETED", "object": machine(version="14")})
    assert fed._seen["m-1"] == (14, None)


def test_a_relist_shows_the_listed_machines_and_marks_the_missing_ones_gone() -> None:
    fed = feed()
    fed._on_event({"type": "ADDED", "object": machine(version="0")})
    fed.api.create(COLLECTION, machine(name="m-2", version="1", uid="u-2"))
    done, version = fed._relist()
    assert not done and version is not None
    assert fed._seen["m-2"][1]["metadata"]["uid"] == "u-2"
    assert fed._seen["m-1"] == (int(version), None)


# -- an informer started from a list already read (the drain's NodeWatch) ------------------------

PODS = "/api/v1/pods"


class Streaming(FakeKube):
    """A stand-in whose watches run in the informer's thread (each replays the store's changes, then ends);
    a watch waits until the test lets it go (``go``), so that a listener is in place first."""

    background_watches = True

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.on_request = lambda _method, path: self.go.wait(5) if path.endswith("?watch") else None


def pod(name: str, node: str = "n1") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"}, "spec": {"nodeName": node}}


def test_an_informer_started_from_a_list_lists_nothing_and_hears_what_came_after() -> None:
    fake = Streaming()
    fake.put("/api/v1/namespaces/shop/pods/web-0", pod("web-0"))
    items, version = fake.list_with_version(PODS, field_selector="spec.nodeName=n1")
    fake.put("/api/v1/namespaces/shop/pods/web-1", pod("web-1"))
    fake.put("/api/v1/namespaces/shop/pods/other", pod("other", node="n2"))
    before = len(fake.requests)
    informer = Informer(fake, PODS, "v1", "Pod", every_namespace=True, field_selector="spec.nodeName=n1", until=fake.monotonic() + 5)
    heard: list[tuple[str, object]] = []
    assert informer.start_from(items, version)
    assert informer.listen(lambda kind, obj: heard.append((kind, obj)))
    fake.go.set()
    informer._thread.join(10)
    assert ("GET", PODS) not in fake.requests[before:], "started from the caller's list: no LIST of its own"
    assert (("GET", f"{PODS}?watch")) in fake.requests[before:], "watched from the list's version"
    assert sorted(informer._seen) == ["shop/web-0", "shop/web-1"]
    assert [(kind, [p["metadata"]["name"] for p in obj] if kind == "RELISTED" else obj["metadata"]["name"]) for kind, obj in heard] == [
        ("RELISTED", ["web-0"]),
        ("ADDED", "web-1"),
    ]
    assert not informer.failed, "its time ended (until): not a failure"
    assert not Informer(fake, PODS, "v1", "Pod").start_from(items, None), "without a version there is nothing to watch from"


def test_a_failed_watch_tells_its_listeners() -> None:
    fake = Streaming()
    fake.fail("GET", f"{PODS}?watch", FakeKube.error(403, "pods is forbidden"))
    informer = Informer(fake, PODS, "v1", "Pod", every_namespace=True, until=fake.monotonic() + 5)
    heard: list[str] = []
    informer.start_from([], "1")
    informer.listen(lambda kind, _obj: heard.append(kind))
    fake.go.set()
    informer._thread.join(10)
    assert informer.failed and not informer.ready()
    assert heard == ["RELISTED", "FAILED"]


def test_an_informer_that_cannot_tell_reads_the_object_at_its_path() -> None:
    fake = FakeKube()
    fake.put("/api/v1/namespaces/shop/pods/web-0", pod("web-0"))
    known = {**pod("web-0"), "metadata": {"name": "web-0", "namespace": "shop", "resourceVersion": "1", "uid": "uid-1"}}
    informer = Informer(fake, PODS, "v1", "Pod", every_namespace=True)
    assert informer.path_of(known) == "/api/v1/namespaces/shop/pods/web-0"
    assert informer.read(known)["metadata"]["name"] == "web-0"
    assert fake.requests == [("GET", "/api/v1/namespaces/shop/pods/web-0")]
    assert Informer(fake, COLLECTION, API, "Machine").path_of(machine()) == f"{COLLECTION}/m-1"
