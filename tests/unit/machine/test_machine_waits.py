"""_machine/waits.py's reading of a controller's Lease: one read serves the Machines a task
decides together, and machine_controller: auto follows at once, acts at once or gives the grace
as the Lease says (the rule itself: test_liveness.py)."""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._machine import waits
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import COLLECTION, CONTROLLER
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.openshift import DRAIN_REQUEUED
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.liveness import FAILED, FORBIDDEN, FOUND, MISSING, NO_LEASE

LEASE = "/apis/coordination.k8s.io/v1/namespaces/capi-system/leases/controller-leader-election-capi"


@pytest.fixture(autouse=True)
def fresh_leases() -> Iterator[None]:
    waits.forget_leases()
    yield
    waits.forget_leases()


def stamp(when: _dt.datetime, micro: bool = False) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def put_machine(fake: FakeKube, name: str, *, written_ago: float = 3600.0) -> dict:
    """A Cluster API Machine being deleted now, whose status a controller wrote ``written_ago`` seconds ago."""
    written = {
        "manager": "capi-manager",
        "operation": "Update",
        "time": stamp(now() - _dt.timedelta(seconds=written_ago)),
        "subresource": "status",
        "fieldsType": "FieldsV1",
        "fieldsV1": {},
    }
    meta = {"name": name, "namespace": "ns", "deletionTimestamp": stamp(now()), "finalizers": ["machine.cluster.x-k8s.io"], "managedFields": [written]}
    body = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": meta, "spec": {}, "status": {}}
    return fake.put(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/{name}", body)


def put_lease(fake: FakeKube, *, holder: str = "capi-0_abc", renewed_ago: float = 1.0, duration: int = 15) -> None:
    spec = {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": stamp(now() - _dt.timedelta(seconds=renewed_ago), micro=True)}
    fake.put(LEASE, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "controller-leader-election-capi"}, "spec": spec})


def watched(fake: FakeKube) -> bool:
    return any(path.endswith("?watch") for _method, path in fake.requests)


def lease_reads(fake: FakeKube) -> int:
    return sum(1 for request in fake.requests if request == ("GET", LEASE))


def test_a_held_lease_follows_the_controller_without_waiting() -> None:
    fake = FakeKube()
    put_lease(fake)
    machine = put_machine(fake, "m1")
    current, actor = waits.actor_of(fake.fork(), machine, "auto", 10, marked_at=None)
    assert current == machine
    assert (actor.who, actor.manager) == (CONTROLLER, "capi-manager"), actor
    assert "Lease capi-system/controller-leader-election-capi is held by capi-0_abc" in actor.reason
    assert not watched(fake), "no grace was waited for"


def test_one_read_of_the_lease_serves_every_machine_decided_together() -> None:
    fake = FakeKube()
    put_lease(fake)
    for name in ("m1", "m2", "m3"):
        _current, actor = waits.actor_of(fake.fork(), put_machine(fake, name), "auto", 10)
        assert actor.who == CONTROLLER
    assert lease_reads(fake) == 1, fake.requests
    fake.clock += waits.LEASE_REUSE
    waits.actor_of(fake.fork(), put_machine(fake, "m4"), "auto", 10)
    assert lease_reads(fake) == 2, "a later decision reads it again"


def test_a_lease_vacant_for_good_lets_the_collection_act_at_once() -> None:
    fake = FakeKube()
    put_lease(fake, renewed_ago=600)
    machine = put_machine(fake, "m1", written_ago=900)
    _current, actor = waits.actor_of(fake.fork(), machine, "auto", 10)
    assert (actor.who, actor.manager) == (COLLECTION, "capi-manager"), actor
    assert "is vacant" in actor.reason and "no controller with leader election can act" in actor.reason
    assert not watched(fake)


def test_a_forbidden_lease_gives_the_grace_and_says_why() -> None:
    fake = FakeKube()
    fake.fail("GET", LEASE, FakeKube.error(403, 'leases.coordination.k8s.io "controller-leader-election-capi" is forbidden'))
    machine = put_machine(fake, "m1")
    _current, actor = waits.actor_of(fake.fork(), machine, "auto", 10, marked_at=now().timestamp())
    assert actor.who == COLLECTION, actor
    assert "did not answer within 10 s of the deletion" in actor.reason
    assert "may not be read (403 Forbidden: grant get on leases in capi-system)" in actor.reason
    assert watched(fake), "the grace was waited for, watching the Machine"


def test_a_missing_lease_gives_the_grace() -> None:
    fake = FakeKube()
    machine = put_machine(fake, "m1")
    _current, actor = waits.actor_of(fake.fork(), machine, "auto", 10, marked_at=now().timestamp())
    assert actor.who == COLLECTION and "does not exist (leader election may be off)" in actor.reason, actor
    assert watched(fake)


def test_a_held_lease_after_the_grace_still_follows() -> None:
    fake = FakeKube()
    put_lease(fake)
    machine = put_machine(fake, "m1")
    _current, actor = waits.actor_of(fake.fork(), machine, "auto", 10, marked_at=now().timestamp() - 60)
    assert actor.who == CONTROLLER, actor


def test_told_or_answered_no_lease_is_read() -> None:
    fake = FakeKube()
    put_lease(fake)
    machine = put_machine(fake, "m1")
    for setting in ("live", "absent"):
        waits.actor_of(fake.fork(), machine, setting, 10)
    answered = put_machine(fake, "m2", written_ago=-1)
    _current, actor = waits.actor_of(fake.fork(), answered, "auto", 10)
    assert actor.who == CONTROLLER and "wrote its status" in actor.reason
    assert lease_reads(fake) == 0


def test_read_lease_turns_every_answer_into_a_reading() -> None:
    fake = FakeKube()
    ref = waits.default_lease(put_machine(fake, "m1"))
    assert waits.read_lease(fake, ref).outcome == MISSING
    put_lease(fake)
    assert waits.read_lease(fake, ref).outcome == FOUND
    fake.fail("GET", LEASE, FakeKube.error(403), FakeKube.error(503, "etcd timed out"))
    assert waits.read_lease(fake, ref).outcome == FORBIDDEN
    failed = waits.read_lease(fake, ref)
    assert failed.outcome == FAILED and failed.detail
    assert waits.read_lease(fake, None).outcome == NO_LEASE
    fake.cancel()
    with pytest.raises(Cancelled):
        waits.read_lease(fake, ref)


def test_the_refused_pods_and_their_namespaces_budgets_are_read_only_when_named() -> None:
    kube = FakeKube()
    body = {"metadata": {"name": "db-0", "namespace": "apps", "labels": {"app": "db"}}, "spec": {"nodeName": "n-1"}}
    kube.put("/api/v1/namespaces/apps/pods/db-0", body)
    kube.put("/api/v1/namespaces/apps/pods/web-0", {**body, "metadata": {"name": "web-0", "namespace": "apps"}})
    budget = {"metadata": {"name": "db", "namespace": "apps"}, "spec": {"maxUnavailable": 0}}
    kube.put("/apis/policy/v1/namespaces/apps/poddisruptionbudgets/db", budget)
    assert waits.read_refused_pods(lambda: kube, "n-1", []) == ({}, [], None) and kube.request_count == 0
    pods, budgets, unread = waits.read_refused_pods(lambda: kube, "n-1", ["apps/db-0", "apps/gone-0"])
    assert (sorted(pods), pods["apps/gone-0"], [b["metadata"]["name"] for b in budgets or []], unread) == (
        ["apps/db-0", "apps/gone-0", "apps/web-0"],
        None,
        ["db"],
        None,
    )
    assert kube.request_count == 2  # the Node's Pods, one namespace's budgets


def test_budgets_that_cannot_be_read_say_why() -> None:
    kube = FakeKube()
    kube.fail("GET", "/apis/policy/v1/namespaces/apps/poddisruptionbudgets", FakeKube.error(403, "poddisruptionbudgets is forbidden"))
    _pods, budgets, unread = waits.read_refused_pods(lambda: kube, None, ["apps/db-0"])
    assert budgets is None and unread is not None and "forbidden" in unread


def test_the_newest_drain_requeued_event_of_the_machine_is_its_drain_report() -> None:
    kube = FakeKube()
    machine = {"metadata": {"name": "worker-0", "namespace": "mapi", "uid": "u-1"}}

    def event(name: str, uid: str, reason: str, last: str, message: str) -> None:
        body = {"metadata": {"name": name, "namespace": "mapi"}, "involvedObject": {"uid": uid}, "reason": reason, "lastTimestamp": last}
        kube.put(f"/api/v1/namespaces/mapi/events/{name}", {**body, "message": message})

    assert waits.read_drain_report(kube, machine, DRAIN_REQUEUED) is None
    event("a", "u-1", "DrainRequeued", "2026-11-27T10:00:00Z", "Node drain requeued: older")
    event("b", "u-1", "DrainRequeued", "2026-11-27T10:00:20Z", "Node drain requeued: newest")
    event("c", "u-2", "DrainRequeued", "2026-11-27T10:00:40Z", "another Machine (an earlier one of the same name)")
    event("d", "u-1", "DrainProceeds", "2026-11-27T10:00:40Z", "another reason")
    assert waits.read_drain_report(kube, machine, DRAIN_REQUEUED) == "Node drain requeued: newest"
    assert waits.read_drain_report(kube, {"metadata": {"name": "worker-0", "namespace": "mapi"}}, DRAIN_REQUEUED) is None  # no UID: no guess


def test_events_that_cannot_be_read_give_no_drain_report() -> None:
    kube = FakeKube()
    kube.fail("GET", "/api/v1/namespaces/mapi/events", FakeKube.error(403, "events is forbidden"))
    assert waits.read_drain_report(kube, {"metadata": {"name": "worker-0", "namespace": "mapi", "uid": "u-1"}}, DRAIN_REQUEUED) is None
