"""The task's watch-fed Machines (``_machine/feed.py``): the task's own Machines kept with the
control-plane Machines beside them, and the fall-back to a read when an informer cannot tell
(the informer itself: tests/unit/k8s/test_k8s_informer.py). The watch itself runs against the
real API server (tests/integration/test_delete_machine.py)."""

from __future__ import annotations

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.feed import MachineFeeds

API = "cluster.x-k8s.io/v1beta2"
COLLECTION = f"/apis/{API}/namespaces/ns/machines"


def machine(name: str = "m-1", version: str = "10", uid: str = "u-1", **meta) -> dict:
    return {"apiVersion": API, "kind": "Machine", "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": version, **meta}}


def test_control_plane_machines_are_kept_beside_the_tasks_own() -> None:
    feeds = MachineFeeds(FakeKube(), [{"name": "m-1", "namespace": "ns"}])
    fed = feeds.machines(API, "ns")
    control_plane = machine(name="cp-0", version="5", uid="u-cp", labels={"cluster.x-k8s.io/control-plane": "", "cluster.x-k8s.io/cluster-name": "c"})
    for obj in (control_plane, machine(name="worker-9", version="6", uid="u-9")):
        fed._on_event({"type": "ADDED", "object": obj})
    assert set(fed._seen) == {"cp-0"}


def test_without_its_watch_the_feed_reads_and_answers_nothing_itself() -> None:
    fake = FakeKube()
    stored = fake.create(COLLECTION, machine(version="1"))
    feeds = MachineFeeds(fake, [{"name": "m-1", "namespace": "ns"}])
    assert feeds.machine(API, "ns", "m-1") == (False, None)  # the stand-in runs no background watch
    assert feeds.cluster(API, "ns", "c") == (False, None)
    assert feeds.control_plane_machines(API, "ns", "c") is None
    before = len(fake.requests)
    current = feeds.read({**stored, "apiVersion": API})
    assert current["metadata"]["name"] == "m-1"
    assert [method for method, _path in fake.requests[before:]] == ["GET"]
    feeds.stop()
