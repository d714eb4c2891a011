"""The one list-and-watch informer (``_k8s/informer.py``): which copy is newer, what a watch event
and a relist leave, and the fall-back to a read when it cannot tell. The watch itself runs against
the real API server (tests/integration/test_delete_machine.py)."""

from __future__ import annotations

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
