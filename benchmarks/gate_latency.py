"""Benchmark (a script, not a test): how long a Machine waits at a hook's gate
before its hook controller has done the work and removed the hook.

For each of --machines OpenShift Machines carrying a preDrain hook, the
Machine's deletion is started (the moment it reaches the gate) and the time
until the hook is gone is measured, served by:

- the rulebook: ``ansible-rulebook`` with the ``machine_gates`` source and the
  ``serve_gates`` rulebook, running all along (ansible-playbook start included);
- the one-shot role: the ``hook_controller`` role already running and waiting
  for that Machine (its best case; from a schedule, add up to the interval).

The work is one debug task. Prints each latency, the median and the worst
(target for the rulebook: under 3 s).

    python benchmarks/gate_latency.py [--kubeconfig PATH] [--machines 5]

Without --kubeconfig a private control plane is started under .tmp/ and stopped at the end.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))
sys.path.insert(0, str(REPO / "tests" / "integration"))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))

from khelpers import OPENSHIFT_MACHINES, openshift_machine, stop_process
from rulebook import Rulebook

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi, api_from_kubeconfig

OWNER = "bench-gates"
HOOK = "bench-hook"
WORK = "- name: Do the hook's work\n  ansible.builtin.debug:\n    msg: serving {{ hook_controller_machine_info.name }}\n"
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


class Bench:
    def __init__(self, kube: KubeApi, kubeconfig: str, workdir: Path):
        self.kube, self.kubeconfig, self.workdir = kube, kubeconfig, workdir
        self.namespace = f"bench-gates-{uuid.uuid4().hex[:5]}"
        self.collection = OPENSHIFT_MACHINES.format(ns=self.namespace)
        self.work = workdir / "work.yml"
        self.work.write_text(WORK)

    def machine(self, name: str) -> str:
        self.kube.create(self.collection, openshift_machine(name, {"preDrain": [{"name": HOOK, "owner": OWNER}]}))
        return f"{self.collection}/{name}"

    def hook_gone(self, path: str, timeout: float = 120) -> float:
        """Seconds until the Machine at ``path`` has no preDrain hook (polled every 20 ms)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            machine = self.kube.get(path) or {}
            if not ((machine.get("spec") or {}).get("lifecycleHooks") or {}).get("preDrain"):
                return time.monotonic() - started
            time.sleep(0.02)
        raise SystemExit(f"the hook of {path} was not removed within {timeout} s")

    def with_rulebook(self, count: int) -> list[float]:
        variables = {"hook_owner": OWNER, "hook_name": HOOK, "hook_points": ["preDrain"], "machine_namespace": self.namespace}
        variables["hook_tasks_file"] = str(self.work)
        rulebook = Rulebook("lifecycle.machine.serve_gates", variables, cluster_tool.ansible_environment(self.kubeconfig), self.workdir / "rulebook")
        latencies = []
        try:
            rulebook.start()
            for index in range(count):
                path = self.machine(f"rb-{index}")
                time.sleep(1)
                self.kube.delete(path)  # the deletion starts: the Machine is at its preDrain gate
                latencies.append(self.hook_gone(path))
                log(f"  rulebook    Machine rb-{index}: {latencies[-1]:.2f} s")
        finally:
            rulebook.stop()
        return latencies

    def with_role(self, count: int) -> list[float]:
        play = self.workdir / "hook_controller.yml"
        play.write_text(ROLE_PLAY.format(hook=HOOK, owner=OWNER, work=self.work))
        latencies = []
        for index in range(count):
            name = f"role-{index}"
            path = self.machine(name)
            command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(play)]
            command += ["-e", json.dumps({"machine": name, "namespace": self.namespace})]
            proc = subprocess.Popen(command, env=cluster_tool.ansible_environment(self.kubeconfig), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                time.sleep(6)  # the run is waiting at the gate by now
                self.kube.delete(path)
                latencies.append(self.hook_gone(path))
                proc.communicate(timeout=120)
            finally:
                stop_process(proc)
            log(f"  one-shot    Machine {name}: {latencies[-1]:.2f} s")
        return latencies

    def clean_up(self) -> None:
        for machine in self.kube.list(self.collection):
            self.kube.patch(f"{self.collection}/{machine['metadata']['name']}", {"metadata": {"finalizers": None}})
        self.kube.delete(f"/api/v1/namespaces/{self.namespace}")


def benchmark(kubeconfig: str, count: int) -> int:
    kube = api_from_kubeconfig(kubeconfig)
    with tempfile.TemporaryDirectory(prefix="gate-latency-") as tmp:
        bench = Bench(kube, kubeconfig, Path(tmp))
        kube.create("/api/v1/namespaces", {"metadata": {"name": bench.namespace}})
        try:
            log(f"{count} OpenShift Machines with a preDrain hook; the work is one debug task")
            rulebook = bench.with_rulebook(count)
            role = bench.with_role(count)
        finally:
            bench.clean_up()
    log("")
    log(f"{'served by':<34} {'median':>7} {'worst':>7}")
    log(f"{'rulebook (machine_gates source)':<34} {statistics.median(rulebook):6.2f}s {max(rulebook):6.2f}s")
    log(f"{'one-shot role, already waiting':<34} {statistics.median(role):6.2f}s {max(role):6.2f}s")
    log("gate reached -> hook removed, ansible-playbook start included for the rulebook (target: under 3 s)")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="a running control plane (default: start a private one)")
    parser.add_argument("--machines", type=int, default=5)
    args = parser.parse_args(argv)
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
