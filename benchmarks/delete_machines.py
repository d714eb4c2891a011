"""Benchmark (a script, not a test): delete 1 and then 20 Cluster API Machines
(3 Pods each, on their own kwok Nodes, with infrastructure and bootstrap
objects) with playbooks/delete_machine.yml in one run each, and print the
wall times and their ratio (target: deleting 20 costs at most 1.5 x one),
and, from the control plane's audit log, the collection's requests on each
Machine (by verb) per Machine and per round (one machine_delete call).

    python benchmarks/delete_machines.py [--kubeconfig PATH] [--machines 20] [--concurrency 20]

Without --kubeconfig a private control plane is started under .tmp/ and stopped
at the end. With one, the objects it creates are deleted at the end.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

CAPI = "cluster.x-k8s.io/v1beta2"
PODS_PER_MACHINE = 3
GRACE_SECONDS = 2


def log(text: str) -> None:
    print(text, flush=True)


def node_ready(node: dict | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in ((node or {}).get("status") or {}).get("conditions") or [])


def machine(name: str, run: str, node: str | None = None, control_plane: bool = False) -> dict:
    labels = {"cluster.x-k8s.io/cluster-name": "lm-bench", "lm-bench": run}
    if control_plane:
        labels["cluster.x-k8s.io/control-plane"] = ""
        labels.pop("lm-bench")
    refs = {
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": name}},
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": name},
    }
    return {
        "apiVersion": CAPI,
        "kind": "Machine",
        "metadata": {"name": name, "labels": labels, "finalizers": ["machine.cluster.x-k8s.io"]},
        "spec": {"clusterName": "lm-bench", **refs},
    }


def setup(kube: KubeApi, kubeconfig: str, namespace: str, run: str, count: int) -> None:
    """``count`` worker Machines, each on a kwok Node with 3 Pods, in a Cluster with a control-plane Machine.
    The Cluster is self-hosted: its kubeconfig Secret points at the cluster of ``kubeconfig`` itself."""
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}}, exists_ok=True)
    secret = cluster_tool.kubeconfig_secret("lm-bench", namespace, cluster_tool.inline_kubeconfig(kubeconfig))
    kube.create(f"/api/v1/namespaces/{namespace}/secrets", secret, exists_ok=True)
    cluster_tool.poll(lambda: kube.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"), 60, "the namespace's default ServiceAccount")
    kube.create(f"/apis/{CAPI}/namespaces/{namespace}/clusters", {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "lm-bench"}}, exists_ok=True)
    kube.create(f"/apis/{CAPI}/namespaces/{namespace}/machines", machine("control-plane-0", run, control_plane=True), exists_ok=True)
    nodes = []
    for index in range(count):
        name = f"{run}-{index:02d}"
        kube.create("/api/v1/nodes", cluster_tool.kwok_node(name))
        nodes.append(name)
        for kind, plural, group in (("FakeMachine", "fakemachines", "infrastructure"), ("FakeBootstrapConfig", "fakebootstrapconfigs", "bootstrap")):
            kube.create(
                f"/apis/{group}.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/{plural}",
                {"apiVersion": f"{group}.cluster.x-k8s.io/v1beta1", "kind": kind, "metadata": {"name": name}},
            )
        kube.create(f"/apis/{CAPI}/namespaces/{namespace}/machines", machine(name, run))
        kube.patch(f"/apis/{CAPI}/namespaces/{namespace}/machines/{name}", {"status": {"nodeRef": {"name": name}}}, subresource_status=True)
        for pod_index in range(PODS_PER_MACHINE):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-p{pod_index}", "labels": {"app": "bench"}},
                "spec": {"nodeName": name, "terminationGracePeriodSeconds": GRACE_SECONDS, "containers": [{"name": "c", "image": "bench"}]},
            }
            kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)
    cluster_tool.poll(lambda: all(node_ready(kube.get(f"/api/v1/nodes/{n}")) for n in nodes), 120, "Nodes Ready")

    def running() -> bool:
        pods = kube.list(f"/api/v1/namespaces/{namespace}/pods", label_selector="app=bench")
        return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") >= count * PODS_PER_MACHINE

    cluster_tool.poll(running, 120, "Pods running")


def delete(kubeconfig: str, namespace: str, run: str, concurrency: int) -> tuple[float, str]:
    env = cluster_tool.ansible_environment(kubeconfig, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks")
    extra = {"machine_label_selector": f"lm-bench={run}", "machine_namespace": namespace, "concurrency": concurrency, "drain_timeout": 300}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(REPO / "playbooks" / "delete_machine.yml")]
    command += ["-e", json.dumps(extra)]
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"the deletion failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return wall, proc.stdout


def machine_requests(audit_log: Path, namespace: str, run: str, since: str) -> tuple[collections.Counter, int, collections.Counter]:
    """The collection's requests on the Machines of ``run`` (by verb, a watch apart from a list)
    since ``since`` (an audit timestamp), how many Machines they touched, and its requests on the
    namespace's Machines as a collection (lists and watches, shared by every Machine of the run)."""
    verbs: collections.Counter = collections.Counter()
    shared: collections.Counter = collections.Counter()
    machines = set()
    for line in audit_log.read_text().splitlines() if audit_log.exists() else []:
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if ref.get("resource") != "machines" or ref.get("namespace") != namespace or event.get("requestReceivedTimestamp", "") < since:
            continue
        if not (event.get("userAgent") or "").startswith("lifecycle.machine") or event.get("stage") not in (None, "ResponseComplete"):
            continue
        if not ref.get("name"):
            shared[event["verb"]] += 1
            continue
        if not str(ref["name"]).startswith(run):
            continue
        verbs[f"{event['verb']}{'/' + ref['subresource'] if ref.get('subresource') else ''}"] += 1
        machines.add(ref["name"])
    return verbs, len(machines), shared


def rounds_of(stdout: str) -> int:
    """How many machine_delete calls (rounds) the playbook made: one progress report each."""
    return max(1, stdout.count(" Machines after ") + stdout.count(" Machine after "))


def audit_now() -> str:
    """Now, as the audit log writes its timestamps (so they compare as text)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def benchmark(kubeconfig: str, count: int, concurrency: int) -> int:
    kube = api_from_kubeconfig(kubeconfig)
    cluster_tool.set_capi_generation(cluster_tool.state_from_kubeconfig(Path(kubeconfig)), "v1beta2")
    kube.discovery.invalidate()
    suffix = uuid.uuid4().hex[:5]
    namespace = f"bench-del-{suffix}"
    walls = {}
    try:
        for machines in (1, count):
            run = f"r{machines}-{suffix}"
            log(f"setting up {machines} Machine(s), {PODS_PER_MACHINE} Pods each ...")
            setup(kube, kubeconfig, namespace, run, machines)
            since = audit_now()
            wall, stdout = delete(kubeconfig, namespace, run, concurrency)
            if os.environ.get("LM_BENCH_VERBOSE"):
                log(stdout[-2500:])
            left = kube.list(f"/apis/{CAPI}/namespaces/{namespace}/machines", label_selector=f"lm-bench={run}")
            if left:
                raise SystemExit(f"{len(left)} Machines were not deleted")
            walls[machines] = wall
            log(f"deleted {machines} Machine(s) in {wall:.1f} s (ansible-playbook, start to end)")
            verbs, touched, shared = machine_requests(Path(kubeconfig).parent / "audit.log", namespace, run, since)
            if touched:
                rounds = rounds_of(stdout)
                per_machine = ", ".join(f"{verb} {n / touched:.1f}" for verb, n in sorted(verbs.items()))
                log(f"  the collection's requests on each Machine (audit log), per Machine: {per_machine}; {rounds} round(s)")
                together = ", ".join(f"{verb} {n}" for verb, n in sorted(shared.items())) or "none"
                log(f"  and on the namespace's Machines as a collection, for all {touched} together: {together}")
        ratio = walls[count] / walls[1]
        log("")
        log(f"{'Machines':>9} {'wall time':>10}")
        for machines, wall in walls.items():
            log(f"{machines:>9} {wall:9.1f}s")
        log(f"ratio {count}/1: {ratio:.2f} (target: at most 1.5; concurrency {concurrency}, {PODS_PER_MACHINE} Pods per Machine, grace {GRACE_SECONDS} s)")
        return 0
    finally:
        for path in (f"/apis/{CAPI}/namespaces/{namespace}/machines", f"/apis/{CAPI}/namespaces/{namespace}/clusters"):
            for item in kube.list(path):
                kube.patch(f"{path}/{item['metadata']['name']}", {"metadata": {"finalizers": None}})
        kube.delete(f"/api/v1/namespaces/{namespace}")
        for node in kube.list("/api/v1/nodes"):
            if node["metadata"]["name"].endswith(suffix) or f"-{suffix}-" in node["metadata"]["name"]:
                kube.delete(f"/api/v1/nodes/{node['metadata']['name']}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="a running control plane (default: start a private one)")
    parser.add_argument("--machines", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args(argv)
    if args.kubeconfig:
        return benchmark(str(Path(args.kubeconfig).resolve()), args.machines, args.concurrency)
    state_dir = REPO / ".tmp" / f"bench-{os.getpid()}"
    log("starting a private control plane ...")
    cluster_tool.up(state_dir, quiet=True)
    try:
        return benchmark(str(state_dir / "kubeconfig"), args.machines, args.concurrency)
    finally:
        cluster_tool.down(state_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
