"""The event source's run against the fake transport: what is listed and watched
becomes events, an expired watch or a failure means a new list (a resync), and
cancelling ends it (``_gates/api.py``, ``_gates/run.py``)."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube
from test_gates_logic import openshift

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.logic import GateSourceRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.run import GateSource

OPENSHIFT = "machine.openshift.io/v1beta1"
MACHINES = f"/apis/{OPENSHIFT}/namespaces/openshift-machine-api/machines"
LIST = ("GET", MACHINES)
WATCH = ("GET", MACHINES + "?watch")


def world() -> tuple[FakeKube, GateSource, list[dict]]:
    fake = FakeKube()
    fake.discovery.serve(OPENSHIFT)
    events: list[dict] = []
    source = GateSource(fake, GateSourceRequest.from_args({"hook_owner": "ctl", "namespace": "openshift-machine-api"}), events.append)
    return fake, source, events


def cancel_at(fake: FakeKube, request: tuple[str, str], count: int) -> None:
    """Cancel the run when ``request`` is about to be sent for the ``count``-th time."""
    seen = []

    def hook(method: str, path: str) -> None:
        if (method, path) == request:
            seen.append(1)
            if len(seen) == count:
                fake.cancelled = True

    fake.on_request = hook


def names(events: list[dict]) -> list[tuple[str, str, str]]:
    return [(e["machine_gate"]["machine"]["name"], e["machine_gate"]["point"], e["machine_gate"]["reason"]) for e in events]


def test_gates_found_by_the_list_and_by_the_watch_are_announced_once() -> None:
    fake, source, events = world()
    fake.put(f"{MACHINES}/m-1", openshift({"preDrain": [("backup", "ctl")]}, name="m-1"))
    fake.put(f"{MACHINES}/m-2", openshift({"preDrain": [("backup", "ctl")]}, deleting=False, uid="u-2", name="m-2"))

    def change(method: str, path: str) -> None:
        if (method, path) == WATCH and fake.objects[f"{MACHINES}/m-2"]["metadata"].get("deletionTimestamp") is None:
            fake.delete(f"{MACHINES}/m-2")  # held by its finalizer: the deletion starts
            fake.patch(f"{MACHINES}/m-2", {"status": {"conditions": [{"type": "PreDrainBackupSucceeded", "status": "False"}]}})
        elif (method, path) == WATCH:
            fake.cancelled = True

    fake.on_request = change
    source._follow(OPENSHIFT)

    assert names(events) == [("m-1", "preDrain", "resync"), ("m-2", "preDrain", "watch")]
    assert fake.requests.count(LIST) == 1, "a watch that simply ended is re-opened, not re-listed"


def test_an_expired_watch_is_a_resync() -> None:
    fake, source, events = world()
    fake.put(f"{MACHINES}/m-1", openshift({"preDrain": [("backup", "ctl")]}, name="m-1"))
    fake.fail("GET", MACHINES + "?watch", FakeKube.error(410, "too old resource version"))
    cancel_at(fake, WATCH, 2)

    source._follow(OPENSHIFT)

    assert names(events) == [("m-1", "preDrain", "resync"), ("m-1", "preDrain", "resync")]
    assert fake.requests.count(LIST) == 2


def test_a_failure_the_transport_gave_up_on_means_a_pause_and_a_new_list() -> None:
    fake, source, events = world()
    fake.put(f"{MACHINES}/m-1", openshift({"preDrain": [("backup", "ctl")]}, name="m-1"))
    fake.fail("GET", MACHINES + "?watch", FakeKube.error(503, "etcdserver: request timed out"))
    cancel_at(fake, WATCH, 2)
    started = fake.clock

    source._follow(OPENSHIFT)

    assert names(events) == [("m-1", "preDrain", "resync"), ("m-1", "preDrain", "resync")]
    assert fake.clock - started >= 1, "it paused before reading again"
    assert source.failure is None


def test_the_first_contact_must_succeed() -> None:
    fake, source, _events = world()
    fake.fail("GET", MACHINES, FakeKube.error(403, 'machines.machine.openshift.io is forbidden: User "nobody" cannot list resource "machines"'))
    with pytest.raises(MachineError, match=r"Cannot follow Machines: .*403.*forbidden"):
        source.start()
    assert not source.alive


def test_a_namespace_that_does_not_exist_fails_the_start_instead_of_waiting_forever() -> None:
    fake, source, _events = world()
    fake.missing_namespaces.add("openshift-machine-api")
    with pytest.raises(MachineError, match=r"^Namespace openshift-machine-api not found, so no Machine can be in it"):
        source.start()
    assert not source.alive


def test_cancelling_stops_the_threads() -> None:
    fake, source, _events = world()
    fake.cancelled = True
    source._follow(OPENSHIFT)  # returns at once
    assert source.failure is None


def test_pauses_grow_while_failures_go_on_and_start_short_again_once_the_api_answers() -> None:
    fake, source, _events = world()
    fake.put(f"{MACHINES}/m-1", openshift({"preDrain": [("backup", "ctl")]}, name="m-1"))
    unavailable = FakeKube.error(503, "etcdserver: request timed out")
    fake.fail("GET", MACHINES, unavailable, unavailable, unavailable)  # three lists fail, the fourth answers
    fake.fail("GET", MACHINES + "?watch", unavailable)  # then the watch fails once
    pauses: list[float] = []
    sleep = fake.sleep

    def timed_sleep(seconds: float) -> None:
        pauses.append(seconds)
        sleep(seconds)

    fake.sleep = timed_sleep
    cancel_at(fake, WATCH, 2)

    source._follow(OPENSHIFT)

    assert pauses[:4] == [1, 2, 5, 1]
