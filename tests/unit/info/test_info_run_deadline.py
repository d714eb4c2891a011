"""machine_info's deadline (pure logic against the in-memory stand-in): a task that waits has one deadline,
wait_timeout from its start, given to the transport where the task's KubeApi is made; the wait ends there."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._info.logic import InfoRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._info.run import read_machines
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection

OPENSHIFT = "machine.openshift.io/v1beta1"
NS = "openshift-machine-api"


def world() -> FakeKube:
    fake = FakeKube()
    fake.discovery.serve(OPENSHIFT)
    fake.put(f"/apis/{OPENSHIFT}/namespaces/{NS}/machines/m1", {"apiVersion": OPENSHIFT, "kind": "Machine", "metadata": {"name": "m1", "namespace": NS}})
    return fake


@pytest.mark.parametrize(("wait", "deadline"), [(True, 1000.0 + 40), (False, None)])
def test_the_transport_has_the_deadline_of_a_task_that_waits(wait, deadline) -> None:
    fake = world()
    selection = MachineSelection(machine="gone", namespace=NS)
    read_machines(fake, InfoRequest(selection=selection, wait=wait, wait_timeout=40))
    assert [fork.deadline for fork in fake.forks] == [deadline]


def test_the_wait_ends_at_the_tasks_deadline() -> None:
    fake = world()
    started = fake.monotonic()
    with pytest.raises(MachineError, match="Timed out after 40 s waiting for Machine openshift-machine-api/m1 to be deleted") as failed:
        read_machines(fake, InfoRequest(selection=MachineSelection(namespace=NS), wait=True, wait_timeout=40))
    assert fake.monotonic() == started + 40 == fake.forks[0].deadline
    assert failed.value.result["waited"] == 40
