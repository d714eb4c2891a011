"""Benchmark (a script, not a test): how long a Machine waits at a hook's gate
before its hook controller has done the work and removed the hook.

For each of --machines Machines carrying a preDrain hook, the Machine's deletion
is started (the moment it reaches the gate) and the time until the hook is gone
is measured, served by:

- the rulebook: ``ansible-rulebook`` with the ``machine_gates`` source and the
  ``serve_gates`` rulebook, running all along (ansible-playbook start included);
- the one-shot role: the ``hook_controller`` role already running and waiting
  for that Machine (its best case; from a schedule, add up to the interval).

The work is one debug task. Prints each latency, the median and the worst
(target: under 1.5 s), and where it goes: until the work starts, then until the hook is removed.

    python benchmarks/gate_latency.py [--kubeconfig PATH] [--machines 5]
    python benchmarks/gate_latency.py --real-controller capi|mapi [--machines 5]

Without --kubeconfig a private control plane is started under .tmp/ and stopped
at the end; its OpenShift Machines have no controller. With --real-controller,
``hack/controllers.py`` starts the real Cluster API manager (management and
workload control planes) or the real OpenShift machine controller instead, and
stops it at the end, pass or fail; the Machines (each with its kwok Node) are
the controller's, and a second latency is measured: from the hook's removal
until the controller moves on, which both controllers show by cordoning the
Node first (polled every 20 ms, like the hook).

Measured on the project's 2-core machine, 5 Machines per row, median / worst,
quiet (load average 0.9 to 1.2), after the serve_event entry point (1ff3718);
docs/benchmarks.md has the figures before it and where the time goes:

| Controller | Served by | deletion -> hook removed | hook removed -> Node cordoned |
| --- | --- | --- | --- |
| Cluster API v1.14.2 | rulebook | 1.39 / 1.43 s | 0.65 / 0.69 s |
| Cluster API v1.14.2 | one-shot role | 0.79 / 0.85 s | 0.28 / 0.32 s |
| OpenShift machine controller | rulebook | 1.36 / 1.42 s | 0.01 / 0.01 s |
| OpenShift machine controller | one-shot role | 0.73 / 0.79 s | 0.01 / 0.04 s |
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import cluster as cluster_tool
import controllers

sys.path.insert(0, str(cluster_tool.collections_root()))

from khelpers import OPENSHIFT_MACHINES, fake_node, node_ready, openshift_machine, stop_process
from rulebook import Rulebook

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

OWNER = "bench-gates"
HOOK = "bench-hook"
CAPI_HOOK = f"pre-drain.delete.hook.machine.cluster.x-k8s.io/{HOOK}"
POLL = 0.02
# The work: one debug task, which also notes the wall clock it ran at (a lookup on the
# controller, a few ms) so that the latency splits into "until the work starts" (the event,
# ansible-playbook's start, the role) and "from the work to the hook's removal" (one module).
WORK = """- name: Do the hook's work
  ansible.builtin.debug:
    msg: >-
      serving {{{{ hook_controller_machine_info.name }}}}
      {{{{ lookup('ansible.builtin.pipe', 'date +%s.%N > {stamps}/' ~ hook_controller_machine_info.name) }}}}
"""
ROLE_PLAY = """- name: One-shot hook controller
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Serve the hook
      ansible.builtin.include_role:
        name: lifecycle.machine.hook_controller
      vars:
        hook_controller_hook_name: {hook}
        hook_controller_hook_owner: {owner}
        hook_controller_point: preDrain
        hook_controller_machine: "{{{{ machine }}}}"
        hook_controller_namespace: "{{{{ namespace }}}}"
        hook_controller_tasks_file: {work}
        hook_controller_wait_timeout: 120
"""


def log(text: str) -> None:
    print(text, flush=True)


def until(predicate: Callable[[], object], timeout: float, what: str) -> float:
    """Seconds until ``predicate`` holds (polled every 20 ms); exits naming ``what`` after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(POLL)
    raise SystemExit(f"{what} did not happen within {timeout} s")


# ---------------------------------------------------------------------------
# Where the Machines are: a control plane with no controller, or with a real one


class NoController:
    """OpenShift Machines no controller reconciles (a finalizer keeps them at the gate)."""

    title = "OpenShift Machines (no controller)"

    def __init__(self, kube: KubeApi, namespace: str):
        self.kube, self.namespace = kube, namespace
        self.collection = OPENSHIFT_MACHINES.format(ns=namespace)
        kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})

    def prepare(self, names: list[str]) -> None:
        for name in names:
            self.kube.create(self.collection, openshift_machine(name, {"preDrain": [{"name": HOOK, "owner": OWNER}]}))

    def path(self, name: str) -> str:
        return f"{self.collection}/{name}"

    def hooked(self, name: str) -> bool:
        return bool(((self.kube.get(self.path(name)) or {}).get("spec", {}).get("lifecycleHooks") or {}).get("preDrain"))

    def moved_on(self, name: str) -> bool | None:
        """Whether the controller went past the gate; None: no controller to follow."""
        return None

    def clean_up(self) -> None:
        for machine in self.kube.list(self.collection):
            self.kube.patch(f"{self.collection}/{machine['metadata']['name']}", {"metadata": {"finalizers": None}})
        self.kube.delete(f"/api/v1/namespaces/{self.namespace}")


class RealOpenShift(NoController):
    """OpenShift Machines of the real machine controller: the fake actuator "creates"
    each instance, nodelink links its kwok Node, the Machine runs."""

    title = "the real OpenShift machine controller"

    def prepare(self, names: list[str]) -> None:
        for name in names:
            self.kube.create(self.collection, controllers.mapi_machine(name, self.namespace, hooks={"preDrain": [{"name": HOOK, "owner": OWNER}]}))
        for name in names:
            provider_id = cluster_tool.poll(lambda n=name: (self.kube.get(self.path(n)) or {}).get("spec", {}).get("providerID"), 90, f"{name}'s providerID")
            node = fake_node(name)
            node["spec"]["providerID"] = provider_id
            self.kube.create("/api/v1/nodes", node)
        for name in names:
            cluster_tool.poll(lambda n=name: (self.kube.get(self.path(n)) or {}).get("status", {}).get("phase") == "Running", 120, f"{name} Running")

    def moved_on(self, name: str) -> bool:
        return bool(((self.kube.get(f"/api/v1/nodes/{name}") or {}).get("spec") or {}).get("unschedulable"))

    def clean_up(self) -> None:
        """Nothing: the controller deletes the Machines; the control plane goes at the end."""


class RealClusterApi(NoController):
    """Cluster API v1beta2 Machines of the real manager in the management plane, their
    kwok Nodes in the workload plane, under one Cluster with an active control-plane Machine."""

    title = "the real Cluster API manager"

    def __init__(self, kube: KubeApi, namespace: str, workload_kubeconfig: str):
        self.kube, self.namespace = kube, namespace
        self.workload = api_from_kubeconfig(workload_kubeconfig)
        self.collection = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines"
        self.cluster = "bench"
        kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        for body in controllers.capi_cluster_objects(self.cluster, namespace, cluster_tool.inline_kubeconfig(workload_kubeconfig)):
            self._create(body)
        self._provisioned(f"{self.cluster}-control-plane-0")

    def _create(self, body: dict) -> None:
        group_version, kind = body["apiVersion"], body["kind"]
        plural = {"Secret": "secrets"}.get(kind) or kind.lower() + "s"
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        self.kube.create(f"{base}/namespaces/{self.namespace}/{plural}", body)

    def _provisioned(self, name: str) -> None:
        path = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{self.namespace}/fakemachines/{name}"
        self.kube.patch(path, controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)

    def prepare(self, names: list[str]) -> None:
        for name in names:
            provider_id = f"fake://{self.namespace}/{name}"
            for body in controllers.capi_machine_objects(name, self.namespace, self.cluster, provider_id=provider_id, annotations={CAPI_HOOK: OWNER}):
                self._create(body)
            self._provisioned(name)
            node = fake_node(name)
            node["spec"]["providerID"] = provider_id
            self.workload.create("/api/v1/nodes", node)
        for name in names:
            cluster_tool.poll(lambda n=name: node_ready(self.workload.get(f"/api/v1/nodes/{n}")), 90, f"Node {name} Ready")
            cluster_tool.poll(lambda n=name: (self.kube.get(self.path(n)) or {}).get("status", {}).get("nodeRef"), 120, f"{name}'s nodeRef")

    def hooked(self, name: str) -> bool:
        return CAPI_HOOK in ((self.kube.get(self.path(name)) or {}).get("metadata", {}).get("annotations") or {})

    def moved_on(self, name: str) -> bool:
        return bool(((self.workload.get(f"/api/v1/nodes/{name}") or {}).get("spec") or {}).get("unschedulable"))

    def clean_up(self) -> None:
        """Nothing: the manager deletes the Machines; the control planes go at the end."""


# ---------------------------------------------------------------------------


class Bench:
    def __init__(self, machines: NoController, kubeconfig: str, workdir: Path):
        self.machines, self.kube, self.kubeconfig, self.workdir = machines, machines.kube, kubeconfig, workdir
        self.namespace = machines.namespace
        self.work = workdir / "work.yml"
        self.stamps = workdir / "stamps"
        self.stamps.mkdir()
        self.work.write_text(WORK.format(stamps=self.stamps))
        self.moved: dict[str, list[float]] = {"rulebook": [], "one-shot": []}
        # Per way of serving: (deletion -> the work starts, the work -> the hook removed).
        self.parts: dict[str, list[tuple[float, float]]] = {"rulebook": [], "one-shot": []}

    def served(self, name: str, served_by: str) -> float:
        """From the Machine's deletion: the seconds until its hook is gone (and notes how
        long the controller then took to move on, when there is one)."""
        deleted_at = time.time()
        self.kube.delete(self.machines.path(name))  # the deletion starts: the Machine is at its preDrain gate
        latency = until(lambda: not self.machines.hooked(name), 120, f"the removal of {name}'s hook")
        note = ""
        stamp = self.stamps / name
        if stamp.exists():
            to_work = float(stamp.read_text().strip()) - deleted_at
            self.parts[served_by].append((to_work, latency - to_work))
            note = f" (the work started at {to_work:.2f} s)"
        if self.machines.moved_on(name) is not None:
            self.moved[served_by].append(until(lambda: self.machines.moved_on(name), 120, f"the controller moving on with {name}"))
            note += f", then the controller cordoned the Node in {self.moved[served_by][-1]:.2f} s"
        log(f"  {served_by:<11} Machine {name}: {latency:.2f} s{note}")
        return latency

    def with_rulebook(self, names: list[str]) -> list[float]:
        variables = {"hook_owner": OWNER, "hook_name": HOOK, "hook_points": ["preDrain"], "machine_namespace": self.namespace}
        variables["hook_tasks_file"] = str(self.work)
        rulebook = Rulebook("lifecycle.machine.serve_gates", variables, cluster_tool.ansible_environment(self.kubeconfig), self.workdir / "rulebook")
        latencies = []
        try:
            rulebook.start()
            for name in names:
                time.sleep(1)
                latencies.append(self.served(name, "rulebook"))
        finally:
            rulebook.stop()
        return latencies

    def with_role(self, names: list[str]) -> list[float]:
        play = self.workdir / "hook_controller.yml"
        play.write_text(ROLE_PLAY.format(hook=HOOK, owner=OWNER, work=self.work))
        latencies = []
        for name in names:
            command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(play)]
            command += ["-e", json.dumps({"machine": name, "namespace": self.namespace})]
            proc = subprocess.Popen(command, env=cluster_tool.ansible_environment(self.kubeconfig), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                time.sleep(6)  # the run is waiting at the gate by now
                latencies.append(self.served(name, "one-shot"))
                proc.communicate(timeout=120)
            finally:
                stop_process(proc)
        return latencies


def row(label: str, values: list[float]) -> str:
    return f"{label:<34} {statistics.median(values):6.2f}s {max(values):6.2f}s"


def benchmark(kubeconfig: str, count: int, machines_at: Callable[[KubeApi, str], NoController] = NoController) -> int:
    kube = api_from_kubeconfig(kubeconfig)
    with tempfile.TemporaryDirectory(prefix="gate-latency-") as tmp:
        machines = machines_at(kube, f"bench-gates-{uuid.uuid4().hex[:5]}")
        bench = Bench(machines, kubeconfig, Path(tmp))
        try:
            log(f"{count} Machines with a preDrain hook each, of {machines.title}; the work is one debug task")
            by_rulebook, by_role = [f"rb-{index}" for index in range(count)], [f"role-{index}" for index in range(count)]
            machines.prepare(by_rulebook + by_role)
            rulebook = bench.with_rulebook(by_rulebook)
            role = bench.with_role(by_role)
        finally:
            machines.clean_up()
    log("")
    log(f"{'served by':<34} {'median':>7} {'worst':>7}")
    log(row("rulebook (machine_gates source)", rulebook))
    log(row("one-shot role, already waiting", role))
    log("gate reached -> hook removed, ansible-playbook start included for the rulebook (target: under 1.5 s)")
    for served_by, parts in bench.parts.items():
        if parts:
            to_work, to_removed = statistics.median(p[0] for p in parts), statistics.median(p[1] for p in parts)
            log(f"  {served_by}: median {to_work:.2f} s until the work started, then {to_removed:.2f} s until the hook was removed")
    if bench.moved["rulebook"]:
        log("")
        log(row("rulebook", bench.moved["rulebook"]))
        log(row("one-shot role", bench.moved["one-shot"]))
        log(f"hook removed -> Node cordoned by {machines.title}")
    return 0


def with_real_controller(kind: str, count: int) -> int:
    """The benchmark beside the real controller ``kind``, started by hack/controllers.py and stopped after, pass or fail."""
    state_dir = REPO / ".tmp" / f"bench-real-{kind}-{os.getpid()}"
    log(f"starting the real {'Cluster API manager' if kind == 'capi' else 'OpenShift machine controller'} (hack/controllers.py) ...")
    try:
        if kind == "capi":
            state = controllers.up_capi(state_dir, quiet=True)
            workload = state["workload_kubeconfig"]
            return benchmark(str(state_dir / "kubeconfig"), count, lambda kube, namespace: RealClusterApi(kube, namespace, workload))
        controllers.up_mapi(state_dir, quiet=True)
        return benchmark(str(state_dir / "kubeconfig"), count, RealOpenShift)
    finally:
        controllers.down(state_dir)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="a running control plane (default: start a private one)")
    parser.add_argument("--real-controller", choices=["capi", "mapi"], help="start this real controller with hack/controllers.py and measure beside it")
    parser.add_argument("--machines", type=int, default=5)
    args = parser.parse_args(argv)
    if args.real_controller:
        if args.kubeconfig:
            parser.error("--real-controller starts control planes of its own; leave --kubeconfig out")
        return with_real_controller(args.real_controller, args.machines)
    if args.kubeconfig:
        return benchmark(str(Path(args.kubeconfig).resolve()), args.machines)
    state_dir = REPO / ".tmp" / f"bench-{os.getpid()}"
    log("starting a private control plane ...")
    cluster_tool.up(state_dir, quiet=True)
    try:
        return benchmark(str(state_dir / "kubeconfig"), args.machines)
    finally:
        cluster_tool.down(state_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
