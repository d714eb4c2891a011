"""`make demo`: delete a Machine through its gates on the local control plane.

Starts the control plane (unless `make cluster-up` already did), builds a
small simulated cluster of both Machine flavours, puts a preDrain and a
preTerminate hook on one Cluster API Machine, starts a small hook-implementing
playbook beside it (hack/demo/hook_controller.yml) and deletes the Machine with
the delete_machine role. The Cluster API Machines live in the management
cluster and their Nodes and workloads in a workload cluster (a second control
plane), reached through the Cluster's kubeconfig Secret; a Node of the same
name in the management cluster, with a Pod of its own, is left alone. A
timeline read from both API servers shows each gate hold and release and the
drain go batch by batch; then the OpenShift Machine (Machine and Node in one
cluster) is deleted with simulated provider tasks.

    python3 hack/demo.py [--keep]     --keep leaves the control plane running

With LM_KUBECONFIG set to a kubeconfig, it runs against that cluster instead (as a
self-hosted cluster: Machines and Nodes in it) and starts and stops nothing; the cluster needs the CRDs of hack/crds and kwok
managing Nodes annotated kwok.x-k8s.io/node=fake (docs/own_cluster.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

NS = "demo"
OCP_NS = "openshift-machine-api"
CAPI = "cluster.x-k8s.io/v1beta2"
VICTIM = "demo-md-0-a"
GRACE = 3
START = time.monotonic()
# The demo uses the repository's own control plane (`make cluster-up` shares it), unless
# LM_KUBECONFIG names a cluster of the user's.
OWN_KUBECONFIG = os.environ.get("LM_KUBECONFIG", "")
KUBECONFIG = Path(OWN_KUBECONFIG).expanduser().resolve() if OWN_KUBECONFIG else REPO / ".cluster" / "kubeconfig"
# Where the Cluster API Machines' Nodes and workloads are: the local workload control plane,
# or (LM_KUBECONFIG) the same cluster.
WORKLOAD_KUBECONFIG = KUBECONFIG if OWN_KUBECONFIG else REPO / ".cluster" / cluster_tool.WORKLOAD_SUBDIR / "kubeconfig"
# What the demo creates, by API: the CRDs of hack/crds provide all but the core ones.
NEEDED = {
    "cluster.x-k8s.io/v1beta2": ("machines", "machinedrainrules", "clusters"),
    "machine.openshift.io/v1beta1": ("machines",),
    "infrastructure.cluster.x-k8s.io/v1beta1": ("fakemachines",),
    "bootstrap.cluster.x-k8s.io/v1beta1": ("fakebootstrapconfigs",),
}


def say(text: str) -> None:
    print(f"[{time.monotonic() - START:6.1f}s] {text}", flush=True)


def node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": {"kubernetes.io/hostname": name, "pool": "demo"}},
    }


def capi_machine(name: str, labels: dict, annotations: dict | None = None) -> dict:
    return {
        "apiVersion": CAPI,
        "kind": "Machine",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "demo", **labels}, "annotations": annotations or {}},
        "spec": {
            "clusterName": "demo",
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": name}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": name},
        },
    }


def workload(name: str, replicas: int, labels: dict, prefer_node: str | None = None) -> dict:
    spec: dict = {
        "terminationGracePeriodSeconds": GRACE,
        "nodeSelector": {"pool": "demo"},
        "containers": [{"name": name, "image": f"registry.invalid/{name}:1"}],
    }
    if prefer_node:
        # Starts on that Node while it is schedulable; moves elsewhere once it is cordoned.
        preference = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [prefer_node]}]}
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": preference}]}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name, **labels}}, "spec": spec}},
    }


def check_own_cluster(kube: KubeApi) -> None:
    """Refuse, naming them, a cluster without the APIs the demo creates objects of."""
    missing = []
    for group_version, plurals in NEEDED.items():
        served = {r["name"] for r in (kube.get(f"/apis/{group_version}") or {}).get("resources", [])}
        missing += [f"{plural}.{group_version}" for plural in plurals if plural not in served]
    if missing:
        raise SystemExit(f"{KUBECONFIG}: the cluster does not serve {', '.join(missing)}; apply the CRDs of hack/crds (docs/own_cluster.md)")


def build(kube: KubeApi, work: KubeApi) -> None:
    """The Machines, their Cluster, Secret and MachineDrainRule in ``kube`` (the management
    cluster); the Cluster API Nodes and the workloads in ``work`` (the workload cluster)."""
    if OWN_KUBECONFIG:
        check_own_cluster(kube)
    else:
        cluster_tool.set_capi_generation(cluster_tool.state_from_kubeconfig(KUBECONFIG), "v1beta2")
    for api, namespace in ((kube, NS), (kube, OCP_NS), (work, NS)):
        if api.get(f"/api/v1/namespaces/{namespace}") is None:
            api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    # The Cluster "demo"'s kubeconfig Secret: Cluster API's way to its Nodes and Pods,
    # in the workload cluster (or, with LM_KUBECONFIG, this very cluster: self-hosted).
    secret = cluster_tool.kubeconfig_secret("demo", NS, cluster_tool.inline_kubeconfig(WORKLOAD_KUBECONFIG))
    kube.create(f"/api/v1/namespaces/{NS}/secrets", secret, exists_ok=True)
    for api, name in ((work, "demo-cp-0"), (work, "demo-md-0-a"), (work, "demo-md-0-b"), (kube, "ocp-worker-0")):
        if api.get(f"/api/v1/nodes/{name}") is None:
            api.create("/api/v1/nodes", node(name))
    if work is not kube:
        # A Node of the victim's name in the management cluster, with a Pod of its own: another machine's.
        kube.create("/api/v1/nodes", {**node(VICTIM), "metadata": {**node(VICTIM)["metadata"], "labels": {"pool": "decoy"}}})
        decoy = {"metadata": {"name": "bystander"}, "spec": {"nodeName": VICTIM, "containers": [{"name": "b", "image": "registry.invalid/b:1"}]}}
        kube.create(f"/api/v1/namespaces/{NS}/pods", decoy)
    base = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}"
    kube.create(f"{base}/clusters", {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "demo"}})
    hooks = {
        "pre-drain.delete.hook.machine.cluster.x-k8s.io/backup": "demo-hook-controller",
        "pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush-logs": "demo-hook-controller",
    }
    for name, labels, machine_annotations in (
        ("demo-cp-0", {"cluster.x-k8s.io/control-plane": ""}, None),
        (VICTIM, {"cluster.x-k8s.io/deployment-name": "md-0"}, hooks),
        ("demo-md-0-b", {"cluster.x-k8s.io/deployment-name": "md-0"}, None),
    ):
        for group, kind, plural in (("infrastructure", "FakeMachine", "fakemachines"), ("bootstrap", "FakeBootstrapConfig", "fakebootstrapconfigs")):
            body = {"apiVersion": f"{group}.cluster.x-k8s.io/v1beta1", "kind": kind, "metadata": {"name": name}}
            kube.create(f"/apis/{group}.cluster.x-k8s.io/v1beta1/namespaces/{NS}/{plural}", body)
        kube.create(f"{base}/machines", capi_machine(name, labels, machine_annotations))
        kube.patch(f"{base}/machines/{name}", {"status": {"nodeRef": {"name": name}, "phase": "Running"}}, subresource_status=True)
    ocp = {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {"name": "ocp-worker-0", "labels": {"machine.openshift.io/cluster-api-machine-role": "worker"}},
        "spec": {"providerSpec": {"value": {"kind": "FakeProviderSpec"}}},
    }
    ocp_path = f"/apis/machine.openshift.io/v1beta1/namespaces/{OCP_NS}/machines"
    kube.create(ocp_path, ocp)
    kube.patch(f"{ocp_path}/ocp-worker-0", {"status": {"nodeRef": {"kind": "Node", "name": "ocp-worker-0"}, "phase": "Running"}}, subresource_status=True)
    kube.create(f"/api/v1/namespaces/{OCP_NS}/configmaps", {"metadata": {"name": "instance-ocp-worker-0"}, "data": {"state": "running"}})

    apps = f"/apis/apps/v1/namespaces/{NS}"
    work.create(f"{apps}/deployments", workload("web", 4, {}, VICTIM))
    work.create(
        f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
        {"metadata": {"name": "web"}, "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}},
    )
    work.create(f"{apps}/deployments", workload("storage", 1, {"role": "storage"}, VICTIM))
    work.create(f"{apps}/deployments", workload("monitoring", 1, {"cluster.x-k8s.io/drain": "skip"}, VICTIM))
    work.create(
        f"{apps}/daemonsets",
        {
            "metadata": {"name": "node-agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "node-agent"}},
                "template": {"metadata": {"labels": {"app": "node-agent"}}, "spec": {"containers": [{"name": "agent", "image": "registry.invalid/agent:1"}]}},
            },
        },
    )
    kube.create(
        f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}/machinedrainrules",
        {
            "apiVersion": CAPI,
            "kind": "MachineDrainRule",
            "metadata": {"name": "storage-last"},
            "spec": {"drain": {"behavior": "Drain", "order": 100}, "pods": [{"selector": {"matchLabels": {"role": "storage"}}}]},
        },
    )


def pods_on(kube: KubeApi, node_name: str) -> list[dict]:
    return kube.list("/api/v1/pods", field_selector=f"spec.nodeName={node_name}")


def wait_ready(kube: KubeApi) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = kube.list(f"/api/v1/namespaces/{NS}/pods")
        ready = [p for p in pods if any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])]
        pdb = kube.get(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web") or {}
        # web, storage, monitoring, and node-agent on every Node of the cluster.
        agents = len(kube.list("/api/v1/nodes", label_selector="pool=demo"))
        if len(ready) >= 4 + 1 + 1 + agents and (pdb.get("status") or {}).get("disruptionsAllowed") == 1:
            return
        time.sleep(0.5)
    hint = ": is kwok managing Nodes annotated kwok.x-k8s.io/node=fake with the stages of hack/kwok?" if OWN_KUBECONFIG else ""
    raise SystemExit(f"the demo workloads did not become ready{hint}")


class Timeline(threading.Thread):
    """Prints what happens to the victim Machine and its infrastructure (management
    cluster), and to its Node and the Node's pods (workload cluster)."""

    def __init__(self, kube: KubeApi, work: KubeApi, path: str, node_name: str, infra: list[str]):
        super().__init__(daemon=True)
        self.kube, self.work, self.path, self.node, self.infra = kube, work, path, node_name, infra
        self.stop = threading.Event()
        self.conditions: dict = {}
        self.pods: dict = {}
        self.hooks: list | None = None
        self.gone: set = set()

    def run(self) -> None:
        while not self.stop.is_set():
            self.machine_changes()
            self.pod_changes()
            for api, path in [*((self.kube, path) for path in self.infra), (self.work, f"/api/v1/nodes/{self.node}")]:
                if path not in self.gone and api.get(path) is None:
                    self.gone.add(path)
                    say(f"{path.split('/')[-2][:-1]} {path.rsplit('/', 1)[1]} deleted")
            time.sleep(0.3)

    def machine_changes(self) -> None:
        machine = self.kube.get(self.path)
        if machine is None:
            if self.path not in self.gone:
                self.gone.add(self.path)
                say(f"Machine {self.path.rsplit('/', 1)[1]} is gone (released)")
            return
        for condition in (machine.get("status") or {}).get("conditions") or []:
            key = (condition.get("status"), condition.get("reason"), condition.get("message"))
            if self.conditions.get(condition["type"]) != key:
                self.conditions[condition["type"]] = key
                message = (condition.get("message") or "").replace("\n", "\n" + " " * 12)
                say(f"condition {condition['type']}={condition.get('status')} {condition.get('reason', '')}: {message}")
        hooks = sorted(k.split("/", 1)[1] for k in (machine["metadata"].get("annotations") or {}) if ".delete.hook.machine.cluster.x-k8s.io" in k)
        if self.hooks != hooks:
            self.hooks = hooks
            say(f"hooks on the Machine: {', '.join(hooks) or 'none'}")

    def pod_changes(self) -> None:
        current = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods_on(self.work, self.node)}
        for key, pod in current.items():
            if pod["metadata"].get("deletionTimestamp") and self.pods.get(key) != "terminating":
                self.pods[key] = "terminating"
                say(f"evicted {key} (terminating, grace {pod['metadata'].get('deletionGracePeriodSeconds')}s)")
            self.pods.setdefault(key, "running")
        for key, state in list(self.pods.items()):
            if key not in current and state != "gone":
                self.pods[key] = "gone"
                say(f"{key} is gone from the Node")


def ansible_env() -> dict:
    return cluster_tool.ansible_environment(KUBECONFIG, ANSIBLE_DISPLAY_SKIPPED_HOSTS="false", ANSIBLE_NOCOLOR="0")


def playbook(name: str, extra: dict, prefix: str) -> subprocess.Popen:
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", name, "-e", json.dumps(extra)]
    proc = subprocess.Popen(command, cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def pump() -> None:
        # Show the tasks that changed or failed something, and the recap; the role's
        # bookkeeping tasks would drown the timeline.
        task = ""
        for raw in proc.stdout:
            line = raw.rstrip()
            if line.startswith("TASK ["):
                task = line.split("[", 1)[1].split("]", 1)[0].split(" : ")[-1]
            elif line.startswith(("changed:", "fatal:", "failed:")):
                say(f"{prefix} {line.split(':', 1)[0]}: {task}{' ' + line.split('=>', 1)[1][:300] if '=>' in line and 'changed' not in line else ''}")
            elif line.startswith("localhost") and "ok=" in line:
                say(f"{prefix} recap: {' '.join(line.split()[2:6])}")

    threading.Thread(target=pump, daemon=True).start()
    return proc


def start_cluster(state_dir: Path) -> bool:
    """Start the local control plane unless it runs or LM_KUBECONFIG names another cluster; True if started here."""
    if OWN_KUBECONFIG:
        say(f"using the cluster of LM_KUBECONFIG={KUBECONFIG}; nothing is started or stopped")
        return False
    workload_dir = state_dir / cluster_tool.WORKLOAD_SUBDIR
    started_here = not (cluster_tool.is_running(state_dir) and cluster_tool.is_running(workload_dir))
    say("starting the management and workload control planes" if started_here else "using the running control planes")
    if not cluster_tool.is_running(state_dir):
        cluster_tool.up(state_dir, quiet=True)
    cluster_tool.up(workload_dir, quiet=True, workload=True)
    return started_here


def explain_split() -> None:
    say(f"the Cluster API Machines are in the management cluster ({KUBECONFIG}); their Nodes and workloads in the")
    say(f"workload cluster ({WORKLOAD_KUBECONFIG}), reached through the Secret {NS}/demo-kubeconfig;")
    say(f"the management cluster has a Node {VICTIM} too, with the Pod bystander: another machine's, left alone")


def decoy_untouched(kube: KubeApi) -> bool:
    """The management cluster's Node of the victim's name, and its Pod, as they were."""
    decoy = kube.get(f"/api/v1/namespaces/{NS}/pods/bystander")
    untouched = kube.get(f"/api/v1/nodes/{VICTIM}") is not None and decoy is not None and not decoy["metadata"].get("deletionTimestamp")
    say(f"management cluster: Node {VICTIM} and Pod bystander {'untouched' if untouched else 'TOUCHED'}")
    return untouched


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the control plane running")
    args = parser.parse_args(argv)
    state_dir = REPO / ".cluster"
    started_here = start_cluster(state_dir)
    kube = api_from_kubeconfig(str(KUBECONFIG))
    work = kube if OWN_KUBECONFIG else api_from_kubeconfig(str(WORKLOAD_KUBECONFIG))
    try:
        if kube.get(f"/api/v1/namespaces/{NS}") is not None:
            again = f"delete the namespaces {NS} and {OCP_NS} and the Nodes demo-*" if OWN_KUBECONFIG else "`make cluster-down`"
            raise SystemExit(f"the demo already ran on this cluster: {again} and run it again")
        say("building a simulated cluster: 3 Cluster API Machines (v1beta2), 1 OpenShift Machine, kwok Nodes, workloads")
        build(kube, work)
        wait_ready(work)
        if work is not kube:
            explain_split()
        say(f"on Node {VICTIM}: " + ", ".join(sorted(p["metadata"]["name"].rsplit("-", 2)[0] for p in pods_on(work, VICTIM))))
        say("web (4 replicas) has a PodDisruptionBudget minAvailable 3: one eviction at a time, the 429s are retried;")
        say("storage is ordered last by MachineDrainRule storage-last (order 100);")
        say("monitoring carries cluster.x-k8s.io/drain=skip; node-agent is a DaemonSet")
        machine_path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}/machines/{VICTIM}"
        infra = [
            f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{NS}/fakemachines/{VICTIM}",
            f"/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/{NS}/fakebootstrapconfigs/{VICTIM}",
        ]
        timeline = Timeline(kube, work, machine_path, VICTIM, infra)
        timeline.start()
        controller = playbook("hack/demo/hook_controller.yml", {"demo_machine": VICTIM, "demo_namespace": NS}, "[hook-controller]")
        time.sleep(1)
        say(f"deleting Machine {NS}/{VICTIM} with the delete_machine role (playbooks/delete_machine.yml)")
        deletion = playbook("playbooks/delete_machine.yml", {"machine_name": VICTIM, "machine_namespace": NS, "drain_timeout": 600}, "[delete_machine]")
        deletion.wait()
        controller.wait()
        time.sleep(1)
        timeline.stop.set()
        if deletion.returncode != 0:
            say("the deletion failed")
            return 1
        say(f"Machine {VICTIM} is deleted; web is back to 4 replicas on the other Nodes behind its budget")
        if work is not kube and not decoy_untouched(kube):
            return 1

        say("deleting OpenShift Machine openshift-machine-api/ocp-worker-0; its instance is terminated by provider tasks")
        ocp = playbook(
            "playbooks/delete_machine.yml",
            {"machine_name": "ocp-worker-0", "machine_namespace": OCP_NS, "provider_tasks": str(REPO / "hack/demo/tasks/provider.yml")},
            "[delete_machine]",
        )
        ocp.wait()
        if ocp.returncode != 0:
            say("the OpenShift deletion failed")
            return 1
        say("ocp-worker-0: instance terminated, Node deleted, Machine released")
        say("running the deletion again changes nothing:")
        again = playbook("playbooks/delete_machine.yml", {"machine_name": VICTIM, "machine_namespace": NS}, "[delete_machine]")
        again.wait()
        return again.returncode
    finally:
        if started_here and not args.keep:
            cluster_tool.down(state_dir)
            say("control planes stopped")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
