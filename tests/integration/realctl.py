"""What the tests beside the real machine controllers share: the control planes
with a controller running (``capi_plane`` / ``mapi_plane`` fixtures, stopped
after the test, pass or fail), and small helpers to build a Machine's world on
them and to read what the controller did.

The fixtures skip unless ``make conformance`` (LIFECYCLE_MACHINE_CONFORMANCE=1)
runs them, or ``make test`` does (LIFECYCLE_MACHINE_REAL_CONTROLLERS=1) and the
test is marked ``real_controllers_subset``, or the test file is named on pytest's
command line; they skip naming the build command when the binaries are missing.
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

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

CONFORMANCE_ENV = "LIFECYCLE_MACHINE_CONFORMANCE"
SUBSET_ENV = "LIFECYCLE_MACHINE_REAL_CONTROLLERS"
HOOK_OWNER = "lifecycle-machine-conformance"
HOLD_SECONDS = 6  # how long a gate is watched to stay closed before the hook is removed
CAPI_HOOK_PREFIX = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}


def binaries(request: pytest.FixtureRequest, name: str) -> Path:
    """The controller's cache directory, or skip (saying why and what to run)."""
    this_file = Path(str(request.path)).resolve()
    named = any(Path(str(arg).split("::", 1)[0]).resolve() == this_file for arg in request.config.args)
    in_subset = bool(os.environ.get(SUBSET_ENV)) and request.node.get_closest_marker("real_controllers_subset") is not None
    if not (os.environ.get(CONFORMANCE_ENV) or in_subset or named):
        pytest.skip(
            f"runs with the real controllers only under `make conformance` ({CONFORMANCE_ENV}=1), in make test's fixed subset"
            f" ({SUBSET_ENV}=1, tests marked real_controllers_subset), or when its file is named to pytest"
        )
    try:
        return controllers.build_controllers((name,), build=False)[name]
    except controllers.NotBuilt as exc:
        pytest.skip(f"{exc} (or `make conformance`)")


def new_state_dir(kind: str) -> Path:
    return REPO / ".tmp" / f"real-{kind}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def plane(request: pytest.FixtureRequest, kind: str) -> Iterator[dict]:
    """The control plane(s) ``hack/controllers.py up <kind>`` starts, stopped after the test, pass or fail."""
    binaries(request, kind)
    state_dir = new_state_dir(kind)
    up = controllers.up_capi if kind == "capi" else controllers.up_mapi
    try:
        yield up(state_dir, build=False, quiet=True)
    finally:
        controllers.down(state_dir)


# ---------------------------------------------------------------------------
# Helpers


def create(kube: KubeApi, body: dict) -> dict:
    """Create ``body`` at the collection path its apiVersion, kind and namespace name."""
    group_version = body["apiVersion"]
    plural = {"Secret": "secrets", "Namespace": "namespaces", "Pod": "pods", "Node": "nodes"}.get(body["kind"]) or body["kind"].lower() + "s"
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    namespace = body["metadata"].get("namespace")
    return kube.create(f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}", body)


def create_namespace(kube: KubeApi, name: str) -> None:
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def bare_pod(name: str, namespace: str, node: str) -> dict:
    """A Pod of no controller bound to ``node``: both controllers evict it (with a warning)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{"name": "app", "image": "app:1"}]},
    }


def kwok_node(kube: KubeApi, name: str, provider_id: str) -> None:
    node = fake_node(name)
    node["spec"]["providerID"] = provider_id
    kube.create("/api/v1/nodes", node)
    wait_for(lambda: node_ready(kube.get(f"/api/v1/nodes/{name}")), timeout=60, what=f"Node {name} Ready")


def running_pod(kube: KubeApi, namespace: str, name: str, node: str) -> None:
    create(kube, bare_pod(name, namespace, node))
    wait_for(lambda: pod_is_ready(kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}") or {}), timeout=60, what=f"Pod {name} Ready")


def hold(check: Callable[[], str | None], seconds: float = HOLD_SECONDS) -> None:
    """Fail as soon as ``check`` names something that moved past the gate during ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        moved = check()
        assert moved is None, f"the controller went past a closed gate: {moved}"
        time.sleep(0.5)


def remove_hook(kubeconfig: Path, namespace: str, machine: str, point: str, name: str) -> float:
    """Remove one hook with the collection's machine_hook module; the seconds it took."""
    started = time.monotonic()
    result = run_module_with(str(kubeconfig), "machine_hook", {"machine": machine, "namespace": namespace, "point": point, "name": name, "state": "absent"})
    assert not result.get("failed"), result
    assert result["changed"] is True, result
    assert [m["action"] for m in result["machines"]] == ["removed"], result
    return time.monotonic() - started


def by_user_agent(events: list[dict]) -> dict[str, list[str]]:
    """``{userAgent: [name, ...]}`` of audit events."""
    found: dict[str, list[str]] = {}
    for event in events:
        found.setdefault(event.get("userAgent", ""), []).append((event.get("objectRef") or {}).get("name", ""))
    return found


def assert_the_controller_acted(audit: Path, pod_namespace: str, pod: str, node: str, agent: str) -> None:
    """From the API server's audit log of the Node's cluster: every eviction (one of
    them ``pod``'s) and the deletion of ``node`` were made by a user agent holding ``agent``."""
    evictions = by_user_agent(read_audit_log(audit, namespace=pod_namespace, subresource="eviction", verb="create"))
    node_deletions = by_user_agent([e for e in read_audit_log(audit, resource="nodes", verb="delete") if e["objectRef"].get("name") == node])
    assert [user_agent for user_agent in evictions if agent not in user_agent] == [], evictions
    assert pod in [name for names in evictions.values() for name in names], evictions
    assert list(node_deletions), f"no deletion of Node {node} in {audit}"
    assert all(agent in user_agent for user_agent in node_deletions), node_deletions


# ---------------------------------------------------------------------------
# Cluster API


def v1beta2_condition(machine: dict | None, kind: str) -> dict:
    return next((c for c in ((machine or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def v1beta1_condition(machine: dict | None, kind: str) -> dict:
    conditions = ((((machine or {}).get("status") or {}).get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


def capi_worker_with_hooks(
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
    create_namespace(kube, namespace)
    for body in controllers.capi_cluster_objects(cluster, namespace, controllers.cluster_tool.inline_kubeconfig(workload_kubeconfig)):
        create(kube, body)
    annotations = {f"{CAPI_HOOK_PREFIX[point]}/{name}": HOOK_OWNER for point, name in hooks.items()}
    for body in controllers.capi_machine_objects(worker, namespace, cluster, annotations=annotations, provider_id=provider_id):
        create(kube, body)
    for name in (f"{cluster}-control-plane-0", worker):
        kube.patch(f"{fake_machines}/{name}", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)
    kwok_node(workload, worker, provider_id)
    create_namespace(workload, pod_namespace)
    running_pod(workload, pod_namespace, "app-0", worker)
    wait_for(
        lambda: (((kube.get(machine_path) or {}).get("status") or {}).get("nodeRef") or {}).get("name") == worker,
        timeout=120,
        what="status.nodeRef set by Cluster API",
    )
    assert "machine.cluster.x-k8s.io" in kube.get(machine_path)["metadata"]["finalizers"]
