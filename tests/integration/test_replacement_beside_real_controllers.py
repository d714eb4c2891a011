"""machine_delete's ``replacement`` beside the real MachineSet and MachineDeployment controllers
(Cluster API v1.14.2's manager; OpenShift's machine-api-operator machine and MachineSet controllers):
the collection changes the owner's replicas and the real controllers act on them.

- ``none``: the owner removes exactly the annotated Machine, its replicas one lower, no other
  Machine deleted and none created;
- ``first``: the controller creates the new Machine, the test bed's FakeCloud boots it and its Node
  joins; the new Node is Ready before the old Node is cordoned (audit log), the replicas end where
  they began;
- a roll of 6 Machines, 2 at a time: the check-mode preflight says they would all finish, and they
  do; at every moment at least 6 of the pool's Nodes are Ready and schedulable, and at most 2
  Machines more than the pool's size exist.

Every Machine's deletion is carried out by its live controller, which the collection follows
(``machine_controller: auto``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import controllers
import pytest
import realctl
from conftest import read_audit_log, run_module_with
from khelpers import node_ready, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import RECORD_ANNOTATION

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]

CAPI_MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machines"
MAPI_MACHINES = "/apis/machine.openshift.io/v1beta1/namespaces/{ns}/machines"


@dataclass
class RealPool:
    """A pool the real controllers run: its owner, its Machines (by the pool's label) and their Nodes."""

    kind: str  # capi / mapi
    kube: KubeApi
    nodes: KubeApi
    namespace: str
    owner_path: str
    selector: str
    state_dir: Path
    workload_dir: Path
    seen: set[str] = field(default_factory=set)

    @property
    def machines_path(self) -> str:
        return (CAPI_MACHINES if self.kind == "capi" else MAPI_MACHINES).format(ns=self.namespace)

    def machines(self) -> list[dict]:
        found = self.kube.list(self.machines_path, label_selector=self.selector)
        self.seen.update(m["metadata"]["name"] for m in found)
        return found

    def names(self) -> list[str]:
        return sorted(m["metadata"]["name"] for m in self.machines() if not m["metadata"].get("deletionTimestamp"))

    def replicas(self) -> int:
        return self.kube.get(self.owner_path)["spec"]["replicas"]

    def node_of(self, machine: dict) -> dict | None:
        name = ((machine.get("status") or {}).get("nodeRef") or {}).get("name")
        return self.nodes.get(f"/api/v1/nodes/{name}") if name else None

    def running(self) -> list[str]:
        """The pool's Machines not being deleted whose Node is Ready and schedulable."""
        serving = []
        for machine in self.machines():
            node = self.node_of(machine)
            if not machine["metadata"].get("deletionTimestamp") and node_ready(node) and not (node.get("spec") or {}).get("unschedulable"):
                serving.append(machine["metadata"]["name"])
        return sorted(serving)

    def wait_running(self, count: int, timeout: float = 240) -> list[str]:
        def settled() -> list[str] | None:
            names = self.running()
            return names if len(names) == count and len(self.names()) == count else None

        return wait_for(settled, timeout, 1, f"{count} running Machines")

    def record(self) -> str | None:
        return (self.kube.get(self.owner_path)["metadata"].get("annotations") or {}).get(RECORD_ANNOTATION)


def unschedulable_since(node: dict) -> str | None:
    """When the Node was cordoned (server time), from the managedFields entry of the writer of ``spec.unschedulable``."""
    if not (node.get("spec") or {}).get("unschedulable"):
        return None
    for entry in node["metadata"].get("managedFields") or []:
        if "f:unschedulable" in ((entry.get("fieldsV1") or {}).get("f:spec") or {}):
            return entry.get("time")
    return None


class Watch:
    """Samples the pool every half second while the deletion runs: the fewest Machines serving, the most existing,
    and when each of its Nodes was cordoned (``cordoned``: Node name -> server time; the audit log cannot tell a
    cordon from the other patches Cluster API sends a Node)."""

    def __init__(self, pool: RealPool):
        self.pool = pool
        self.fewest_serving = 10**6
        self.most_existing = 0
        self.samples = 0
        self.cordoned: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                machines = self.pool.machines()
                existing, serving = len(machines), len(self.pool.running())
                for machine in machines:
                    node = self.pool.node_of(machine) or {}
                    since = unschedulable_since(node) if node else None
                    if since:
                        self.cordoned.setdefault(node["metadata"]["name"], since)
            except (ApiError, OSError):  # a sample lost to a busy API server is skipped, not a failure
                continue
            self.samples += 1
            self.fewest_serving, self.most_existing = min(self.fewest_serving, serving), max(self.most_existing, existing)


def capi_pool(capi_plane: dict, namespace: str, replicas: int, *, deployment: bool = False) -> RealPool:
    state_dir = Path(capi_plane["state_dir"])
    workload_kubeconfig = Path(capi_plane["workload_kubeconfig"])
    kube, workload = api_from_kubeconfig(str(state_dir / "kubeconfig")), api_from_kubeconfig(str(workload_kubeconfig))
    realctl.create_namespace(kube, namespace)
    text = controllers.cluster_tool.inline_kubeconfig(workload_kubeconfig)
    for body in controllers.capi_cluster_objects("interop", namespace, text):
        realctl.create(kube, body)
    kube.patch(
        f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines/interop-control-plane-0",
        controllers.FAKE_MACHINE_PROVISIONED,
        subresource_status=True,
    )
    name = "md-0" if deployment else "ms-0"
    for body in controllers.capi_machine_set_objects(name, namespace, "interop", replicas, deployment=deployment):
        if body["kind"] == "FakeMachineTemplate":
            kube.create(f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachinetemplates", body)
        else:
            realctl.create(kube, body)
    plural = "machinedeployments" if deployment else "machinesets"
    return RealPool(
        "capi",
        kube,
        workload,
        namespace,
        f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/{plural}/{name}",
        f"{controllers.POOL_LABEL}={name}",
        state_dir,
        workload_kubeconfig.parent,
    )


def mapi_pool(mapi_plane: dict, namespace: str, replicas: int) -> RealPool:
    state_dir = Path(mapi_plane["state_dir"])
    kube = api_from_kubeconfig(str(state_dir / "kubeconfig"))
    realctl.create_namespace(kube, namespace)
    kube.create(f"/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machinesets", controllers.mapi_machine_set("ms-0", namespace, replicas))
    path = f"/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machinesets/ms-0"
    return RealPool("mapi", kube, kube, namespace, path, "machine.openshift.io/cluster-api-machineset=ms-0", state_dir, state_dir)


def cloud(pool: RealPool) -> controllers.FakeCloud:
    management = controllers.cluster_tool.state_from_kubeconfig(pool.state_dir / "kubeconfig")
    nodes = controllers.cluster_tool.state_from_kubeconfig(pool.workload_dir / "kubeconfig")
    return controllers.FakeCloud(pool.kind, management, pool.namespace, nodes)


def delete(pool: RealPool, names: list[str], *, check: bool = False, **extra) -> dict:
    params = {"machines": [{"name": name, "namespace": pool.namespace} for name in names], "drain_timeout": 300, "terminate_timeout": 300, **extra}
    result = run_module_with(str(pool.state_dir / "kubeconfig"), "machine_delete", params, check=check, timeout=900)
    assert not result.get("failed"), json.dumps(result, indent=1)[-4000:]
    return result


def deletions_of_machines(pool: RealPool) -> dict[str, list[str]]:
    """Who sent a DELETE for which Machine (management audit log): {name: [user agents]}."""
    found: dict[str, list[str]] = {}
    for event in read_audit_log(pool.state_dir / "audit.log", namespace=pool.namespace, resource="machines", verb="delete"):
        found.setdefault(event["objectRef"]["name"], []).append(event.get("userAgent", ""))
    return found


def cordoned_at(pool: RealPool, watch: Watch, node: str) -> str:
    """When ``node`` was cordoned (server time): as the watch saw it; else, for OpenShift, whose drain cordons and
    deletes a Node faster than a sample, its one PATCH in the audit log (nodelink writes the Node with updates)."""
    seen = watch.cordoned.get(node)
    if seen or pool.kind == "capi":
        assert seen, f"Node {node} was never seen cordoned"
        return seen
    events = [e for e in read_audit_log(pool.workload_dir / "audit.log", resource="nodes", subresource="", verb="patch") if e["objectRef"].get("name") == node]
    assert events, f"Node {node} was never cordoned"
    return events[0]["requestReceivedTimestamp"][:19] + "Z"


def ready_since(pool: RealPool, node: str) -> str:
    found = pool.nodes.get(f"/api/v1/nodes/{node}")
    assert found is not None, f"Node {node} is gone"
    return next(c for c in found["status"]["conditions"] if c["type"] == "Ready")["lastTransitionTime"]


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("owner", ["machineset", "machinedeployment"])
def test_cluster_api_removes_exactly_the_annotated_machine_and_replaces_first(capi_plane: dict, owner: str) -> None:
    pool = capi_pool(capi_plane, f"repl-{owner[:7]}", 3, deployment=owner == "machinedeployment")
    with cloud(pool):
        three = pool.wait_running(3)
        # none: the owner removes exactly the annotated Machine.
        gone, *kept = three
        result = delete(pool, [gone], replacement="none")
        entry = result["machines"][0]
        assert (entry["status"], entry["carried_out_by"]) == ("done", "controller"), entry
        assert pool.replicas() == 2 and pool.names() == kept
        assert pool.seen == set(three), f"no Machine created: {sorted(pool.seen - set(three))}"
        assert sorted(deletions_of_machines(pool)) == [gone], deletions_of_machines(pool)
        assert pool.record() is None

        # first: the new Node Ready before the old one is cordoned, the replicas back at 2.
        old = kept[0]
        old_node = pool.node_of(pool.kube.get(f"{pool.machines_path}/{old}"))["metadata"]["name"]
        with Watch(pool) as watch:
            result = delete(pool, [old], replacement="first")
        entry = result["machines"][0]
        new = entry["replacement"]["replacement"]
        assert new and new not in three, entry["replacement"]
        assert pool.replicas() == 2 and pool.names() == sorted([kept[1], new]) and pool.record() is None
        new_node = pool.node_of(pool.kube.get(f"{pool.machines_path}/{new}"))["metadata"]["name"]
        ready, cordoned = ready_since(pool, new_node), cordoned_at(pool, watch, old_node)
        assert ready <= cordoned, (ready, cordoned)
        assert watch.fewest_serving >= 2 and watch.most_existing <= 3, (watch.fewest_serving, watch.most_existing, watch.samples)
        assert sorted(deletions_of_machines(pool)) == sorted([gone, old])
        metrics = result["metrics"][entry["key"]]
        assert metrics["pool_short_seconds"] == 0.0 and metrics["replacement_ready_seconds"] > 0, metrics
        print(f"Cluster API {owner}: replacement Ready after {metrics['replacement_ready_seconds']} s; figures {metrics}")


@pytest.mark.real_controllers_subset
def test_openshift_machine_set_removes_exactly_the_annotated_machine_and_replaces_first(mapi_plane: dict) -> None:
    pool = mapi_pool(mapi_plane, "repl-mapi", 3)
    with cloud(pool):
        three = pool.wait_running(3)
        gone, *kept = three
        result = delete(pool, [gone], replacement="none")
        assert (result["machines"][0]["status"], result["machines"][0]["carried_out_by"]) == ("done", "controller"), result["machines"][0]
        assert pool.replicas() == 2 and pool.names() == kept
        assert pool.seen == set(three), f"no Machine created: {sorted(pool.seen - set(three))}"
        assert sorted(deletions_of_machines(pool)) == [gone]

        old = kept[0]
        with Watch(pool) as watch:
            result = delete(pool, [old], replacement="first")
        entry = result["machines"][0]
        new = entry["replacement"]["replacement"]
        assert new and new not in three and pool.replicas() == 2 and pool.names() == sorted([kept[1], new])
        ready, cordoned = ready_since(pool, new), cordoned_at(pool, watch, old)
        assert ready <= cordoned, (ready, cordoned)
        assert watch.fewest_serving >= 2 and watch.most_existing <= 3, (watch.fewest_serving, watch.most_existing)
        assert pool.record() is None
        print(f"OpenShift: replacement Ready after {result['metrics'][entry['key']]['replacement_ready_seconds']} s")


@pytest.mark.parametrize("kind", ["capi", "mapi"])
def test_a_roll_of_six_two_at_a_time_finishes_as_the_preflight_said(request: pytest.FixtureRequest, kind: str) -> None:
    plane = request.getfixturevalue("capi_plane" if kind == "capi" else "mapi_plane")
    pool = capi_pool(plane, "roll-capi", 6) if kind == "capi" else mapi_pool(plane, "roll-mapi", 6)
    with cloud(pool):
        six = pool.wait_running(6)
        planned = delete(pool, six, check=True, replacement="first", concurrency=2)
        preflight = planned["preflight"]
        assert sorted(preflight["would_finish"]) == sorted(f"{pool.namespace}/{name}" for name in six), preflight
        assert preflight["can_never_finish"] == {} and preflight["would_wait"] == {}, preflight
        assert pool.replicas() == 6 and pool.names() == six, "check mode changed nothing"
        started = time.monotonic()
        with Watch(pool) as watch:
            result = delete(pool, six, replacement="first", concurrency=2, progress_interval=15)
        took = time.monotonic() - started
    assert [m["status"] for m in result["machines"]] == ["done"] * 6, result["progress"]
    now = pool.names()
    assert pool.replicas() == 6 and len(now) == 6 and not set(now) & set(six), now
    assert watch.fewest_serving >= 6, f"the pool ran short: {watch.fewest_serving} serving at worst ({watch.samples} samples)"
    assert watch.most_existing <= 8, f"more than 2 at a time: {watch.most_existing} Machines at most; DELETEs: {deletions_of_machines(pool)}"
    assert pool.record() is None, (pool.record(), [m["replacement"] for m in result["machines"]])
    figures = [result["metrics"][f"{pool.namespace}/{name}"] for name in six]
    assert all(f["pool_short_seconds"] == 0.0 for f in figures), figures
    ready = sorted(f["replacement_ready_seconds"] for f in figures)
    print(f"{kind}: roll of 6, 2 at a time, in {took:.0f} s; replacement Ready after {ready[0]}-{ready[-1]} s; fewest serving {watch.fewest_serving}")
