"""machine_condition's run (``_condition/run.py``) against the in-memory stand-in:
the condition set on each chosen Machine's status with an Event, a second run
changing nothing, removal, check mode writing nothing, and a refusal on one
Machine stopping the run before any write."""

from __future__ import annotations

import pytest
from fake_machines import CAPI, CAPI_NS, OPENSHIFT_NS, cluster, machine_path, put_capi, put_openshift

from ansible_collections.lifecycle.machine.plugins.module_utils._condition.logic import ConditionRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._condition.run import manage_condition
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection

BLUE = MachineSelection(label_selectors=("pool=blue",))


def request(*, present: bool = True, event: dict | None = None, check_mode: bool = False, **more) -> ConditionRequest:
    reason = "Flushed" if present else ""
    return ConditionRequest(condition_type="BackupDone", present=present, reason=reason, msg="done", selection=BLUE, event=event, check_mode=check_mode, **more)


def conditions(fake, path: str) -> dict:
    return {c["type"]: c for c in fake.objects[path]["status"].get("conditions") or []}


def test_the_condition_and_its_event_go_on_every_chosen_machine() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_capi(fake, "m-2", labels={"pool": "blue"})
    put_openshift(fake, "other")

    result = manage_condition(fake, request(event={"type": None, "reason": None, "msg": None}))
    assert result["changed"] is True and result["condition_type"] == "BackupDone"
    assert sorted((m["name"], m["action"]) for m in result["machines"]) == [("m-1", "set"), ("m-2", "set")]
    for path in (machine_path("m-1"), machine_path("m-2", CAPI, CAPI_NS)):
        condition = conditions(fake, path)["BackupDone"]
        assert (condition["status"], condition["reason"], condition["message"]) == ("True", "Flushed", "done")
    assert ("PATCH", machine_path("m-1") + "/status") in fake.requests, "conditions are written through the status subresource"
    events = [obj for path, obj in fake.objects.items() if "/events/" in path]
    assert sorted((e["involvedObject"]["name"], e["reason"], e["message"]) for e in events) == [("m-1", "Flushed", "done"), ("m-2", "Flushed", "done")]
    assert sorted(result["diff"]["after"]) == [f"{CAPI_NS}/m-2", f"{OPENSHIFT_NS}/m-1"]
    assert "BackupDone" not in conditions(fake, machine_path("other"))

    again = manage_condition(fake, request())
    assert again["changed"] is False and [m["action"] for m in again["machines"]] == ["none", "none"]


def test_removing_the_condition() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    manage_condition(fake, request())
    result = manage_condition(fake, request(present=False))
    assert [m["action"] for m in result["machines"]] == ["removed"]
    assert "BackupDone" not in conditions(fake, machine_path("m-1"))


def test_check_mode_changes_nothing_but_reports_the_change() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    result = manage_condition(fake, request(check_mode=True, event={"type": None, "reason": None, "msg": None}))
    assert result["changed"] is True
    assert conditions(fake, machine_path("m-1")) == {}
    assert [path for path in fake.objects if "/events/" in path] == []


def test_a_refused_machine_stops_the_run_before_any_write() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_capi(fake, "m-2", labels={"pool": "blue"})
    # A v1beta2 condition's reason must be CamelCase: refused on the Cluster API Machine.
    with pytest.raises(MachineError, match=r"^Cannot set condition BackupDone on Machine ns/m-2: "):
        manage_condition(fake, ConditionRequest(condition_type="BackupDone", reason="not camel", msg="done", selection=BLUE))
    assert [method for method, _path in fake.requests if method != "GET"] == []
