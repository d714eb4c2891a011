"""Benchmark (a script, not a test): drain a Node of 100 Pods, three Deployments
each behind a PodDisruptionBudget, with machine_drain run as a playbook task
would run it, unordered and in 3 order batches. Beside each, on a fresh copy of
the same workload, the practical bound: a drainer that evicts the moment a
budget allows it (every refused Pod retried every 100 ms, concurrently), in the
same order. Prints both times, their ratio, the whole command's time (target:
at most 1.10 x the bound) and its floor (the same command on a Node with no
Pods: starting Ansible and the module, which no drain goes below), the API
requests the module sent (target: at most 2 x the Pods plus a small constant)
and its passes, and the grace-period lower bound of the ordered drain.

    python benchmarks/drain_100.py [--kubeconfig PATH] [--wait-sleep N] [--only ordered|unordered]

Without --kubeconfig a private control plane is started under .tmp/ and stopped
at the end. With one, the objects it creates are deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

# (name, replicas, grace period seconds, order, PodDisruptionBudget spec)
BATCHES = [
    ("web", 50, 2, 0, {"maxUnavailable": "25%"}),
    ("api", 30, 3, 10, {"minAvailable": "80%"}),
    ("db", 20, 4, 20, {"maxUnavailable": 5}),
]


def log(text: str) -> None:
    print(text, flush=True)


def kwok_node(name: str, pool: str) -> dict:
    return cluster_tool.kwok_node(name, {"lm-bench-pool": pool})


def ready(obj: dict) -> bool:
    if obj["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def setup(kube: KubeApi, namespace: str, node: str, spare: str, budgets: bool = True) -> None:
    pool = namespace
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for name in (node, spare):
        kube.create("/api/v1/nodes", kwok_node(name, pool))
    cluster_tool.poll(lambda: all(ready(kube.get(f"/api/v1/nodes/{n}")) for n in (node, spare)), 60, "Nodes Ready")
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

    cluster_tool.poll(all_running, 300, f"{total} Pods Ready on {node}")

    def budgets_observed() -> bool:
        for name, replicas, *_rest in BATCHES if budgets else []:
            pdb = kube.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
            status = pdb.get("status") or {}
            if status.get("observedGeneration") != pdb["metadata"]["generation"] or status.get("currentHealthy") != replicas:
                return False
        return True

    cluster_tool.poll(budgets_observed, 120, "PodDisruptionBudgets observed")
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


def practical_bound(kube: KubeApi, namespace: str, node: str, ordered: bool) -> float:
    """Seconds a drainer takes that cordons, then evicts every Pod of the current
    batch the moment its budget allows (each refused Pod retried every 100 ms,
    all at once), until the Node is empty."""
    kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})
    started = time.monotonic()
    batches = [[name] for name, *_rest in sorted(BATCHES, key=lambda b: b[3])] if ordered else [[b[0] for b in BATCHES]]

    def evict(pod: dict) -> None:
        meta = pod["metadata"]
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": meta["name"], "namespace": namespace}}
        with contextlib.suppress(ApiError):
            kube.create(f"/api/v1/namespaces/{namespace}/pods/{meta['name']}/eviction", body, retry=False)

    with ThreadPoolExecutor(max_workers=16) as pool:
        for apps in batches:
            while True:
                pods = [
                    p
                    for p in kube.list(f"/api/v1/namespaces/{namespace}/pods", field_selector=f"spec.nodeName={node}")
                    if (p["metadata"].get("labels") or {}).get("app") in apps
                ]
                if not pods:
                    break
                list(pool.map(evict, [p for p in pods if not p["metadata"].get("deletionTimestamp")]))
                time.sleep(0.1)
    return time.monotonic() - started


def run_module(kubeconfig: str, params: dict) -> tuple[dict, float]:
    env = cluster_tool.ansible_environment(kubeconfig, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", "lifecycle.machine.machine_drain"]
    command += ["-a", json.dumps(params)]
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - started
    try:
        return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"], wall
    except (ValueError, KeyError, IndexError):
        raise SystemExit(f"machine_drain did not run: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}") from None


def fresh_workload(kube: KubeApi, budgets: bool) -> tuple[str, str, str]:
    suffix = uuid.uuid4().hex[:6]
    namespace, node, spare = f"bench-{suffix}", f"bench-{suffix}-drain", f"bench-{suffix}-spare"
    log(f"setting up {sum(b[1] for b in BATCHES)} Pods on {node} ...")
    setup(kube, namespace, node, spare, budgets)
    return namespace, node, spare


def clean_up(kube: KubeApi, namespace: str, node: str, spare: str) -> None:
    kube.delete(f"/api/v1/namespaces/{namespace}")
    for name in (node, spare):
        kube.delete(f"/api/v1/nodes/{name}")


def measure_module(kube: KubeApi, kubeconfig: str, wait_sleep: int, budgets: bool, ordered: bool) -> dict | None:
    namespace, node, spare = fresh_workload(kube, budgets)
    try:
        rules = [
            {"name": f"order-{name}", "drain": {"behavior": "Drain", "order": order}, "pods": [{"selector": {"matchLabels": {"app": name}}}]}
            for name, _replicas, _grace, order, _budget in BATCHES
        ]
        clock = DeletionClock(api_from_kubeconfig(kubeconfig), node)
        params = {"node": node, "wait_sleep": wait_sleep, "wait_timeout": 600, "rules": rules if ordered else []}
        result, wall = run_module(kubeconfig, params)
        time.sleep(1)
        clock.stop()
        if result.get("failed"):
            log(f"drain failed: {result.get('msg')}")
            return None
        result["task_wall"] = wall
        result["timeline"] = clock.report()
        return result
    finally:
        clean_up(kube, namespace, node, spare)


def measure_bound(kube: KubeApi, budgets: bool, ordered: bool) -> float:
    namespace, node, spare = fresh_workload(kube, budgets)
    try:
        return practical_bound(kube, namespace, node, ordered)
    finally:
        clean_up(kube, namespace, node, spare)


def measure_floor(kube: KubeApi, kubeconfig: str, runs: int = 3) -> float:
    """The whole command's floor: the median wall time of the same machine_drain
    command on a Node with no Pods (starting Ansible and the module, connecting,
    cordoning, one look at the Pods), which no drain can go below."""
    walls = []
    for _run in range(runs):
        node = f"bench-{uuid.uuid4().hex[:6]}-empty"
        kube.create("/api/v1/nodes", kwok_node(node, "empty"))
        try:
            result, wall = run_module(kubeconfig, {"node": node, "wait_sleep": 2, "wait_timeout": 60})
            if result.get("failed"):
                raise SystemExit(f"machine_drain failed on an empty Node: {result.get('msg')}")
            walls.append(wall)
        finally:
            kube.delete(f"/api/v1/nodes/{node}")
    return sorted(walls)[len(walls) // 2]


def benchmark(kubeconfig: str, wait_sleep: int, budgets: bool = True, only: str | None = None) -> int:
    kube = api_from_kubeconfig(kubeconfig)
    pods = sum(b[1] for b in BATCHES)
    floor = measure_floor(kube, kubeconfig)
    log(f"floor: the same command on a Node with no Pods takes {floor:.1f} s (median of 3)")
    rows = []
    for ordered in (False, True):
        label = "three order batches" if ordered else "unordered"
        if only and only != ("ordered" if ordered else "unordered"):
            continue
        bound = measure_bound(kube, budgets, ordered)
        log(f"{label}: practical bound {bound:.1f} s")
        result = measure_module(kube, kubeconfig, wait_sleep, budgets, ordered)
        if result is None:
            return 1
        rows.append((label, bound, result))
    described = ", ".join(f"{name} {budget}" for name, _r, _g, _o, budget in BATCHES) if budgets else "none (--without-budgets)"
    log("")
    log(f"{pods} Pods on one Node; PodDisruptionBudgets: {described}")
    log(
        f"{'drain':<22} {'bound':>7} {'machine_drain':>14} {'ratio':>6} {'(task)':>7} {'task ratio':>10} {'above floor':>12} {'API requests':>13} {'passes':>7}"
    )
    worst = worst_task = 0.0
    for label, bound, result in rows:
        ratio = result["elapsed_seconds"] / bound
        task_ratio = result["task_wall"] / bound
        above = (result["task_wall"] - floor) / bound
        worst, worst_task = max(worst, ratio), max(worst_task, task_ratio)
        log(
            f"{label:<22} {bound:6.1f}s {result['elapsed_seconds']:13.1f}s {ratio:6.2f} {result['task_wall']:6.1f}s {task_ratio:10.2f} "
            f"{above:12.2f} {result['api_requests']:>13} {result['passes']:>7}"
        )
    log(
        f"targets: the whole command within 1.10 x the bound (worst {worst_task:.2f}; less its {floor:.1f} s floor, "
        f"which a drain of no Pods takes too: see 'above floor'); the module's own time (ratio, worst {worst:.2f}); "
        f"API requests at most 2 x {pods} Pods + a small constant"
    )
    lower_bound = sum(grace for _name, _replicas, grace, _order, _budget in BATCHES)
    log(f"grace-period lower bound of the ordered drain: {lower_bound} s ({' + '.join(str(b[2]) for b in BATCHES)})")
    for label, _bound, result in rows:
        log(f"{label}, as seen by a watch on the Node's Pods (from the first eviction):")
        for line in result["timeline"]:
            log(line)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="a running control plane (default: start a private one)")
    parser.add_argument("--wait-sleep", type=int, default=2, help="machine_drain wait_sleep (default 2, the module's default)")
    parser.add_argument("--without-budgets", action="store_true", help="no PodDisruptionBudgets (to see what the budgets cost)")
    parser.add_argument("--only", choices=["ordered", "unordered"], help="run one of the two drains")
    args = parser.parse_args(argv)
    budgets = not args.without_budgets
    if args.kubeconfig:
        return benchmark(str(Path(args.kubeconfig).resolve()), args.wait_sleep, budgets, args.only)
    state_dir = REPO / ".tmp" / f"bench-{os.getpid()}"
    log("starting a private control plane ...")
    cluster_tool.up(state_dir, quiet=True)
    try:
        return benchmark(str(state_dir / "kubeconfig"), args.wait_sleep, budgets, args.only)
    finally:
        cluster_tool.down(state_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
