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
                                   [--runs N] [--collection DIR ...]

Without --kubeconfig a private control plane is started under .tmp/ and stopped
at the end. With one, the objects it creates are deleted at the end.

--collection measures the collection of another checkout (a worktree of an
older commit, say) with this script, beside this checkout's or instead of it:
each drain's bound is measured once per run and every collection's command
against it, one after the other, so their ratios are taken within minutes of
each other (a bisect compares commits this way). --runs N repeats the whole
set and prints the medians; a ratio is worth more than a time on a machine
whose load moves, and the load average is printed beside every run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
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

# The set-up's, the bound's and the clock's requests, told from the module's (lifecycle.machine) in the audit log.
BENCH_AGENT = "drain-100-bench"

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
    """Watches the Node's Pods from the side: when each got its deletionTimestamp and when it was gone; and
    the namespace's PodDisruptionBudgets: when each allowed a disruption again (for the reaction lag)."""

    def __init__(self, kube: KubeApi, node: str, namespace: str):
        self.kube, self.node, self.namespace = kube, node, namespace
        self.deleting: dict[str, float] = {}
        self.gone: dict[str, float] = {}
        self.labels: dict[str, str] = {}
        # budget name -> [(when, status.disruptionsAllowed)], as the watch reported each change
        self.allowed: dict[str, list[tuple[float, int]]] = {}
        self._stop = threading.Event()
        listed = kube.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"})
        self._version = listed["metadata"]["resourceVersion"]
        budgets = kube.request("GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets")
        now = time.monotonic()
        for budget in budgets.get("items") or []:
            self.allowed[budget["metadata"]["name"]] = [(now, (budget.get("status") or {}).get("disruptionsAllowed", 0))]
        self._budget_version = budgets["metadata"]["resourceVersion"]
        self._threads = [threading.Thread(target=self._run, daemon=True), threading.Thread(target=self._run_budgets, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _run_budgets(self) -> None:
        path = f"/apis/policy/v1/namespaces/{self.namespace}/poddisruptionbudgets"
        while not self._stop.is_set():
            for event in self.kube.watch(path, resource_version=self._budget_version, timeout=2):
                budget = event["object"]
                self._budget_version = budget["metadata"]["resourceVersion"]
                allowed = (budget.get("status") or {}).get("disruptionsAllowed", 0)
                self.allowed.setdefault(budget["metadata"]["name"], []).append((time.monotonic(), allowed))

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
        for thread in self._threads:
            thread.join(timeout=10)

    def lags(self, ordered: bool) -> dict[str, tuple[float, int]]:
        """Per group: the seconds from each moment its budget allowed a disruption again while Pods of the group were
        left to evict (ordered: from its batch becoming current, too) to the next eviction the Pod watch saw
        accepted, summed, and how many such moments there were. Both drains are seen through the same watches."""
        lags: dict[str, tuple[float, int]] = {}
        if not self.deleting:
            return lags
        eligible = min(self.deleting.values())
        for name, *_rest in sorted(BATCHES, key=lambda b: b[3]) if ordered else BATCHES:
            keys = [key for key, app in self.labels.items() if app == name]
            accepted = sorted(self.deleting[key] for key in keys if key in self.deleting)
            if not accepted:
                continue
            changes = self.allowed.get(name, [])
            moments = {when for (_before, was), (when, allowed) in itertools.pairwise(changes) if allowed > 0 >= was and when >= eligible}
            if [allowed for when, allowed in changes if when <= eligible][-1:] != [0]:
                moments.add(eligible)  # room when the group's turn came
            total, count = 0.0, 0
            for moment in sorted(moments):
                later = [when for when in accepted if when >= moment]
                if later:
                    total += later[0] - moment
                    count += 1
            lags[name] = (total, count)
            if ordered:
                eligible = max(self.gone.get(key, accepted[-1]) for key in keys)
        return lags

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


def load() -> str:
    """The machine's load average (1, 5 and 15 minutes), as uptime prints it."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def collections_root(checkout: Path) -> Path:
    """An ANSIBLE_COLLECTIONS_PATH whose lifecycle.machine is ``checkout``."""
    checkout = checkout.resolve()
    if checkout == REPO:
        return cluster_tool.collections_root()
    root = REPO / ".tmp" / "collections-bench" / checkout.name
    target = root / "ansible_collections" / "lifecycle" / "machine"
    if not target.is_symlink() or target.resolve() != checkout:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.symlink_to(checkout, target_is_directory=True)
    return root


def run_module(kubeconfig: str, params: dict, collections: Path | None = None) -> tuple[dict, float]:
    env = cluster_tool.ansible_environment(kubeconfig, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    if collections is not None:
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", "lifecycle.machine.machine_drain"]
    command += ["-a", json.dumps(params)]
    started, started_at = time.monotonic(), time.time()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        # wait4: the CPU seconds of the command and every process it waited for (Ansible's workers, the module).
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    try:
        result = json.loads(stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise SystemExit(f"machine_drain did not run: rc={proc.returncode}\n{stdout}\n{stderr}") from None
    result["command_cpu"] = usage.ru_utime + usage.ru_stime
    result["command_span"] = (started_at, started_at + wall)
    return result, wall


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


def measure_module(kube: KubeApi, kubeconfig: str, wait_sleep: int, budgets: bool, ordered: bool, *, collections: Path | None = None) -> dict | None:
    namespace, node, spare = fresh_workload(kube, budgets)
    try:
        rules = [
            {"name": f"order-{name}", "drain": {"behavior": "Drain", "order": order}, "pods": [{"selector": {"matchLabels": {"app": name}}}]}
            for name, _replicas, _grace, order, _budget in BATCHES
        ]
        clock = DeletionClock(api_from_kubeconfig(kubeconfig, user_agent=BENCH_AGENT), node, namespace)
        params = {"node": node, "wait_sleep": wait_sleep, "wait_timeout": 600, "rules": rules if ordered else []}
        result, wall = run_module(kubeconfig, params, collections)
        time.sleep(1)
        clock.stop()
        if result.get("failed"):
            log(f"drain failed: {result.get('msg')}")
            return None
        result["task_wall"] = wall
        result["namespace"] = namespace
        result["timeline"] = clock.report()
        result["lags"] = clock.lags(ordered)
        return result
    finally:
        clean_up(kube, namespace, node, spare)


def measure_bound(kube: KubeApi, budgets: bool, ordered: bool) -> tuple[float, dict[str, tuple[float, int]]]:
    """The bound's seconds, and its reaction lags (:meth:`DeletionClock.lags`)."""
    namespace, node, spare = fresh_workload(kube, budgets)
    try:
        clock = DeletionClock(kube, node, namespace)
        bound = practical_bound(kube, namespace, node, ordered)
        time.sleep(1)
        clock.stop()
        return bound, clock.lags(ordered)
    finally:
        clean_up(kube, namespace, node, spare)


def describe_lags(lags: dict[str, tuple[float, int]]) -> str:
    """``web 1.2 s / 4`` ...: per group, the summed reaction lag and the number of moments it sums."""
    return ", ".join(f"{name} {total:.1f} s / {count}" for name, (total, count) in lags.items()) or "none seen"


def measure_floor(kube: KubeApi, kubeconfig: str, runs: int = 3, collections: Path | None = None) -> tuple[float, float]:
    """The whole command's floor: the median wall time of the same machine_drain
    command on a Node with no Pods (starting Ansible and the module, connecting,
    cordoning, one look at the Pods), which no drain can go below; and its CPU seconds."""
    walls, cpus = [], []
    for _run in range(runs):
        node = f"bench-{uuid.uuid4().hex[:6]}-empty"
        kube.create("/api/v1/nodes", kwok_node(node, "empty"))
        try:
            result, wall = run_module(kubeconfig, {"node": node, "wait_sleep": 2, "wait_timeout": 60}, collections)
            if result.get("failed"):
                raise SystemExit(f"machine_drain failed on an empty Node: {result.get('msg')}")
            walls.append(wall)
            cpus.append(result["command_cpu"])
        finally:
            kube.delete(f"/api/v1/nodes/{node}")
    return median(walls), median(cpus)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def checkout_label(checkout: Path) -> str:
    """A checkout's commit (with + when it has edits), for the table."""
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "plugins"], capture_output=True, text=True, check=False).stdout.strip()
    return (head or checkout.name) + ("+" if dirty else "")


def benchmark(kubeconfig: str, args: argparse.Namespace) -> int:
    kube = api_from_kubeconfig(kubeconfig, user_agent=BENCH_AGENT)
    budgets = not args.without_budgets
    labels = [checkout_label(checkout) for checkout in args.collection]
    roots = [collections_root(checkout) for checkout in args.collection]
    kinds = [ordered for ordered in (False, True) if not args.only or args.only == ("ordered" if ordered else "unordered")]
    floors: dict[int, float] = {}
    for index, root in enumerate(roots):
        floors[index], cpu = measure_floor(kube, kubeconfig, collections=root)
        log(f"floor of {labels[index]}: the same command on a Node with no Pods takes {floors[index]:.2f} s, {cpu:.2f} CPU s (median of 3; load {load()})")
    rows: list[tuple[int, bool, int, float, dict, str]] = []  # run, ordered, checkout, bound, result, load after
    for run in range(args.runs):
        for ordered in kinds:
            label = "three order batches" if ordered else "unordered"
            bound, bound_lags = measure_bound(kube, budgets, ordered)
            log(f"run {run + 1}, {label}: practical bound {bound:.1f} s, reaction lags {describe_lags(bound_lags)} (load {load()})")
            # Alternate which collection goes first, so that none always follows the bound.
            order = list(range(len(roots)))
            if run % 2:
                order.reverse()
            for index in order:
                result = measure_module(kube, kubeconfig, args.wait_sleep, budgets, ordered, collections=roots[index])
                if result is None:
                    return 1
                rows.append((run, ordered, index, bound, result, load()))
                log(
                    f"run {run + 1}, {label}, {labels[index]}: command {result['task_wall']:.1f} s ({result['task_wall'] / bound:.2f} x the bound), "
                    f"module {result['elapsed_seconds']:.1f} s ({result['elapsed_seconds'] / bound:.2f} x), {result['command_cpu']:.1f} CPU s (load {load()}; "
                    f"namespace {result['namespace']}, from {result['command_span'][0]:.3f} to {result['command_span'][1]:.3f});"
                    f" reaction lags {describe_lags(result['lags'])}"
                )
    report(rows, labels, floors, kinds, budgets)
    return 0


def report(rows: list[tuple[int, bool, int, float, dict, str]], labels: list[str], floors: dict[int, float], kinds: list[bool], budgets: bool) -> None:
    """Every run's figures, then the medians of the ratios and the target's verdict."""
    pods = sum(b[1] for b in BATCHES)
    described = ", ".join(f"{name} {budget}" for name, _r, _g, _o, budget in BATCHES) if budgets else "none (--without-budgets)"
    log("")
    log(f"{pods} Pods on one Node; PodDisruptionBudgets: {described}")
    log(
        f"{'drain':<20} {'collection':<10} {'run':>3} {'bound':>6} {'command':>8} {'cmd ratio':>9} {'module':>7} {'mod ratio':>9} "
        f"{'above floor':>11} {'requests':>8} {'passes':>6} {'CPU s':>6}  load after"
    )
    worst: dict[int, float] = {}
    summary = []
    for ordered in kinds:
        label = "three order batches" if ordered else "unordered"
        for index, name in enumerate(labels):
            mine = [row for row in rows if row[1] == ordered and row[2] == index]
            for run, _ordered, _index, bound, result, after in mine:
                log(
                    f"{label:<20} {name:<10} {run + 1:>3} {bound:5.1f}s {result['task_wall']:7.1f}s {result['task_wall'] / bound:9.2f} "
                    f"{result['elapsed_seconds']:6.1f}s {result['elapsed_seconds'] / bound:9.2f} {(result['task_wall'] - floors[index]) / bound:11.2f} "
                    f"{result['api_requests']:>8} {result['passes']:>6} {result['command_cpu']:6.1f}  {after}"
                )
            command = median([row[4]["task_wall"] / row[3] for row in mine])
            module = median([row[4]["elapsed_seconds"] / row[3] for row in mine])
            worst[index] = max(worst.get(index, 0.0), command)
            summary.append(f"{label:<20} {name:<10} command {command:.2f} x the bound, module {module:.2f} x (median of {len(mine)})")
    log("")
    log(f"medians of the ratios (floor: {', '.join(f'{labels[i]} {floors[i]:.2f} s' for i in floors)}):")
    for line in summary:
        log(f"  {line}")
    for index, ratio in worst.items():
        verdict = "met" if ratio <= 1.10 else "MISSED"
        log(f"target (the whole command within 1.10 x the bound, ordered and unordered) for {labels[index]}: {verdict} (worst median {ratio:.2f})")
    log(f"API requests: at most 2 x {pods} Pods + a small constant; grace-period lower bound of the ordered drain: {sum(b[2] for b in BATCHES)} s")
    last = max(row[0] for row in rows)
    for run, ordered, index, _bound, result, _after in rows:
        if run == last:
            log(f"{'three order batches' if ordered else 'unordered'} ({labels[index]}), as seen by a watch on the Node's Pods (from the first eviction):")
            for line in result["timeline"]:
                log(line)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="a running control plane (default: start a private one)")
    parser.add_argument("--wait-sleep", type=int, default=2, help="machine_drain wait_sleep (default 2, the module's default)")
    parser.add_argument("--without-budgets", action="store_true", help="no PodDisruptionBudgets (to see what the budgets cost)")
    parser.add_argument("--only", choices=["ordered", "unordered"], help="run one of the two drains")
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole set N times and print the medians (default 1)")
    parser.add_argument(
        "--collection", action="append", type=Path, default=[], metavar="DIR", help="a checkout whose collection to measure (repeatable; default: this one)"
    )
    args = parser.parse_args(argv)
    args.collection = [path.resolve() for path in args.collection] or [REPO]
    for checkout in args.collection:
        if not (checkout / "plugins" / "modules" / "machine_drain.py").is_file():
            parser.error(f"{checkout} is not a checkout of the collection")
    if args.kubeconfig:
        return benchmark(str(Path(args.kubeconfig).resolve()), args)
    state_dir = REPO / ".tmp" / f"bench-{os.getpid()}"
    log("starting a private control plane ...")
    cluster_tool.up(state_dir, quiet=True)
    try:
        return benchmark(str(state_dir / "kubeconfig"), args)
    finally:
        cluster_tool.down(state_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
