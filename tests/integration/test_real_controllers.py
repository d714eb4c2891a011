"""Smoke tests with the real machine controllers the collection imitates.

The Cluster API core manager and OpenShift's machine controller (built from the
Go module proxy by hack/build-controllers.sh, run by hack/controllers.py beside
control planes of their own) delete a Machine that carries a pre-drain and a
pre-terminate hook; each test proves the controller holds at each gate until the
collection's ``machine_hook`` module (run through ``ansible``) removes the hook,
and that the controller itself drains the Node, deletes the infrastructure and
the Node and lets the Machine go.

Not part of ``make test``: ``make conformance`` builds the controllers and runs
this file. Without the binaries every test skips, naming the command that builds
them; with them, the tests still skip unless ``make conformance`` runs them
(LIFECYCLE_MACHINE_CONFORMANCE=1) or this file is named on pytest's command line,
so a machine that once built the controllers does not run them in ``make test``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import controllers
import pytest
from conftest import REPO, read_audit_log, run_module_with
from khelpers import fake_node, node_ready, pod_is_ready, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi, api_from_kubeconfig

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]

CONFORMANCE_ENV = "LIFECYCLE_MACHINE_CONFORMANCE"
HOOK_OWNER = "lifecycle-machine-conformance"
HOLD_SECONDS = 6  # how long a gate is watched to stay closed before the hook is removed
CAPI_HOOK_PREFIX = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}


def _binaries(request: pytest.FixtureRequest, name: str) -> Path:
    """The controller's cache directory, or skip (saying why and what to run)."""
    this_file = Path(__file__).resolve()
    named = any(Path(str(arg).split("::", 1)[0]).resolve() == this_file for arg in request.config.args)
    if not (os.environ.get(CONFORMANCE_ENV) or named):
        pytest.skip(f"runs with the real controllers only under `make conformance` ({CONFORMANCE_ENV}=1) or when this file is named to pytest")
    try:
        return controllers.build_controllers((name,), build=False)[name]
    except controllers.NotBuilt as exc:
        pytest.skip(f"{exc} (or `make conformance`)")


def _state_dir(kind: str) -> Path:
    return REPO / ".tmp" / f"real-{kind}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _plane(request: pytest.FixtureRequest, kind: str) -> Iterator[dict]:
    """The control plane(s) ``hack/controllers.py up <kind>`` starts, stopped after the test, pass or fail."""
    _binaries(request, kind)
    state_dir = _state_dir(kind)
    up = controllers.up_capi if kind == "capi" else controllers.up_mapi
    try:
        yield up(state_dir, build=False, quiet=True)
    finally:
        controllers.down(state_dir)


@pytest.fixture
def capi_plane(request: pytest.FixtureRequest) -> Iterator[dict]:
    """Management and workload control planes with the real Cluster API manager (watch filter ``real-capi``)."""
    yield from _plane(request, "capi")


@pytest.fixture
def mapi_plane(request: pytest.FixtureRequest) -> Iterator[dict]:
    """A control plane with the real OpenShift machine controller."""
    yield from _plane(request, "mapi")


# ---------------------------------------------------------------------------
# Helpers


def _create(kube: KubeApi, body: dict) -> dict:
    """Create ``body`` at the collection path its apiVersion, kind and namespace name."""
    group_version = body["apiVersion"]
    plural = {"Secret": "secrets", "Namespace": "namespaces", "Pod": "pods", "Node": "nodes"}.get(body["kind"]) or body["kind"].lower() + "s"
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    namespace = body["metadata"].get("namespace")
    return kube.create(f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}", body)


def _namespace(kube: KubeApi, name: str) -> None:
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def _bare_pod(name: str, namespace: str, node: str) -> dict:
    """A Pod of no controller bound to ``node``: both controllers evict it (with a warning)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{"name": "app", "image": "app:1"}]},
    }


def _kwok_node(kube: KubeApi, name: str, provider_id: str) -> None:
    node = fake_node(name)
    node["spec"]["providerID"] = provider_id
    kube.create("/api/v1/nodes", node)
    wait_for(lambda: node_ready(kube.get(f"/api/v1/nodes/{name}")), timeout=60, what=f"Node {name} Ready")


def _running_pod(kube: KubeApi, namespace: str, name: str, node: str) -> None:
    _create(kube, _bare_pod(name, namespace, node))
    wait_for(lambda: pod_is_ready(kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}") or {}), timeout=60, what=f"Pod {name} Ready")


def _hold(check: Callable[[], str | None], seconds: float = HOLD_SECONDS) -> None:
    """Fail as soon as ``check`` names something that moved past the gate during ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        moved = check()
        assert moved is None, f"the controller went past a closed gate: {moved}"
        time.sleep(0.5)


def _remove_hook(kubeconfig: Path, namespace: str, machine: str, point: str, name: str) -> float:
    """Remove one hook with the collection's machine_hook module; the seconds it took."""
    started = time.monotonic()
    result = run_module_with(str(kubeconfig), "machine_hook", {"machine": machine, "namespace": namespace, "point": point, "name": name, "state": "absent"})
    assert not result.get("failed"), result
    assert result["changed"] is True, result
    assert [m["action"] for m in result["machines"]] == ["removed"], result
    return time.monotonic() - started


def _by_user_agent(events: list[dict]) -> dict[str, list[str]]:
    """``{userAgent: [name, ...]}`` of audit events."""
    found: dict[str, list[str]] = {}
    for event in events:
        found.setdefault(event.get("userAgent", ""), []).append((event.get("objectRef") or {}).get("name", ""))
    return found


def _assert_the_controller_acted(audit: Path, pod_namespace: str, pod: str, node: str, agent: str) -> None:
    """From the API server's audit log of the Node's cluster: every eviction (one of
    them ``pod``'s) and the deletion of ``node`` were made by a user agent holding ``agent``."""
    evictions = _by_user_agent(read_audit_log(audit, namespace=pod_namespace, subresource="eviction", verb="create"))
    node_deletions = _by_user_agent([e for e in read_audit_log(audit, resource="nodes", verb="delete") if e["objectRef"].get("name") == node])
    assert [user_agent for user_agent in evictions if agent not in user_agent] == [], evictions
    assert pod in [name for names in evictions.values() for name in names], evictions
    assert list(node_deletions), f"no deletion of Node {node} in {audit}"
    assert all(agent in user_agent for user_agent in node_deletions), node_deletions


# ---------------------------------------------------------------------------
# Cluster API


def _v1beta2_condition(machine: dict | None, kind: str) -> dict:
    return next((c for c in ((machine or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _v1beta1_condition(machine: dict | None, kind: str) -> dict:
    conditions = ((((machine or {}).get("status") or {}).get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


def _capi_worker_with_hooks(
    kube: KubeApi, workload: KubeApi, workload_kubeconfig: Path, *, namespace: str, cluster: str, worker: str, hooks: dict[str, str], pod_namespace: str
) -> None:
    """The management side: the kubeconfig Secret of the workload cluster, the
    Cluster, an active control-plane Machine, and the worker Machine with one
    hook per point (``{point: name}``). The workload side: the worker's Node
    (matched by providerID) and a running Pod on it. Returns once Cluster API
    has set the worker's ``status.nodeRef`` (and so its finalizer)."""
    provider_id = f"fake://{namespace}/{worker}"
    machine_path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{worker}"
    fake_machines = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines"
    _namespace(kube, namespace)
    for body in controllers.capi_cluster_objects(cluster, namespace, controllers.cluster_tool.inline_kubeconfig(workload_kubeconfig)):
        _create(kube, body)
    annotations = {f"{CAPI_HOOK_PREFIX[point]}/{name}": HOOK_OWNER for point, name in hooks.items()}
    for body in controllers.capi_machine_objects(worker, namespace, cluster, annotations=annotations, provider_id=provider_id):
        _create(kube, body)
    for name in (f"{cluster}-control-plane-0", worker):
        kube.patch(f"{fake_machines}/{name}", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)
    _kwok_node(workload, worker, provider_id)
    _namespace(workload, pod_namespace)
    _running_pod(workload, pod_namespace, "app-0", worker)
    wait_for(
        lambda: (((kube.get(machine_path) or {}).get("status") or {}).get("nodeRef") or {}).get("name") == worker,
        timeout=120,
        what="status.nodeRef set by Cluster API",
    )
    assert "machine.cluster.x-k8s.io" in kube.get(machine_path)["metadata"]["finalizers"]


def test_real_cluster_api_holds_at_each_hook_until_machine_hook_removes_it(capi_plane: dict) -> None:
    state_dir = Path(capi_plane["state_dir"])
    management_kubeconfig = state_dir / "kubeconfig"
    workload_kubeconfig = Path(capi_plane["workload_kubeconfig"])
    kube = api_from_kubeconfig(str(management_kubeconfig))
    workload = api_from_kubeconfig(str(workload_kubeconfig))
    namespace, cluster, worker, apps = "real-capi", "real", "worker-0", "apps"
    machines = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines"
    fake_machines = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines"

    hooks = {"preDrain": "drain-gate", "preTerminate": "terminate-gate"}
    _capi_worker_with_hooks(kube, workload, workload_kubeconfig, namespace=namespace, cluster=cluster, worker=worker, hooks=hooks, pod_namespace=apps)

    def deleting_reason() -> str:
        return _v1beta2_condition(kube.get(f"{machines}/{worker}"), "Deleting").get("reason", "")

    def pod_state() -> str:
        pod = workload.get(f"/api/v1/namespaces/{apps}/pods/app-0")
        return "gone" if pod is None else ("terminating" if pod["metadata"].get("deletionTimestamp") else "running")

    def node_cordoned() -> bool:
        return bool((workload.get(f"/api/v1/nodes/{worker}") or {}).get("spec", {}).get("unschedulable"))

    deleted_at = time.monotonic()
    kube.delete(f"{machines}/{worker}")

    # Gate 1: pre-drain. Nothing is cordoned or evicted while the hook is there.
    wait_for(lambda: deleting_reason() == "WaitingForPreDrainHook", timeout=60, what="Deleting reason WaitingForPreDrainHook")

    def before_drain() -> str | None:
        if deleting_reason() != "WaitingForPreDrainHook":
            return f"Deleting reason {deleting_reason()!r}"
        if node_cordoned():
            return "the Node is cordoned"
        return None if pod_state() == "running" else f"the Pod is {pod_state()}"

    _hold(before_drain)
    machine = kube.get(f"{machines}/{worker}")
    assert machine["status"]["deletion"].get("waitForPreDrainHookStartTime")
    assert not machine["status"]["deletion"].get("nodeDrainStartTime")
    _remove_hook(management_kubeconfig, namespace, worker, "preDrain", hooks["preDrain"])

    # Cluster API drains (cordon, evict, re-check every 20 s), then stops at gate 2.
    seen = set()

    def at_pre_terminate() -> bool:
        seen.add(deleting_reason())
        return deleting_reason() == "WaitingForPreTerminateHook"

    wait_for(at_pre_terminate, timeout=120, interval=0.2, what="Deleting reason WaitingForPreTerminateHook")
    machine = kube.get(f"{machines}/{worker}")
    assert machine["status"]["deletion"].get("nodeDrainStartTime"), machine["status"]
    assert _v1beta1_condition(machine, "DrainingSucceeded").get("status") == "True", machine["status"]
    assert node_cordoned()
    assert pod_state() == "gone"

    def before_terminate() -> str | None:
        if deleting_reason() != "WaitingForPreTerminateHook":
            return f"Deleting reason {deleting_reason()!r}"
        if kube.get(f"{fake_machines}/{worker}") is None:
            return "the FakeMachine is gone"
        return None if workload.get(f"/api/v1/nodes/{worker}") is not None else "the Node is gone"

    _hold(before_terminate)
    _remove_hook(management_kubeconfig, namespace, worker, "preTerminate", hooks["preTerminate"])

    # Cluster API deletes the infrastructure, then the Node, then lets the Machine go.
    wait_for(lambda: kube.get(f"{machines}/{worker}") is None, timeout=90, what="the Machine to be gone")
    took = time.monotonic() - deleted_at
    assert kube.get(f"{fake_machines}/{worker}") is None
    assert workload.get(f"/api/v1/nodes/{worker}") is None

    # The workload cluster's audit log: the eviction and the Node deletion are Cluster API's.
    _assert_the_controller_acted(workload_kubeconfig.parent / "audit.log", apps, "app-0", worker, "cluster-api-controller-manager")
    print(f"Cluster API deleted the Machine in {took:.1f} s; Deleting reasons seen after the pre-drain hook went: {sorted(seen)}")


# ---------------------------------------------------------------------------
# OpenShift


def _openshift_condition(machine: dict | None, kind: str) -> dict:
    return next((c for c in ((machine or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def test_real_openshift_machine_controller_holds_at_each_hook_until_machine_hook_removes_it(mapi_plane: dict) -> None:
    state_dir = Path(mapi_plane["state_dir"])
    kubeconfig = state_dir / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    namespace, worker = "real-mapi", "worker-0"
    machines = f"/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machines"
    instance = f"/api/v1/namespaces/{namespace}/configmaps/{worker}-fake-instance"

    _namespace(kube, namespace)
    hooks = {"preDrain": "drain-gate", "preTerminate": "terminate-gate"}
    body = controllers.mapi_machine(worker, namespace, hooks={point: [{"name": name, "owner": HOOK_OWNER}] for point, name in hooks.items()})
    _create(kube, body)

    # The fake actuator "creates" the instance and sets the providerID; nodelink
    # links the Node of that providerID; the Machine runs.
    provider_id = wait_for(lambda: (kube.get(f"{machines}/{worker}") or {}).get("spec", {}).get("providerID"), timeout=60, what="spec.providerID")
    assert kube.get(instance) is not None
    _kwok_node(kube, worker, provider_id)
    _running_pod(kube, namespace, "app-0", worker)
    wait_for(lambda: (kube.get(f"{machines}/{worker}") or {}).get("status", {}).get("phase") == "Running", timeout=90, what="phase Running")
    assert kube.get(f"{machines}/{worker}")["status"]["nodeRef"]["name"] == worker

    def machine() -> dict | None:
        return kube.get(f"{machines}/{worker}")

    def pod_state() -> str:
        pod = kube.get(f"/api/v1/namespaces/{namespace}/pods/app-0")
        return "gone" if pod is None else ("terminating" if pod["metadata"].get("deletionTimestamp") else "running")

    def node_cordoned() -> bool:
        return bool((kube.get(f"/api/v1/nodes/{worker}") or {}).get("spec", {}).get("unschedulable"))

    def drain_events(reason: str) -> list[dict]:
        events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={worker}")
        return [e for e in events if e.get("reason") == reason]

    deleted_at = time.monotonic()
    kube.delete(f"{machines}/{worker}")

    # Gate 1: pre-drain (the drain controller says DrainBlocked).
    wait_for(lambda: drain_events("DrainBlocked"), timeout=60, what="Event DrainBlocked")
    assert (machine() or {}).get("status", {}).get("phase") == "Deleting"

    def before_drain() -> str | None:
        if _openshift_condition(machine(), "Drained"):
            return f"Drained condition {_openshift_condition(machine(), 'Drained')}"
        if node_cordoned():
            return "the Node is cordoned"
        return None if pod_state() == "running" else f"the Pod is {pod_state()}"

    _hold(before_drain)
    assert _openshift_condition(machine(), "Drainable").get("status") == "False"
    _remove_hook(kubeconfig, namespace, worker, "preDrain", hooks["preDrain"])

    # The drain (kubectl's drain library), then gate 2: pre-terminate.
    wait_for(lambda: _openshift_condition(machine(), "Drained").get("status") == "True", timeout=120, what="Drained condition True")
    assert drain_events("DrainProceeds") and drain_events("DrainSucceeded")
    assert node_cordoned()
    wait_for(lambda: pod_state() == "gone", timeout=30, what="the evicted Pod to be gone")
    wait_for(lambda: _openshift_condition(machine(), "Terminable").get("status") == "False", timeout=30, what="Terminable condition False")

    def before_terminate() -> str | None:
        if machine() is None:
            return "the Machine is gone"
        if kube.get(instance) is None:
            return "the fake instance was deleted"
        return None if kube.get(f"/api/v1/nodes/{worker}") is not None else "the Node is gone"

    _hold(before_terminate)
    _remove_hook(kubeconfig, namespace, worker, "preTerminate", hooks["preTerminate"])

    # The actuator deletes the instance; the controller deletes the Node, drops its finalizer.
    wait_for(lambda: machine() is None, timeout=90, what="the Machine to be gone")
    took = time.monotonic() - deleted_at
    assert kube.get(instance) is None
    assert kube.get(f"/api/v1/nodes/{worker}") is None

    _assert_the_controller_acted(state_dir / "audit.log", namespace, "app-0", worker, "mapi-controller")
    print(f"the OpenShift machine controller deleted the Machine in {took:.1f} s")
