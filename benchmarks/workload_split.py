"""Benchmark (a script, not a test): the cost of the management / workload split.

The same work is done three ways, in one run, and the wall times are printed:

- ``one cluster``: Machines and Nodes in the management cluster
  (``workload_cluster: {source: management}``, a self-hosted cluster);
- ``split``: Machines in the management cluster, Nodes in a workload cluster
  reached through its ``<cluster>-kubeconfig`` Secret;
- ``split +50 ms``: the same, with the workload cluster behind a proxy that
  delays every request by 50 ms (tests/faultproxy.py), as a remote workload
  cluster would be.

The work: ``machine_drain`` of one Machine's Node with ``--pods`` Pods, then
``machine_delete`` of ``--machines`` Machines with 3 Pods each.

    python benchmarks/workload_split.py [--machines 10] [--pods 30] [--delay-ms 50]

Two private control planes are started under .tmp/ and stopped at the end.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))
sys.path.insert(0, str(REPO / "tests"))

import cluster as cluster_tool
from faultproxy import FaultProxy, load_kubeconfig

sys.path.insert(0, str(cluster_tool.collections_root()))

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

V = "v1beta2"
CAPI = f"cluster.x-k8s.io/{V}"


def log(text: str) -> None:
    print(text, flush=True)


def capi(namespace: str, plural: str, name: str | None = None) -> str:
    return f"/apis/{CAPI}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


def node_body(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": {"type": "kwok", "kubernetes.io/hostname": name}},
        "spec": {},
    }


def pod_body(name: str, node: str) -> dict:
    container = {"name": "c", "image": "registry.invalid/bench:1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [container]},
    }


def machine_body(name: str, cluster: str, control_plane: bool = False) -> dict:
    labels = {"cluster.x-k8s.io/cluster-name": cluster}
    if control_plane:
        labels["cluster.x-k8s.io/control-plane"] = ""
    return {
        "apiVersion": CAPI,
        "kind": "Machine",
        "metadata": {"name": name, "labels": labels, "finalizers": [] if control_plane else ["machine.cluster.x-k8s.io"]},
        "spec": {
            "clusterName": cluster,
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": name}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": name},
        },
    }


def wait(predicate, timeout: float, what: str) -> None:
    cluster_tool.poll(predicate, timeout, what, 0.2)


class Scenario:
    """One way of doing the work: where the Nodes go, and what the Machines' Secret says."""

    def __init__(self, label: str, management: KubeApi, nodes: KubeApi, secret_kubeconfig: str | None):
        self.label = label
        self.management, self.nodes = management, nodes
        self.secret_kubeconfig = secret_kubeconfig
        self.namespace = f"bench-{uuid.uuid4().hex[:6]}"
        self.cluster = "bench"
        self.node_names: list[str] = []

    @property
    def option(self) -> dict:
        return {"source": "management"} if self.secret_kubeconfig is None else {}

    def setup(self, machines: int, pods_per_machine: int) -> list[str]:
        for api in {id(self.management): self.management, id(self.nodes): self.nodes}.values():
            api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        if self.secret_kubeconfig is not None:
            self.management.create(
                f"/api/v1/namespaces/{self.namespace}/secrets", cluster_tool.kubeconfig_secret(self.cluster, self.namespace, self.secret_kubeconfig)
            )
        self.management.create(capi(self.namespace, "clusters"), {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": self.cluster}})
        self.management.create(capi(self.namespace, "machines"), machine_body("cp-0", self.cluster, control_plane=True))
        names = []
        for index in range(machines):
            node = f"{self.namespace}-n{index}"
            self.nodes.create("/api/v1/nodes", node_body(node))
            self.node_names.append(node)
            for pod in range(pods_per_machine):
                self.nodes.create(f"/api/v1/namespaces/{self.namespace}/pods", pod_body(f"p{index}-{pod}", node))
            name = f"m{index}"
            self.management.create(capi(self.namespace, "machines"), machine_body(name, self.cluster))
            self.management.request(
                "PATCH",
                capi(self.namespace, "machines", name) + "/status",
                body={"status": {"nodeRef": {"name": node}}},
                content_type="application/merge-patch+json",
            )
            names.append(name)
        total = machines * pods_per_machine
        wait(
            lambda: sum(1 for p in self.nodes.list(f"/api/v1/namespaces/{self.namespace}/pods") if (p.get("status") or {}).get("phase") == "Running") == total,
            120,
            "Pods running",
        )
        return names

    def cleanup(self) -> None:
        for node in self.node_names:
            self.nodes.delete(f"/api/v1/nodes/{node}")
        for obj in self.management.list(capi(self.namespace, "machines")):
            path = capi(self.namespace, "machines", obj["metadata"]["name"])
            self.management.patch(path, {"metadata": {"finalizers": None}})
            self.management.delete(path)
        for api in {id(self.management): self.management, id(self.nodes): self.nodes}.values():
            api.delete(f"/api/v1/namespaces/{self.namespace}")


def run_module(kubeconfig: str, module: str, params: dict) -> tuple[float, dict]:
    command = [
        str(Path(sys.executable).parent / "ansible"),
        "localhost",
        "-c",
        "local",
        "-i",
        "localhost,",
        "-m",
        f"lifecycle.machine.{module}",
        "-a",
        json.dumps(params),
    ]
    env = cluster_tool.ansible_environment(kubeconfig)
    env.update({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800, check=False)
    elapsed = time.monotonic() - started
    result = json.loads(proc.stdout[proc.stdout.index("{\n") :])["plays"][0]["tasks"][0]["hosts"]["localhost"]
    if result.get("failed") or not result.get("completed"):
        raise RuntimeError(f"{module} did not complete: {result.get('msg') or result.get('progress')}")
    return elapsed, result


def measure(scenario: Scenario, kubeconfig: str, machines: int, pods: int) -> dict:
    figures = {}
    names = scenario.setup(1, pods)
    try:
        seconds, result = run_module(kubeconfig, "machine_drain", {"machine": names[0], "namespace": scenario.namespace, "workload_cluster": scenario.option})
        figures["drain"] = (seconds, result.get("api_requests"))
    finally:
        scenario.cleanup()
    scenario.namespace = f"bench-{uuid.uuid4().hex[:6]}"
    scenario.node_names = []
    names = scenario.setup(machines, 3)
    try:
        listed = [{"name": name, "namespace": scenario.namespace} for name in names]
        seconds, result = run_module(kubeconfig, "machine_delete", {"machines": listed, "workload_cluster": scenario.option})
        figures["delete"] = (seconds, result.get("api_requests"))
    finally:
        scenario.cleanup()
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machines", type=int, default=10)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    args = parser.parse_args(argv)
    base = REPO / ".tmp" / f"bench-split-{os.getpid()}"
    management_dir, workload_dir = base / "management", base / "workload"
    proxy = None
    try:
        log("starting the management and workload control planes ...")
        cluster_tool.up(management_dir, quiet=True)
        cluster_tool.up(workload_dir, quiet=True, workload=True)
        management_config, workload_config = str(management_dir / "kubeconfig"), str(workload_dir / "kubeconfig")
        cluster_tool.set_capi_generation(cluster_tool.state_from_kubeconfig(Path(management_config)), V)
        management, workload = api_from_kubeconfig(management_config), api_from_kubeconfig(workload_config)
        with tempfile.TemporaryDirectory() as scratch:
            config = load_kubeconfig(workload_config)
            ca_file = Path(scratch) / "ca.crt"
            ca_file.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
            proxy = FaultProxy(config["clusters"][0]["cluster"]["server"], ca_file, rate=1.0, kinds=["delay"], delay_seconds=args.delay_ms / 1000)
            proxy.start()
            proxy.kubeconfig_from(workload_config, Path(scratch) / "proxy.kubeconfig")
            scenarios = [
                Scenario("one cluster", management, management, None),
                Scenario("split", management, workload, Path(workload_config).read_text()),
                Scenario(f"split +{args.delay_ms:g} ms", management, workload, Path(proxy.kubeconfig).read_text()),
            ]
            rows = []
            for scenario in scenarios:
                log(f"{scenario.label}: drain of 1 Machine with {args.pods} Pods, then delete of {args.machines} Machines ...")
                rows.append((scenario.label, measure(scenario, management_config, args.machines, args.pods)))
        log("")
        log(f"{'':16} {'drain (s)':>10} {'requests':>9} {'delete (s)':>11} {'requests':>9}")
        for label, figures in rows:
            (drain, drain_requests), (delete, delete_requests) = figures["drain"], figures["delete"]
            log(f"{label:16} {drain:10.1f} {drain_requests!s:>9} {delete:11.1f} {delete_requests!s:>9}")
        one = rows[0][1]
        for label, figures in rows[1:]:
            log(f"{label}: drain x{figures['drain'][0] / one['drain'][0]:.2f}, delete x{figures['delete'][0] / one['delete'][0]:.2f} of one cluster")
        return 0
    finally:
        if proxy is not None:
            proxy.stop()
        cluster_tool.down(workload_dir)
        cluster_tool.down(management_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
