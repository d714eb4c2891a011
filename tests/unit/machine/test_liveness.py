"""A controller's liveness read from its leader-election Lease (_machine/liveness.py):
which Lease, what it says at an instant, and what machine_controller: auto decides from it."""

from __future__ import annotations

import datetime as _dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import COLLECTION, CONTROLLER, UNDECIDED, Actor, who_deletes
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.liveness import (
    FAILED,
    FORBIDDEN,
    FOUND,
    HELD,
    MISSING,
    NO_LEASE,
    SKEW,
    TAKEOVER_FLOOR,
    UNKNOWN,
    VACANT,
    LeaseReading,
    LeaseRef,
    default_lease,
    lease_actor,
    liveness,
    takeover_seconds,
    with_lease_note,
)

T0 = _dt.datetime(2026, 11, 26, 6, 0, 0, tzinfo=_dt.UTC)
CAPI = LeaseRef("capi-system", "controller-leader-election-capi")


def at(seconds: float) -> str:
    return (T0 + _dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(seconds: float) -> float:
    return T0.timestamp() + seconds


def lease(holder: str | None = "capi-host_1f2e", renewed: float = 0.0, duration: int | None = 15) -> LeaseReading:
    spec: dict = {"renewTime": at(renewed), "acquireTime": at(renewed - 100)}
    if holder is not None:
        spec["holderIdentity"] = holder
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return LeaseReading(CAPI, FOUND, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": CAPI.name}, "spec": spec})


def entry(manager: str, seconds: float) -> dict:
    when = (T0 + _dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"manager": manager, "operation": "Update", "time": when, "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {}}


def machine(written_at: float = -600.0, deleted_at: float = 0.0, api_version: str = "cluster.x-k8s.io/v1beta2", spec: dict | None = None) -> dict:
    deleted = (T0 + _dt.timedelta(seconds=deleted_at)).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {"name": "m", "namespace": "ns", "deletionTimestamp": deleted, "managedFields": [entry("capi-manager", written_at)]}
    return {"apiVersion": api_version, "kind": "Machine", "metadata": meta, "spec": spec or {}, "status": {}}


def undecided(m: dict, now: float, grace: float = 10) -> Actor:
    actor = who_deletes(m, "auto", grace, now)
    assert actor.grace, actor
    return actor


# -- which Lease -------------------------------------------------------------------------------------


def test_cluster_api_machines_name_the_core_managers_lease_in_capi_system() -> None:
    assert default_lease(machine()) == CAPI
    assert default_lease(machine(api_version="cluster.x-k8s.io/v1beta1")) == CAPI
    assert str(CAPI) == "capi-system/controller-leader-election-capi"


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("AWSMachineProviderConfig", "cluster-api-provider-aws-leader"),
        ("AzureMachineProviderSpec", "cluster-api-provider-azure-leader"),
        ("GCPMachineProviderSpec", "cluster-api-provider-gcp-leader"),
        ("VSphereMachineProviderSpec", "cluster-api-provider-vsphere-leader"),
    ],
)
def test_openshift_machines_name_their_platforms_machine_controller_lease(kind: str, name: str) -> None:
    m = machine(api_version="machine.openshift.io/v1beta1", spec={"providerSpec": {"value": {"kind": kind}}})
    assert default_lease(m) == LeaseRef("openshift-machine-api", name)


@pytest.mark.parametrize("spec", [{}, {"providerSpec": {"value": {"kind": "BareMetalMachineProviderSpec"}}}, {"providerSpec": {"value": "opaque"}}])
def test_an_openshift_platform_not_listed_has_no_lease(spec: dict) -> None:
    assert default_lease(machine(api_version="machine.openshift.io/v1beta1", spec=spec)) is None


# -- what a Lease says --------------------------------------------------------------------------------


def test_a_held_lease_renewed_within_its_duration_is_held() -> None:
    said = liveness(lease(renewed=0), epoch(14))
    assert (said.state, said.holder) == (HELD, "capi-host_1f2e")
    assert "held by capi-host_1f2e, renewed at 2026-11-26T06:00:00Z (valid 15 s)" in said.reason


def test_the_skew_allowance_keeps_a_lease_held_a_little_past_its_duration() -> None:
    assert liveness(lease(renewed=0), epoch(15 + SKEW)).state == HELD
    assert liveness(lease(renewed=0), epoch(15 + SKEW + 0.5)).state == VACANT


def test_a_renew_time_in_the_future_is_held() -> None:
    """The holder's clock ahead of ours: still held (the safe direction)."""
    assert liveness(lease(renewed=30), epoch(0)).state == HELD


def test_a_lease_without_a_holder_is_vacant_whatever_its_time() -> None:
    said = liveness(lease(holder=None, renewed=0, duration=1), epoch(0))
    assert said.state == VACANT and "released at 2026-11-26T06:00:00Z" in said.reason
    assert liveness(lease(holder="", renewed=0), epoch(0)).state == VACANT


def test_an_expired_lease_is_vacant_since_its_end() -> None:
    said = liveness(lease(renewed=0), epoch(60))
    assert (said.state, said.until) == (VACANT, epoch(15))
    assert "held by capi-host_1f2e until 2026-11-26T06:00:15Z, not renewed since" in said.reason


@pytest.mark.parametrize(
    ("reading", "words"),
    [
        (LeaseReading(None, NO_LEASE), "no Lease is known"),
        (LeaseReading(CAPI, MISSING), "capi-system/controller-leader-election-capi does not exist (leader election may be off)"),
        (LeaseReading(CAPI, FORBIDDEN, detail="403"), "may not be read (403 Forbidden: grant get on leases in capi-system)"),
        (LeaseReading(CAPI, FAILED, detail="503 Service Unavailable"), "could not be read (503 Service Unavailable)"),
        (lease(duration=None), "has no renewTime or leaseDurationSeconds"),
        (lease(duration=0), "has no renewTime or leaseDurationSeconds"),
    ],
)
def test_a_lease_that_cannot_be_judged_is_unknown(reading: LeaseReading, words: str) -> None:
    said = liveness(reading, epoch(0))
    assert said.state == UNKNOWN and words in said.reason, said


def test_the_takeover_window_is_the_lease_duration_with_a_floor() -> None:
    assert takeover_seconds(120) == 120
    assert takeover_seconds(15) == TAKEOVER_FLOOR
    assert takeover_seconds(1) == TAKEOVER_FLOOR


# -- what machine_controller: auto decides -----------------------------------------------------------------


def test_a_held_lease_is_a_live_controller_followed_at_once() -> None:
    m = machine()
    actor, note = lease_actor(undecided(m, epoch(1)), m, lease(renewed=0.5), epoch(1))
    assert actor is not None and (actor.who, actor.manager) == (CONTROLLER, "capi-manager")
    assert actor.reason.endswith("its controller (capi-manager) is live and carries out the deletion"), actor.reason
    assert "held by capi-host_1f2e" in note


def test_a_held_lease_wins_over_a_grace_that_is_over() -> None:
    """A live controller could still act: the collection does not, whatever the grace said."""
    m = machine()
    past = who_deletes(m, "auto", 10, epoch(60))
    assert (past.who, past.grace) == (COLLECTION, True)
    actor, _note = lease_actor(past, m, lease(renewed=58), epoch(60))
    assert actor is not None and actor.who == CONTROLLER


def test_a_lease_vacant_past_any_takeover_lets_the_collection_act_at_once() -> None:
    m = machine(written_at=-600)  # the controller wrote the status before it stopped
    now = epoch(15 + TAKEOVER_FLOOR + SKEW + 1)
    m["metadata"]["deletionTimestamp"] = (T0 + _dt.timedelta(seconds=15 + TAKEOVER_FLOOR + SKEW)).strftime("%Y-%m-%dT%H:%M:%SZ")
    actor, _note = lease_actor(undecided(m, now), m, lease(renewed=0), now)
    assert actor is not None and (actor.who, actor.manager) == (COLLECTION, "capi-manager")
    assert "is vacant (held by capi-host_1f2e until 2026-11-26T06:00:15Z, not renewed since)" in actor.reason
    assert "no controller with leader election can act" in actor.reason


def test_a_released_lease_is_given_the_takeover_floor() -> None:
    m = machine(written_at=-600, deleted_at=0)
    released = lease(holder=None, renewed=0, duration=1)
    soon = epoch(1 + TAKEOVER_FLOOR + SKEW - 1)
    actor, note = lease_actor(undecided(m, soon, grace=3600), m, released, soon)
    assert actor is None and "a standby may still take it over until" in note
    later = epoch(1 + TAKEOVER_FLOOR + SKEW + 1)
    actor, _note = lease_actor(undecided(m, later, grace=3600), m, released, later)
    assert actor is not None and actor.who == COLLECTION


def test_a_lease_vacant_only_recently_leaves_it_to_the_grace() -> None:
    """A standby may be taking it over: no decision, the grace runs."""
    m = machine()
    now = epoch(25)
    actor, note = lease_actor(undecided(m, now, grace=60), m, lease(renewed=0), now)
    assert actor is None
    assert "is vacant" in note and "a standby may still take it over until 2026-11-26T06:00:50Z" in note, note


def test_a_status_write_after_the_lease_went_vacant_is_a_controller_outside_leader_election() -> None:
    m = machine(written_at=300, deleted_at=400)  # written long after the Lease's end (15 s)
    now = epoch(401)
    actor, note = lease_actor(undecided(m, now), m, lease(renewed=0), now)
    assert actor is None
    assert "a controller wrote the Machine's status at 2026-11-26T06:05:00Z, after it went vacant (leader election off?)" in note


def test_a_clock_ahead_of_the_api_servers_trusts_no_vacant_lease() -> None:
    m = machine(written_at=-600, deleted_at=400)
    now = epoch(420)
    actor, note = lease_actor(undecided(m, now, grace=60), m, lease(renewed=0), now, marked_at=epoch(400 + SKEW + 3))
    assert actor is None and "this host's clock runs 8 s ahead of the API server's" in note
    actor, _note = lease_actor(undecided(m, now, grace=60), m, lease(renewed=0), now, marked_at=epoch(400.5))
    assert actor is not None and actor.who == COLLECTION


@pytest.mark.parametrize("reading", [LeaseReading(CAPI, MISSING), LeaseReading(CAPI, FORBIDDEN), LeaseReading(CAPI, FAILED), LeaseReading(None, NO_LEASE)])
def test_an_absent_or_unreadable_lease_leaves_it_to_the_grace(reading: LeaseReading) -> None:
    m = machine()
    actor, note = lease_actor(undecided(m, epoch(1)), m, reading, epoch(1))
    assert actor is None and note


def test_only_a_grace_decision_asks_the_lease() -> None:
    """Told live or absent, a status write since the deletion, or no status writer ever: the Lease has nothing to add."""
    m = machine()
    for actor in (who_deletes(m, "live", 10, epoch(1)), who_deletes(m, "absent", 10, epoch(1))):
        assert lease_actor(actor, m, lease(renewed=0), epoch(1)) == (actor, "")
    answered = machine(written_at=1)
    actor = who_deletes(answered, "auto", 10, epoch(2))
    assert (actor.who, actor.grace) == (CONTROLLER, False)
    never = machine()
    never["metadata"]["managedFields"] = []
    actor = who_deletes(never, "auto", 10, epoch(2))
    assert (actor.who, actor.grace) == (COLLECTION, False)
    assert lease_actor(actor, never, lease(renewed=0), epoch(1)) == (actor, "")


def test_the_grace_says_what_the_lease_said() -> None:
    m = machine()
    waiting = undecided(m, epoch(1))
    assert waiting.who == UNDECIDED
    noted = with_lease_note(waiting, "its controller's Lease capi-system/x does not exist (leader election may be off)")
    assert noted.reason == (
        "waiting up to 10 s for its controller (capi-manager) to answer the deletion"
        " (its controller's Lease capi-system/x does not exist (leader election may be off))"
    )
    assert (noted.wait_until, noted.grace, noted.manager) == (waiting.wait_until, True, "capi-manager")
    live = Actor(CONTROLLER, "its controller (capi-manager) wrote its status", manager="capi-manager")
    assert with_lease_note(live, "anything") is live
    assert with_lease_note(waiting, "") is waiting
