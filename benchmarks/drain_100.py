"""Benchmark (a script, not a test): drain a Node of 100 Pods in 3 order batches,
each batch a Deployment behind a PodDisruptionBudget, with machine_drain run as a
playbook task would run it. Prints the wall time, the lower bound (the sum over
batches of the slowest Pod's grace period: no drain that honours the order can be
faster), the API requests the module sent and its passes.

    python benchmarks/drain_100.py [--kubeconfig PATH] [--wait-sleep N]

Without --kubeconfig a private control plane is started under .tmp/ and stopped
at the end. With one, the objects it creates are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi, api_from_kubeconfig

# (name, replicas, grace period seconds, order, PodDisruptionBudget spec)
BATCHES = [
    ("web", 50, 2, 0, {"maxUnavailable": "25%"}),
    ("api", 30, 3, 10, {"minAvailable": "80%"}),
    ("db", 20, 4, 20, {"maxUnavailable": 5}),
]


def log(text: str) -> None:
    print(text, flush=True)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)


def kwok_node(name: str, pool: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", "lm-bench-pool": pool},
        },
        "spec": {"taints": []},
    }


def ready(obj: dict) -> bool:
    if obj["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def setup(kube: KubeApi, namespace: str, node: str, spare: str, budgets: bool = True) -> None:
    pool = namespace
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for name in (node, spare):
        kube.create("/api/v1/nodes", kwok_node(name, pool))
    wait_for(lambda: all(ready(kube.get(f"/api/v1/nodes/{n}")) for n in (node, spare)), 60, "Nodes Ready")
    # Everything starts on the Node to drain; the spare takes the replacements.
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": True}})
    for name, replicas, grace, _order, budget in BATCHES:
        kube.create(
            f"/apis/apps/v1/namespaces/{namespace}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {
                            "nodeSelector": {"lm-bench-pool": pool},
                            "terminationGracePeriodSeconds": grace,
                            "containers": [{"name": name, "image": f"{name}:1"}],
                        },
                    },
                },
            },
        )
        if not budgets:
            continue
        kube.create(
            f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name},
                "spec": {"selector": {"matchLabels": {"app": name}}, **budget},
            },
        )
    total = sum(b[1] for b in BATCHES)

    def all_running() -> bool:
        pods = kube.list(f"/api/v1/namespaces/{namespace}/pods")
        return sum(1 for p in pods if ready(p) and p["spec"].get("nodeName") == node) == total

    wait_for(all_running, 300, f"{total} Pods Ready on {node}")

    def budgets_observed() -> bool:
        for name, replicas, *_rest in BATCHES if budgets else []:
            pdb = kube.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
            status = pdb.get("status") or {}
            if status.get("observedGeneration") != pdb["metadata"]["generation"] or status.get("currentHealthy") != replicas:
                return False
        return True

    wait_for(budgets_observed, 120, "PodDisruptionBudgets observed")
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": None}})


class DeletionClock:
    """Watches the Node's Pods from the side: when each got its deletionTimestamp and when it was gone."""

    def __init__(self, kube: KubeApi, node: str):
        self.kube, self.node = kube, node
        self.deleting: dict[str, float] = {}
        self.gone: dict[str, float] = {}
        self.labels: dict[str, str] = {}
        self._stop = threading.Event()
        listed = kube.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"})
        self._version = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for event in self.kube.watch("/api/v1/pods", field_selector=f"spec.nodeName={self.node}", resource_version=self._version, timeout=2):
                pod = event["object"]
                meta = pod["metadata"]
                self._version = meta["resourceVersion"]
                key = f"{meta['namespace']}/{meta['name']}"
                self.labels[key] = (meta.get("labels") or {}).get("app", "")
                if meta.get("deletionTimestamp"):
                    self.deleting.setdefault(key, time.monotonic())
                if event["type"] == "DELETED":
                    self.gone[key] = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def report(self) -> list[str]:
        if not self.deleting:
            return []
        start = min(self.deleting.values())
        lines = []
        for name, replicas, grace, order, _budget in BATCHES:
            keys = [key for key, app in self.labels.items() if app == name and key in self.deleting]
            if not keys:
                continue
            first, last = min(self.deleting[k] for k in keys) - start, max(self.deleting[k] for k in keys) - start
            gone = max(self.gone.get(k, float("nan")) for k in keys) - start
            lines.append(
                f"  order {order:>3}: {replicas} Pods, grace {grace} s - evictions accepted {first:5.1f} s to {last:5.1f} s, last Pod gone at {gone:5.1f} s"
            )
        return lines


def run_module(kubeconfig: str, params: dict) -> tuple[dict, float]:
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": str(cluster_tool.collections_root()),
            "K8S_AUTH_KUBECONFIG": kubeconfig,
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
            "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
            "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        }
    )
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", "lifecycle.machine.machine_drain"]
    command += ["-a", json.dumps(params)]
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - started
    try:
        return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"], wall
    except (ValueError, KeyError, IndexError):
        raise SystemExit(f"machine_drain did not run: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}") from None


def benchmark(kubeconfig: str, wait_sleep: int, budgets: bool = True) -> int:
    kube = api_from_kubeconfig(kubeconfig)
    suffix = uuid.uuid4().hex[:6]
    namespace, node, spare = f"bench-{suffix}", f"bench-{suffix}-drain", f"bench-{suffix}-spare"
    try:
        log(f"setting up {sum(b[1] for b in BATCHES)} Pods on {node} ...")
        setup(kube, namespace, node, spare, budgets)
        rules = [
            {"name": f"order-{name}", "drain": {"behavior": "Drain", "order": order}, "pods": [{"selector": {"matchLabels": {"app": name}}}]}
            for name, _replicas, _grace, order, _budget in BATCHES
        ]
        clock = DeletionClock(api_from_kubeconfig(kubeconfig), node)
        result, wall = run_module(kubeconfig, {"node": node, "rules": rules, "wait_sleep": wait_sleep, "wait_timeout": 600})
        time.sleep(1)
        clock.stop()
        if result.get("failed"):
            log(f"drain failed: {result.get('msg')}")
            return 1
        lower_bound = sum(grace for _name, _replicas, grace, _order, _budget in BATCHES)
        log("")
        log(f"Pods drained              {len(result['evicted'])} in {len(result['batches'])} batches (orders {[b['order'] for b in result['batches']]})")
        described = ", ".join(f"{name} {budget}" for name, _r, _g, _o, budget in BATCHES) if budgets else "none (--without-budgets)"
        log(f"PodDisruptionBudgets      {described}")
        log(f"wall time (module)        {result['elapsed_seconds']:.1f} s")
        log(f"wall time (ansible task)  {wall:.1f} s")
        log(f"lower bound               {lower_bound} s (sum over batches of the slowest Pod's grace period: {' + '.join(str(b[2]) for b in BATCHES)})")
        log(f"API requests              {result['api_requests']}")
        log(f"passes                    {result['passes']} (wait_sleep {wait_sleep} s)")
        log("as seen by a watch on the Node's Pods (from the first eviction):")
        for line in clock.report():
            log(line)
        return 0
    finally:
        kube.delete(f"/api/v1/namespaces/{namespace}")
        for name in (node, spare):
            kube.delete(f"/api/v1/nodes/{name}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="a running control plane (default: start a private one)")
    parser.add_argument("--wait-sleep", type=int, default=2, help="machine_drain wait_sleep (default 2, the module's default)")
    parser.add_argument("--without-budgets", action="store_true", help="no PodDisruptionBudgets (to see what the budgets cost)")
    args = parser.parse_args(argv)
    budgets = not args.without_budgets
    if args.kubeconfig:
        return benchmark(args.kubeconfig, args.wait_sleep, budgets)
    state_dir = REPO / ".tmp" / f"bench-{os.getpid()}"
    log("starting a private control plane ...")
    cluster_tool.up(state_dir, quiet=True)
    try:
        return benchmark(str(state_dir / "kubeconfig"), args.wait_sleep, budgets)
    finally:
        cluster_tool.down(state_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
