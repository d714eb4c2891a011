"""machine_mark_for_deletion's run (``_mark/run.py``) against the in-memory
stand-in: the flavour's finalizer first, then the deletion (of the Machine read,
by UID); a Machine already being deleted or gone is done; a vetted Machine is
left as it is; check mode writes nothing."""

from __future__ import annotations

import pytest
from fake_machines import CAPI, CAPI_NS, OPENSHIFT, OPENSHIFT_NS, cluster, machine_path, put_capi, put_openshift

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection
from ansible_collections.lifecycle.machine.plugins.module_utils._mark.run import mark_for_deletion

BLUE = MachineSelection(label_selectors=("pool=blue",))


def test_each_chosen_machine_gets_the_finalizer_then_is_deleted() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_capi(fake, "m-2", labels={"pool": "blue"})
    put_openshift(fake, "other")

    result = mark_for_deletion(fake, BLUE, check_mode=False)
    assert result["changed"] is True
    by_name = {m["name"]: m for m in result["machines"]}
    assert {name: (m["action"], m["finalizer_added"], m["held"]) for name, m in by_name.items()} == {
        "m-1": ("marked", True, True),
        "m-2": ("marked", True, True),
    }
    assert by_name["m-2"]["cluster"] == "c", "a Cluster API Machine names the workload cluster its Node is in"
    openshift, capi = fake.objects[machine_path("m-1")], fake.objects[machine_path("m-2", CAPI, CAPI_NS)]
    assert openshift["metadata"]["finalizers"] == ["machine.machine.openshift.io"] and openshift["metadata"]["deletionTimestamp"]
    assert capi["metadata"]["finalizers"] == ["machine.cluster.x-k8s.io"] and capi["metadata"]["deletionTimestamp"]
    assert by_name["m-1"]["deletion_timestamp"] == openshift["metadata"]["deletionTimestamp"]
    # The finalizer is written before the deletion is asked for.
    writes = [(method, path) for method, path in fake.requests if method in ("PATCH", "DELETE") and path == machine_path("m-1")]
    assert writes == [("PATCH", machine_path("m-1")), ("DELETE", machine_path("m-1"))]
    assert result["diff"]["after"][f"{OPENSHIFT_NS}/m-1"] == {"deleting": True, "finalizers": ["machine.machine.openshift.io"], "held": True}
    assert "deletionTimestamp" not in fake.objects[machine_path("other")]["metadata"]


def test_a_machine_being_deleted_is_left_as_it_is_and_a_second_run_changes_nothing() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", deleting=True)
    selection = MachineSelection(machine="m-1", namespace=OPENSHIFT_NS)
    result = mark_for_deletion(fake, selection, check_mode=False)
    (entry,) = result["machines"]
    assert (result["changed"], entry["action"], entry["finalizer_added"], entry["held"]) == (False, "already_deleting", False, True)
    assert [method for method, _path in fake.requests if method != "GET"] == []


def test_a_machine_that_is_gone_is_absent_unless_its_namespace_is_gone_too() -> None:
    fake = cluster()
    result = mark_for_deletion(fake, MachineSelection(machine="m-9", namespace=OPENSHIFT_NS, api_version=OPENSHIFT), check_mode=False)
    assert result["changed"] is False and result["machines"][0]["action"] == "absent"
    fake.missing_namespaces.add("typo")
    with pytest.raises(MachineError, match=r"^Namespace typo not found"):
        mark_for_deletion(fake, MachineSelection(machine="m-9", namespace="typo", api_version=OPENSHIFT), check_mode=False)


def test_vet_refuses_a_machine_before_anything_is_written() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})

    def vet(machine: dict) -> None:
        raise MachineError(f"not {machine['metadata']['name']}")

    with pytest.raises(MachineError, match="not m-1"):
        mark_for_deletion(fake, BLUE, check_mode=False, vet=vet)
    assert [method for method, _path in fake.requests if method != "GET"] == []


def test_check_mode_changes_nothing_but_reports_the_change() -> None:
    fake = cluster()
    before = put_openshift(fake, "m-1", labels={"pool": "blue"})
    result = mark_for_deletion(fake, BLUE, check_mode=True)
    assert result["changed"] is True and result["machines"][0]["action"] == "marked"
    assert fake.objects[machine_path("m-1")]["metadata"] == before["metadata"]
