"""FakeKube (tests/unit/fake_kube.py) keeps the API server's rules that runner
tests rely on: what a stale write, a failed JSON patch test, a watch, an
eviction and a finalizer do. The real server is the reference
(tests/integration); these only keep the fake honest."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import JSON_PATCH

MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines"
MACHINE = f"{MACHINES}/m1"
PODS = "/api/v1/namespaces/ns/pods"
POD = f"{PODS}/web-0"


def machine(**meta) -> dict:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "m1", "namespace": "ns", **meta}}


def test_objects_get_versions_and_uids() -> None:
    kube = FakeKube()
    first = kube.put(MACHINE, machine())
    assert first["metadata"]["resourceVersion"] == "1"
    assert first["metadata"]["uid"]
    second = kube.patch(MACHINE, {"metadata": {"labels": {"a": "b"}}})
    assert int(second["metadata"]["resourceVersion"]) > 1
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert kube.get(MACHINE)["metadata"]["labels"] == {"a": "b"}


def test_a_stale_resource_version_is_a_conflict() -> None:
    kube = FakeKube()
    read = kube.put(MACHINE, machine())
    kube.patch(MACHINE, {"metadata": {"labels": {"someone": "else"}}})
    with pytest.raises(ApiError) as caught:
        kube.patch(MACHINE, {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"], "finalizers": ["x"]}})
    assert caught.value.status == 409
    assert "finalizers" not in kube.get(MACHINE)["metadata"]
    current = kube.get(MACHINE)["metadata"]["resourceVersion"]
    assert kube.patch(MACHINE, {"metadata": {"resourceVersion": current, "finalizers": ["x"]}})["metadata"]["finalizers"] == ["x"]


def test_a_failed_json_patch_test_is_422_and_changes_nothing() -> None:
    kube = FakeKube()
    kube.put(MACHINE, machine(finalizers=["a", "b"]))
    guarded = [{"op": "test", "path": "/metadata/finalizers/0", "value": "b"}, {"op": "remove", "path": "/metadata/finalizers/0"}]
    with pytest.raises(ApiError) as caught:
        kube.patch(MACHINE, guarded, content_type=JSON_PATCH)
    assert caught.value.status == 422
    assert caught.value.method == "PATCH"
    assert caught.value.path == MACHINE
    assert kube.get(MACHINE)["metadata"]["finalizers"] == ["a", "b"]
    guarded[0]["value"] = "a"
    assert kube.patch(MACHINE, guarded, content_type=JSON_PATCH)["metadata"]["finalizers"] == ["b"]


def test_a_missing_object_is_404_and_a_collection_a_list() -> None:
    kube = FakeKube()
    assert kube.get(POD) is None
    assert kube.get("/api/v1/nodes/n1") is None
    assert kube.get("/api/v1/namespaces/ns")["metadata"]["name"] == "ns", "every Namespace exists unless told otherwise"
    kube.missing_namespaces.add("ns")
    assert kube.get("/api/v1/namespaces/ns") is None
    assert kube.list(PODS) == []
    assert kube.list_with_version("/apis/example.com/v1/widgets") == ([], None), "a resource never stored is not served"
    kube.put(POD, {"metadata": {"labels": {"app": "web"}}})
    kube.put(f"{PODS}/db-0", {"metadata": {"labels": {"app": "db"}}})
    assert [p["metadata"]["name"] for p in kube.list(PODS, label_selector="app=web")] == ["web-0"]
    assert [p["metadata"]["name"] for p in kube.list(PODS, field_selector="metadata.name=db-0")] == ["db-0"]


def test_a_create_of_an_existing_name_is_already_exists() -> None:
    kube = FakeKube()
    kube.create(MACHINES, machine())
    with pytest.raises(ApiError) as caught:
        kube.create(MACHINES, machine())
    assert caught.value.status == 409
    assert caught.value.body["reason"] == "AlreadyExists"
    assert kube.create(MACHINES, machine(name="m2"), dry_run=True)["metadata"]["name"] == "m2"
    assert f"{MACHINES}/m2" not in kube.objects


def test_a_watch_replays_the_changes_after_a_version() -> None:
    kube = FakeKube()
    added = kube.put(MACHINE, machine())
    kube.put(f"{MACHINES}/m2", machine(name="m2"))
    kube.patch(MACHINE, {"metadata": {"labels": {"a": "b"}}})
    kube.delete(MACHINE)
    start = kube.clock
    events = list(kube.watch(MACHINES, resource_version=added["metadata"]["resourceVersion"], field_selector="metadata.name=m1", timeout=30))
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert kube.clock == start + 30, "the watch ran until its timeout"
    assert [e["type"] for e in kube.watch(MACHINES)] == ["ADDED", "ADDED", "MODIFIED", "DELETED"]
    assert list(kube.watch(MACHINES, resource_version=events[-1]["object"]["metadata"]["resourceVersion"])) == []


def test_an_eviction_marks_the_pod_terminating_until_it_finishes() -> None:
    kube = FakeKube()
    kube.put(POD, {"metadata": {"namespace": "ns"}})
    kube.create(f"{POD}/eviction", {"metadata": {"name": "web-0", "namespace": "ns"}}, dry_run=True)
    assert "deletionTimestamp" not in kube.get(POD)["metadata"], "a dry run changes nothing"
    assert kube.create(f"{POD}/eviction", {"metadata": {"name": "web-0", "namespace": "ns"}})["status"] == "Success"
    assert kube.get(POD)["metadata"]["deletionTimestamp"]
    kube.finish(POD)
    assert kube.get(POD) is None
    with pytest.raises(ApiError) as caught:
        kube.create(f"{POD}/eviction", {"metadata": {"name": "web-0", "namespace": "ns"}})
    assert caught.value.status == 404


def test_finalizers_hold_a_deletion_until_the_last_is_removed() -> None:
    kube = FakeKube()
    kube.put(MACHINE, machine(finalizers=["a", "b"]))
    assert kube.delete(MACHINE) is True
    held = kube.get(MACHINE)
    assert held["metadata"]["deletionTimestamp"]
    kube.patch(MACHINE, {"metadata": {"finalizers": ["b"]}})
    assert kube.get(MACHINE) is not None
    kube.patch(MACHINE, {"metadata": {"finalizers": None}})
    assert kube.get(MACHINE) is None
    assert kube.delete(MACHINE) is False, "already gone"


def test_an_object_without_finalizers_goes_at_once() -> None:
    kube = FakeKube()
    kube.put(MACHINE, machine())
    kube.delete(MACHINE, dry_run=True)
    assert kube.get(MACHINE) is not None
    kube.delete(MACHINE)
    assert kube.get(MACHINE) is None


def test_a_uid_precondition_protects_a_recreated_object() -> None:
    kube = FakeKube()
    kube.put(MACHINE, machine())
    with pytest.raises(ApiError) as caught:
        kube.delete(MACHINE, body={"preconditions": {"uid": "someone-elses"}})
    assert caught.value.status == 409


def test_fail_queues_errors_for_one_request_and_records_every_attempt() -> None:
    kube = FakeKube()
    kube.put(MACHINE, machine())
    kube.fail("get", MACHINE, FakeKube.error(503, "etcdserver: leader changed"), FakeKube.error(403, "forbidden"))
    with pytest.raises(ApiError) as caught:
        kube.get(MACHINE)
    assert (caught.value.status, caught.value.method, caught.value.path) == (503, "GET", MACHINE)
    with pytest.raises(ApiError):
        kube.get(MACHINE)
    assert kube.get(MACHINE) is not None
    assert kube.requests == [("GET", MACHINE)] * 3
    assert kube.request_count == 3


def test_sleep_moves_the_clock_and_cancel_stops_everything() -> None:
    kube = FakeKube()
    start = kube.monotonic()
    kube.sleep(5)
    assert kube.monotonic() == start + 5
    kube.cancel()
    with pytest.raises(Cancelled):
        kube.sleep(1)
    with pytest.raises(Cancelled):
        kube.get(MACHINE)
