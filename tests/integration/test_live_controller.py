"""machine_delete beside a live machine controller: it never races it.

The real Cluster API manager and OpenShift machine controller (hack/controllers.py)
run beside the collection. A Machine the controller reconciles is marked by
``machine_delete`` and then carried out by the controller alone - the task
follows it through the conditions it writes and reports the deletion as the
controller did it; a Machine no controller serves (in the same control planes)
is carried out by the collection. The audit logs prove who did what: every
eviction, infrastructure and Node deletion of a controller's Machine is the
controller's, the collection's only write on it is the deletion request.
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
import time
from pathlib import Path

import controllers
import pytest
import realctl
from conftest import REPO, ansible_env, read_audit_log, run_module_with
from khelpers import wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]

OURS = "lifecycle.machine"


def _writes_by(audit: Path, agent: str, resource: str, namespace: str, name: str, *, since: str = "") -> list[str]:
    """The verbs of the writes a user agent holding ``agent`` sent to one object (its
    subresources included), from ``since`` on (an RFC 3339 time: the test's own set-up,
    which shares the collection's user agent, comes before)."""
    return [
        event["verb"] + (f"/{event['objectRef']['subresource']}" if event["objectRef"].get("subresource") else "")
        for event in read_audit_log(audit, namespace=namespace or None, resource=resource)
        if event["objectRef"].get("name") == name
        and agent in event.get("userAgent", "")
        and event["verb"] not in ("get", "list", "watch")
        and event.get("requestReceivedTimestamp", "") >= since
    ]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _evicted_by(audit: Path, namespace: str) -> dict[str, list[str]]:
    return realctl.by_user_agent(read_audit_log(audit, namespace=namespace, subresource="eviction", verb="create"))


def _agents(found: dict[str, list[str]], needle: str) -> list[str]:
    return sorted(name for agent, names in found.items() if needle in agent for name in names)


def _running_openshift_machine(kube: KubeApi, namespace: str, worker: str, hooks: dict | None = None) -> str:
    """An OpenShift Machine the real controller runs, on its kwok Node with the Pod
    ``app-0``, in a new namespace; the Machines' collection path."""
    machines = f"/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machines"
    realctl.create_namespace(kube, namespace)
    realctl.create(kube, controllers.mapi_machine(worker, namespace, hooks=hooks))
    provider_id = wait_for(lambda: (kube.get(f"{machines}/{worker}") or {}).get("spec", {}).get("providerID"), timeout=60, what="spec.providerID")
    realctl.kwok_node(kube, worker, provider_id)
    realctl.running_pod(kube, namespace, "app-0", worker)
    wait_for(lambda: (kube.get(f"{machines}/{worker}") or {}).get("status", {}).get("phase") == "Running", timeout=90, what="phase Running")
    return machines


def test_cluster_api_carries_out_its_machine_and_the_collection_the_one_it_does_not_watch(capi_plane: dict) -> None:
    state_dir = Path(capi_plane["state_dir"])
    management_kubeconfig = state_dir / "kubeconfig"
    workload_kubeconfig = Path(capi_plane["workload_kubeconfig"])
    kube = api_from_kubeconfig(str(management_kubeconfig))
    workload = api_from_kubeconfig(str(workload_kubeconfig))
    namespace, watched, unwatched = "live-capi", "watched", "unwatched"
    machines = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines"
    fake_machines = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines"

    # The controller's Machine: under a Cluster the manager watches, two Pods on its Node.
    realctl.capi_worker_with_hooks(kube, workload, workload_kubeconfig, namespace=namespace, cluster=watched, worker="w-0", hooks={}, pod_namespace="apps-w")
    realctl.running_pod(workload, "apps-w", "app-1", "w-0")
    # The collection's Machine: under a Cluster the manager does not watch (it never connects to it), same shape.
    text = controllers.cluster_tool.inline_kubeconfig(workload_kubeconfig)
    for body in controllers.capi_cluster_objects(unwatched, namespace, text, watch_filter=""):
        realctl.create(kube, body)
    for body in controllers.capi_machine_objects("u-0", namespace, unwatched, watch_filter=""):
        realctl.create(kube, body)
    kube.patch(f"{fake_machines}/u-0", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)
    kube.patch(f"{machines}/u-0", {"status": {"nodeRef": {"name": "u-0"}}}, subresource_status=True)
    realctl.kwok_node(workload, "u-0", f"fake://{namespace}/u-0")
    realctl.create_namespace(workload, "apps-u")
    for pod in ("app-0", "app-1"):
        realctl.running_pod(workload, "apps-u", pod, "u-0")

    started, since = time.monotonic(), _now()
    result = run_module_with(
        str(management_kubeconfig),
        "machine_delete",
        {"machines": [{"name": "w-0", "namespace": namespace}, {"name": "u-0", "namespace": namespace}], "drain_timeout": 240, "terminate_timeout": 240},
    )
    took = time.monotonic() - started
    assert not result.get("failed"), json.dumps(result, indent=1)
    by_name = {m["name"]: m for m in result["machines"]}
    assert result["completed"] is True, result["progress"]
    assert by_name["w-0"]["status"] == "done" and by_name["w-0"]["carried_out_by"] == "controller", by_name["w-0"]
    assert by_name["w-0"]["controller"] and by_name["w-0"]["controller"] != OURS, by_name["w-0"]
    assert by_name["w-0"]["message"].startswith("deleted by its controller"), by_name["w-0"]
    assert by_name["u-0"]["status"] == "done" and by_name["u-0"]["carried_out_by"] == "collection", by_name["u-0"]
    for name in ("w-0", "u-0"):
        assert kube.get(f"{machines}/{name}") is None
        assert kube.get(f"{fake_machines}/{name}") is None
        assert workload.get(f"/api/v1/nodes/{name}") is None

    # Who did what, from both API servers' audit logs.
    workload_audit, management_audit = workload_kubeconfig.parent / "audit.log", state_dir / "audit.log"
    controller_agent = "cluster-api-controller-manager"
    evicted_w, evicted_u = _evicted_by(workload_audit, "apps-w"), _evicted_by(workload_audit, "apps-u")
    assert _agents(evicted_w, OURS) == [], evicted_w
    assert _agents(evicted_w, controller_agent) and set(_agents(evicted_w, controller_agent)) == {"app-0", "app-1"}, evicted_w
    assert _agents(evicted_u, controller_agent) == [] and _agents(evicted_u, OURS) == ["app-0", "app-1"], evicted_u
    assert _writes_by(workload_audit, OURS, "nodes", "", "w-0") == [], "the collection wrote (cordoned, deleted) the controller's Node"
    assert "patch" in _writes_by(workload_audit, controller_agent, "nodes", "", "w-0"), "the controller cordoned its Node"
    assert "delete" in _writes_by(workload_audit, controller_agent, "nodes", "", "w-0")
    assert _writes_by(workload_audit, controller_agent, "nodes", "", "u-0") == [], "the controller touched the collection's Node"
    assert _writes_by(management_audit, OURS, "machines", namespace, "w-0", since=since) == ["delete"], "the collection's only write on its Machine"
    assert _writes_by(management_audit, OURS, "fakemachines", namespace, "w-0", since=since) == []
    assert "delete" in _writes_by(management_audit, controller_agent, "fakemachines", namespace, "w-0")
    assert "delete" in _writes_by(management_audit, OURS, "fakemachines", namespace, "u-0", since=since)
    assert _writes_by(management_audit, controller_agent, "machines", namespace, "u-0") == []
    print(f"machine_delete: the controller's Machine and the collection's in {took:.1f} s; progress: {result['progress']}")


@pytest.mark.real_controllers_subset
def test_openshift_machine_controller_carries_out_its_machine_followed_by_machine_delete(mapi_plane: dict) -> None:
    state_dir = Path(mapi_plane["state_dir"])
    kubeconfig = state_dir / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    namespace, worker = "live-mapi", "worker-0"
    instance = f"/api/v1/namespaces/{namespace}/configmaps/{worker}-fake-instance"
    machines = _running_openshift_machine(kube, namespace, worker)

    since = _now()
    result = run_module_with(
        str(kubeconfig), "machine_delete", {"machines": [{"name": worker, "namespace": namespace}], "drain_timeout": 120, "terminate_timeout": 120}
    )
    assert not result.get("failed"), json.dumps(result, indent=1)
    entry = result["machines"][0]
    assert (entry["status"], entry["carried_out_by"]) == ("done", "controller"), entry
    assert entry["controller"] and entry["controller"] != OURS, entry
    assert kube.get(f"{machines}/{worker}") is None and kube.get(instance) is None and kube.get(f"/api/v1/nodes/{worker}") is None

    audit = state_dir / "audit.log"
    evicted = _evicted_by(audit, namespace)
    assert _agents(evicted, OURS) == [] and _agents(evicted, "mapi-controller") == ["app-0"], evicted
    assert _writes_by(audit, OURS, "nodes", "", worker) == []
    assert _writes_by(audit, OURS, "machines", namespace, worker, since=since) == ["delete"]
    assert _writes_by(audit, OURS, "configmaps", namespace, f"{worker}-fake-instance") == []


def test_machine_drain_and_machine_terminate_follow_a_live_openshift_controller(mapi_plane: dict) -> None:
    """Deleted by someone else while its controller runs: machine_drain waits for the
    controller's drain (evicting nothing), machine_terminate for the Machine to go."""
    state_dir = Path(mapi_plane["state_dir"])
    kubeconfig = state_dir / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    namespace, worker = "follow-mapi", "worker-0"
    hooks = {point: [{"name": f"{point}-gate", "owner": realctl.HOOK_OWNER}] for point in ("preDrain", "preTerminate")}
    machines = _running_openshift_machine(kube, namespace, worker, hooks)
    kube.delete(f"{machines}/{worker}")
    wait_for(lambda: (kube.get(f"{machines}/{worker}") or {}).get("status", {}).get("phase") == "Deleting", timeout=30, what="phase Deleting")

    # Held at the controller's preDrain gate: without waiting, machine_drain says where the controller stands.
    args = {"machine": worker, "namespace": namespace}
    held = run_module_with(str(kubeconfig), "machine_drain", {**args, "wait": False})
    assert not held.get("failed"), json.dumps(held)
    assert (held["carried_out_by"], held["completed"], held["changed"]) == ("controller", False, False), held
    assert "Drainable False" in held["message"], held["message"]
    realctl.remove_hook(kubeconfig, namespace, worker, "preDrain", "preDrain-gate")

    since = _now()  # the test's own deletion and the hook's removal share the collection's user agent
    drained = run_module_with(str(kubeconfig), "machine_drain", {**args, "wait_timeout": 90})
    assert not drained.get("failed"), json.dumps(drained)
    assert (drained["carried_out_by"], drained["completed"], drained["evicted"]) == ("controller", True, []), drained
    # At the controller's preTerminate gate: machine_terminate says so, deletes nothing; then follows it to the end.
    at_gate = run_module_with(str(kubeconfig), "machine_terminate", {**args, "wait": False})
    assert not at_gate.get("failed"), json.dumps(at_gate)
    assert (at_gate["carried_out_by"], at_gate["released"], at_gate["changed"]) == ("controller", False, False), at_gate
    assert "Terminable False" in at_gate["message"], at_gate["message"]
    realctl.remove_hook(kubeconfig, namespace, worker, "preTerminate", "preTerminate-gate")
    terminated = run_module_with(str(kubeconfig), "machine_terminate", {**args, "wait": True, "wait_timeout": 90})
    assert not terminated.get("failed"), json.dumps(terminated)
    assert terminated["released"] is True and terminated["changed"] is False, terminated
    assert kube.get(f"{machines}/{worker}") is None

    audit = state_dir / "audit.log"
    evicted = _evicted_by(audit, namespace)
    assert _agents(evicted, OURS) == [] and _agents(evicted, "mapi-controller") == ["app-0"], evicted
    assert _writes_by(audit, OURS, "nodes", "", worker) == []
    # Since the drain started, the collection's only writes on the Machine are machine_hook's removal of the
    # preTerminate hook (a patch, sent again after a conflict with the controller's status write).
    ours = _writes_by(audit, OURS, "machines", namespace, worker, since=since)
    assert ours and set(ours) <= {"patch"}, ours


def test_the_delete_machine_playbook_follows_a_live_openshift_controller_without_provider_tasks(mapi_plane: dict) -> None:
    """As an AWX job runs it: ``machine_controller=live`` needs no provider tasks (the
    controller's actuator terminates the instance); with ``auto`` and none, the role
    refuses before anything is touched, naming both ways out."""
    state_dir = Path(mapi_plane["state_dir"])
    kubeconfig = state_dir / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    namespace, worker = "play-mapi", "worker-0"
    machines = _running_openshift_machine(kube, namespace, worker)

    def playbook(**extra: object) -> subprocess.CompletedProcess:
        command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(REPO / "playbooks" / "delete_machine.yml")]
        command += ["-e", json.dumps({"machine_name": worker, "machine_namespace": namespace, "progress_interval": 5, **extra})]
        env = {**ansible_env(str(kubeconfig)), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)

    refused = playbook()
    assert refused.returncode != 0 and "delete_machine_machine_controller: live" in refused.stdout, refused.stdout[-3000:]
    assert not (kube.get(f"{machines}/{worker}") or {}).get("metadata", {}).get("deletionTimestamp"), "refused, yet marked"

    done = playbook(machine_controller="live")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{namespace}/{worker}: done at release" in done.stdout, done.stdout[-4000:]
    assert kube.get(f"{machines}/{worker}") is None and kube.get(f"/api/v1/nodes/{worker}") is None
    evicted = _evicted_by(state_dir / "audit.log", namespace)
    assert _agents(evicted, OURS) == [] and _agents(evicted, "mapi-controller") == ["app-0"], evicted
