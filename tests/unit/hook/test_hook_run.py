"""machine_hook's run (``_hook/run.py``) against the in-memory stand-in: the hook
written to each chosen Machine of either flavour, a second run changing nothing,
a release recording success (condition and Event) before the hook goes, check
mode writing nothing, and a refusal before any write."""

from __future__ import annotations

import pytest
from fake_machines import CAPI, CAPI_NS, OPENSHIFT_NS, cluster, machine_path, put_capi, put_openshift

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._hook.logic import HookRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._hook.run import manage_hook
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection

CAPI_KEY = "pre-drain.delete.hook.machine.cluster.x-k8s.io/migrate"


def hook(state: str = "present", *, owner: str | None = "team-a", selection: MachineSelection | None = None, check_mode: bool = False, **more) -> HookRequest:
    return HookRequest(
        point="preDrain",
        name="migrate",
        owner=owner,
        present=state == "present",
        selection=selection or MachineSelection(label_selectors=("pool=blue",)),
        check_mode=check_mode,
        released=state == "released",
        **more,
    )


def test_the_hook_goes_on_every_chosen_machine_and_a_second_run_changes_nothing() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_capi(fake, "m-2", labels={"pool": "blue"})
    put_openshift(fake, "other", labels={"pool": "green"})

    result = manage_hook(fake, hook())
    assert result["changed"] is True
    assert sorted((m["name"], m["flavour"], m["action"]) for m in result["machines"]) == [("m-1", "openshift", "added"), ("m-2", "clusterapi", "added")]
    assert fake.objects[machine_path("m-1")]["spec"]["lifecycleHooks"]["preDrain"] == [{"name": "migrate", "owner": "team-a"}]
    assert fake.objects[machine_path("m-2", CAPI, CAPI_NS)]["metadata"]["annotations"] == {CAPI_KEY: "team-a"}
    assert sorted(result["diff"]["after"]) == [f"{CAPI_NS}/m-2", f"{OPENSHIFT_NS}/m-1"]
    assert fake.objects[machine_path("other")]["spec"]["lifecycleHooks"] == {}

    again = manage_hook(fake, hook())
    assert again["changed"] is False and "diff" not in again


def test_a_release_records_success_with_an_event_before_the_hook_goes() -> None:
    fake = cluster()
    put_capi(fake, "m-2", annotations={CAPI_KEY: "team-a"})
    result = manage_hook(fake, hook("released", owner=None, selection=MachineSelection(machine="m-2", namespace=CAPI_NS)))
    (entry,) = result["machines"]
    assert (entry["action"], entry["changed"], entry["condition_changed"]) == ("removed", True, True)
    stored = fake.objects[machine_path("m-2", CAPI, CAPI_NS)]
    assert stored["metadata"]["annotations"] == {}
    (condition,) = [c for c in stored["status"]["conditions"] if c["type"] == "PreDrainMigrateSucceeded"]
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "HookSucceeded", "preDrain hook migrate of team-a succeeded")
    (event,) = [obj for path, obj in fake.objects.items() if path.startswith(f"/api/v1/namespaces/{CAPI_NS}/events/")]
    assert (event["reason"], event["type"]) == ("HookSucceeded", "Normal")
    # The condition is written before the hook goes, so that a run stopped in between finds the work recorded.
    written = [(method, path) for method, path in fake.requests if method in ("PATCH", "POST")]
    assert written[0] == ("PATCH", machine_path("m-2", CAPI, CAPI_NS) + "/status")


def test_check_mode_changes_nothing_but_reports_the_change() -> None:
    fake = cluster()
    before = put_openshift(fake, "m-1", labels={"pool": "blue"})
    result = manage_hook(fake, hook(check_mode=True))
    assert result["changed"] is True
    assert fake.objects[machine_path("m-1")]["spec"] == before["spec"]


def test_a_refused_machine_stops_the_run_before_any_write() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_openshift(fake, "m-3", labels={"pool": "blue"}, deleting=True)  # new hooks are refused once deletion starts
    with pytest.raises(MachineError, match=r"^Cannot add preDrain hook migrate on Machine openshift-machine-api/m-3: pre-drain hooks are immutable"):
        manage_hook(fake, hook())
    assert [method for method, _path in fake.requests if method != "GET"] == []


def test_adding_a_hook_needs_an_owner() -> None:
    with pytest.raises(MachineError, match="owner is required to add hook migrate"):
        manage_hook(cluster(), hook(owner=None))
