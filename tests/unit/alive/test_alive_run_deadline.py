"""cluster_alive's deadline (pure logic against the in-memory stand-in): a
deprovision that waits has one deadline, wait_timeout from its start, given to
the transport where the task's KubeApi is made; the wait ends there, and an
API still failing then ends the task as timed out. That a server that stops
answering ends the task then is proven against the real API server
(tests/integration/test_cluster_alive.py)."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import ALIVE_API_VERSION, AliveRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._alive.run import manage_alive
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

NS = "openshift-config"
PATH = f"/apis/{ALIVE_API_VERSION}/namespaces/{NS}/alives/cluster"
HOLDER = "buckets.storage.example.com/cleanup"


def world(*finalizers: str) -> FakeKube:
    fake = FakeKube()
    fake.discovery.serve(ALIVE_API_VERSION, {"kind": "Alive", "name": "alives", "namespaced": True})
    metadata = {"name": "cluster", "namespace": NS, **({"finalizers": list(finalizers)} if finalizers else {})}
    fake.put(PATH, {"apiVersion": ALIVE_API_VERSION, "kind": "Alive", "metadata": metadata})
    return fake


def warnings() -> list[str]:
    return []


@pytest.mark.parametrize(
    ("state", "wait", "check_mode", "deadline"),
    [("absent", True, False, 1000.0 + 30), ("absent", False, False, None), ("absent", True, True, None), ("present", True, False, None)],
)
def test_the_transport_has_the_deadline_of_a_deprovision_that_waits(state, wait, check_mode, deadline) -> None:
    fake = world()
    manage_alive(fake, AliveRequest(state=state, wait=wait, wait_timeout=30), check_mode, warnings().append)
    assert [fork.deadline for fork in fake.forks] == [deadline]


def test_the_wait_ends_at_the_tasks_deadline() -> None:
    fake = world(HOLDER)
    started = fake.monotonic()
    with pytest.raises(MachineError) as failed:
        manage_alive(fake, AliveRequest(state="absent", wait=True, wait_timeout=30), False, warnings().append)
    assert failed.value.result["timed_out"] is True and failed.value.result["deleted"] is False
    assert fake.monotonic() == started + 30 == fake.forks[0].deadline


def test_an_api_still_failing_at_the_deadline_is_a_timeout() -> None:
    fake = world(HOLDER)
    error = ApiError(0, "no answer from https://api within the read timeout of 30 s", None, attempts=1)
    error.out_of_time = True  # the transport was still retrying when the task's deadline came
    fake.fail("DELETE", PATH, error)
    with pytest.raises(MachineError) as failed:
        manage_alive(fake, AliveRequest(state="absent", wait=True, wait_timeout=30), False, warnings().append)
    assert failed.value.msg.startswith("Kubernetes API error: DELETE Alive openshift-config/cluster: no answer from https://api")
    assert failed.value.result == {"status": 0, "timed_out": True}
    other = ApiError(403, "Forbidden", {"message": "alives is forbidden"})
    fake.fail("DELETE", PATH, other)
    with pytest.raises(ApiError):
        manage_alive(fake, AliveRequest(state="absent", wait=True, wait_timeout=30), False, warnings().append)
