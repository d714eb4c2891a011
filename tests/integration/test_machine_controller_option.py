"""machine_delete's ``machine_controller`` on the plain control plane (no machine
controller runs here; tests/integration/test_live_controller.py runs the real ones):

- told ``live``, the collection marks the Machine and writes nothing else -
  no cordon, no eviction - and times out naming the way to take over; told
  ``absent`` afterwards, it carries the deletion out;
- with ``auto``, a Machine whose status another writer (a controller that has
  since stopped) once wrote is given ``controller_grace`` seconds, then the
  collection carries the deletion out.
"""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

pytestmark = pytest.mark.slow


def _entry(result: dict) -> dict:
    assert len(result["machines"]) == 1, result
    return result["machines"][0]


def test_told_live_it_only_marks_and_times_out_then_absent_takes_over(*, flavour, kube, victim, run_module) -> None:
    machine = victim()
    args = {"machines": [{"name": machine.name, "namespace": machine.namespace}], "drain_timeout": 3, "terminate_timeout": 30}
    live = run_module("machine_delete", {**args, "machine_controller": "live"})
    entry = _entry(live)
    assert (entry["status"], entry["carried_out_by"], entry["step"]) == ("failed", "controller", "drain"), entry
    assert "Timed out after 3 s waiting for its controller to finish the drain phase" in entry["message"], entry["message"]
    assert "machine_controller: absent" in entry["message"], entry["message"]
    # Marked, nothing else: the Node is schedulable, both Pods run on it, the Machine is held.
    current = kube.get(machine.path)
    assert current["metadata"].get("deletionTimestamp") and current["metadata"].get("finalizers"), current["metadata"]
    assert not kube.get(f"/api/v1/nodes/{machine.node}")["spec"].get("unschedulable")
    assert sorted(p["spec"]["nodeName"] for p in machine.web_pods() if not p["metadata"].get("deletionTimestamp")) == [machine.node, machine.node]

    taken_over = run_module("machine_delete", {**args, "drain_timeout": 120, "machine_controller": "absent"})
    entry = _entry(taken_over)
    assert entry["carried_out_by"] == "collection", entry
    expected = "awaiting_instance_termination" if flavour == "openshift" else "done"
    assert entry["status"] == expected, taken_over["progress"]
    assert all(p["spec"].get("nodeName") != machine.node for p in machine.web_pods() if not p["metadata"].get("deletionTimestamp"))


def test_auto_gives_a_controller_that_once_wrote_the_status_its_grace_then_acts(*, flavour, kubeconfig, victim, run_module) -> None:
    machine = victim()
    # A controller served this Machine once (it wrote its status), then stopped.
    stopped_controller = api_from_kubeconfig(kubeconfig, user_agent="stopped-controller/0.1")
    stopped_controller.patch(machine.path, {"status": {"phase": "Running"}}, subresource_status=True)
    result = run_module("machine_delete", {"machines": [{"name": machine.name, "namespace": machine.namespace}], "controller_grace": 2, "drain_timeout": 120})
    entry = _entry(result)
    assert (entry["carried_out_by"], entry["controller"]) == ("collection", "stopped-controller"), entry
    assert entry["status"] == ("awaiting_instance_termination" if flavour == "openshift" else "done"), result["progress"]
