"""Event-driven hook controllers: ``ansible-rulebook`` with the
``lifecycle.machine.machine_gates`` source and the ``serve_gates`` rulebook
against the real control plane, serving the gates of Machines that
``delete_machine`` deletes, and still serving them across a restart."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from conftest import REPO, ansible_env
from khelpers import OPENSHIFT_MACHINES, capi_machine, capi_path, openshift_machine, wait_for
from rulebook import Rulebook

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

PLAYBOOK = REPO / "playbooks" / "delete_machine.yml"
PROVIDER_TASKS = REPO / "hack" / "demo" / "tasks" / "provider.yml"
WORK = REPO / "tests" / "integration" / "files" / "tasks" / "record_gate.yml"
CAPI = "v1beta2"
CAPI_PREFIX = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}
HOOKS = {"preDrain": "eda-backup", "preTerminate": "eda-flush"}
CONDITIONS = {"preDrain": "PreDrainEdaBackupSucceeded", "preTerminate": "PreTerminateEdaFlushSucceeded"}


@pytest.fixture
def rulebook(kubeconfig, tmp_path):
    """``rulebook(owner, namespace)``: a serve_gates run for the hooks of ``owner``, stopped at teardown."""
    started: list[Rulebook] = []

    def _make(owner: str, namespace: str) -> Rulebook:
        variables = {"hook_owner": owner, "hook_name": "", "hook_points": list(HOOKS), "machine_namespace": namespace, "hook_tasks_file": str(WORK)}
        run = Rulebook("lifecycle.machine.serve_gates", variables, ansible_env(kubeconfig), tmp_path / f"rulebook-{len(started)}")
        started.append(run)
        return run

    yield _make
    for run in started:
        run.stop()


class Machines:
    """An OpenShift and a Cluster API Machine in one namespace, each on its own kwok Node, carrying the owner's hooks."""

    def __init__(self, kube: KubeApi, namespace: str, owner: str):
        self.kube, self.namespace, self.owner = kube, namespace, owner
        self.paths: dict[str, str] = {}
        self.nodes: dict[str, str] = {}
        self.created: list[str] = []

    def openshift(self, name: str, node: str, hooks: dict) -> str:
        body = openshift_machine(name, {p: [{"name": n, "owner": self.owner}] for p, n in hooks.items()}, labels={"lm-eda": self.namespace})
        path = self._create(OPENSHIFT_MACHINES.format(ns=self.namespace), name, body, node, {"nodeRef": {"apiVersion": "v1", "kind": "Node", "name": node}})
        self.kube.create(f"/api/v1/namespaces/{self.namespace}/configmaps", {"metadata": {"name": f"instance-{name}"}, "data": {"state": "running"}})
        return path

    def capi(self, name: str, node: str, hooks: dict) -> str:
        annotations = {f"{CAPI_PREFIX[p]}/{n}": self.owner for p, n in hooks.items()}
        body = capi_machine(name, CAPI, labels={"lm-eda": self.namespace}, annotations=annotations)
        for plural, kind, group in (("fakemachines", "FakeMachine", "infrastructure"), ("fakebootstrapconfigs", "FakeBootstrapConfig", "bootstrap")):
            api = f"{group}.cluster.x-k8s.io/v1beta1"
            self.kube.create(f"/apis/{api}/namespaces/{self.namespace}/{plural}", {"apiVersion": api, "kind": kind, "metadata": {"name": name}})
        return self._create(capi_path(CAPI, "machines", self.namespace), name, body, node, {"nodeRef": {"name": node}})

    def _create(self, collection: str, name: str, body: dict, node: str, status: dict) -> str:
        path = f"{collection}/{name}"
        self.kube.create(collection, body)
        self.created.append(path)
        self.kube.patch(path, {"status": status}, subresource_status=True)
        self.paths[name], self.nodes[name] = path, node
        return path

    def cluster(self) -> None:
        """The Cluster and a control-plane Machine, so that Cluster API's skip rules leave the workers alone."""
        collection = capi_path(CAPI, "clusters", self.namespace)
        self.kube.create(collection, {"apiVersion": f"cluster.x-k8s.io/{CAPI}", "kind": "Cluster", "metadata": {"name": "lm-test"}})
        control_plane = capi_machine("control-plane-0", CAPI, labels={"cluster.x-k8s.io/control-plane": ""})
        self.kube.create(capi_path(CAPI, "machines", self.namespace), control_plane)
        self.created.append(capi_path(CAPI, "machines", self.namespace, "control-plane-0"))

    def work_runs(self, name: str, hook: str) -> int:
        selector = f"lm-work-machine={name},lm-work-hook={hook}"
        return len(self.kube.list(f"/api/v1/namespaces/{self.namespace}/configmaps", label_selector=selector))

    def events(self, name: str, reason: str) -> list[dict]:
        events = self.kube.list(f"/api/v1/namespaces/{self.namespace}/events", field_selector=f"involvedObject.name={name}")
        return [e for e in events if e.get("reason") == reason]

    def clean_up(self) -> None:
        for path in self.created:
            if self.kube.get(path) is not None:
                self.kube.patch(path, {"metadata": {"finalizers": None}})
                self.kube.delete(path)


@pytest.fixture
def machines(kube, capi_generation, namespace):
    capi_generation.use(CAPI)  # serves both flavours
    made = Machines(kube, namespace, owner=f"eda-{uuid.uuid4().hex[:6]}")
    yield made
    made.clean_up()


class ConditionWatcher:
    """Notes each True hook condition seen on the Machines, before they go: a watch per
    Machine, so that a condition the Machine carries only briefly (its deletion goes on at
    once) is seen too, which polling missed now and then."""

    def __init__(self, kube: KubeApi, paths: dict[str, str]):
        self.kube, self.paths = kube, paths
        self.seen: set[tuple[str, str]] = set()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._follow, args=(name, path), daemon=True) for name, path in paths.items()]
        self.started = threading.Barrier(len(self.threads) + 1)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()
        self.started.wait(timeout=30)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=15)

    def _note(self, name: str, machine: dict) -> None:
        for condition in (machine.get("status") or {}).get("conditions") or []:
            if condition.get("type") in CONDITIONS.values() and condition.get("status") == "True":
                self.seen.add((name, condition["type"]))

    def _follow(self, name: str, path: str) -> None:
        collection, _slash, machine_name = path.rpartition("/")
        items, version = self.kube.list_with_version(collection, field_selector=f"metadata.name={machine_name}")
        for machine in items:
            self._note(name, machine)
        self.started.wait(timeout=30)
        while not self.stop.is_set():
            for event in self.kube.watch(collection, resource_version=version, field_selector=f"metadata.name={machine_name}", timeout=2):
                machine = event.get("object") or {}
                if event.get("type") == "ERROR":
                    version = None
                    break
                version = (machine.get("metadata") or {}).get("resourceVersion") or version
                self._note(name, machine)


def test_rulebook_serves_every_gate_of_a_deletion(kube, machines, make_node, rulebook, run_playbook) -> None:
    machines.cluster()
    openshift = machines.openshift("eda-os", make_node(), HOOKS)
    capi = machines.capi("eda-capi", make_node(), HOOKS)
    watcher = ConditionWatcher(kube, dict(machines.paths))
    watcher.start()
    served = rulebook(machines.owner, machines.namespace).start()

    try:
        deletion = run_playbook(
            PLAYBOOK,
            {
                "machine_label_selector": f"lm-eda={machines.namespace}",
                "machine_namespace": machines.namespace,
                "drain_timeout": 120,
                "terminate_timeout": 120,
                "provider_tasks": str(PROVIDER_TASKS),
            },
        )
    finally:
        watcher.stop.set()
        watcher.join()

    assert deletion.returncode == 0, deletion.stdout[-6000:] + deletion.stderr + served.output()[-4000:]
    for name, path in (("eda-os", openshift), ("eda-capi", capi)):
        assert kube.get(path) is None, f"Machine {name} is still there"
        assert kube.get(f"/api/v1/nodes/{machines.nodes[name]}") is None, f"the Node of {name} is still there"
        for point, hook in HOOKS.items():
            assert machines.work_runs(name, hook) >= 1, f"the {point} work never ran for {name}"
            assert (name, CONDITIONS[point]) in watcher.seen, f"{CONDITIONS[point]}=True was never recorded on {name}"
        assert len(machines.events(name, "HookSucceeded")) == 2, f"{name}: one HookSucceeded Event per hook"
    output = served.output()
    assert output.count("reached the preDrain gate of hook eda-backup") >= 2
    assert output.count("reached the preTerminate gate of hook eda-flush") >= 2
    assert served.stop() is not None, "ansible-rulebook had to be killed: it did not stop on SIGINT"


def test_a_gate_reached_while_the_rulebook_was_down_is_served_after_its_restart(kube, machines, make_node, rulebook) -> None:
    openshift = machines.openshift("eda-restart", make_node(), {"preDrain": HOOKS["preDrain"]})
    served = rulebook(machines.owner, machines.namespace).start()
    served.stop()

    kube.delete(openshift)  # the deletion starts: the Machine now waits at its preDrain gate
    time.sleep(3)
    held = kube.get(openshift)
    assert held["spec"]["lifecycleHooks"]["preDrain"], "the gate was served with the rulebook down"
    assert machines.work_runs("eda-restart", HOOKS["preDrain"]) == 0

    served.start()

    def served_machine() -> dict | None:
        machine = kube.get(openshift)
        return None if (machine["spec"].get("lifecycleHooks") or {}).get("preDrain") else machine

    released = wait_for(served_machine, 90, what="the gate served")

    assert "eda-restart reached the preDrain gate of hook eda-backup" in served.output().rpartition("===== start 2 =====")[2]
    assert machines.work_runs("eda-restart", HOOKS["preDrain"]) == 1
    condition = next(c for c in released["status"]["conditions"] if c["type"] == CONDITIONS["preDrain"])
    assert (condition["status"], condition["reason"]) == ("True", "HookSucceeded")
    assert len(machines.events("eda-restart", "HookSucceeded")) == 1
