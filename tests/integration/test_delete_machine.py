"""The delete_machine role (playbooks/delete_machine.yml) on the real control
plane, for OpenShift, Cluster API v1beta1-only and Cluster API v1beta2.

A recorder thread reads the API every 0.2 s and notes when each Pod got its
deletionTimestamp, when hooks went and when the Node and infrastructure went;
the assertions compare those times. The API server's audit log proves that no
Pod was evicted twice across killed and restarted runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, ansible_env, machine_collection
from khelpers import stop_process, wait_for
from victims import PREFIX, Victim

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

EXTENDED_FLAVOURS = ("v1beta1",)  # variants make test leaves out (conftest.py: pytest_collection_modifyitems)

PLAYBOOK = REPO / "playbooks" / "delete_machine.yml"
PROVIDER_TASKS = REPO / "hack" / "demo" / "tasks" / "provider.yml"


class Recorder(threading.Thread):
    """Times at which things happened, read from the API."""

    def __init__(self, victim: Victim):
        super().__init__(daemon=True)
        self.victim = victim
        self.times: dict[str, float] = {}
        self.stop = threading.Event()

    def mark(self, key: str) -> None:
        self.times.setdefault(key, time.monotonic())

    def run(self) -> None:
        v = self.victim
        while not self.stop.is_set():
            for pod in v.web_pods():
                if pod["metadata"].get("deletionTimestamp") and pod["spec"].get("nodeName") == v.node:
                    self.mark(f"pod:{pod['metadata']['name']}")
            if v.kube.get(f"/api/v1/nodes/{v.node}") is None:
                self.mark("node-gone")
            for path in v.infra_paths:
                if v.kube.get(path) is None:
                    self.mark(f"gone:{path.rsplit('/', 2)[1]}")
            if v.kube.get(v.path) is None:
                self.mark("machine-gone")
            node = v.kube.get(f"/api/v1/nodes/{v.node}")
            if node and node["spec"].get("unschedulable"):
                self.mark("cordoned")
            time.sleep(0.2)

    def evictions(self) -> dict[str, float]:
        return {k[4:]: t for k, t in self.times.items() if k.startswith("pod:")}


def playbook_vars(victim: Victim) -> dict:
    extra = {"machine_name": victim.name, "machine_namespace": victim.namespace, "drain_timeout": 300, "terminate_timeout": 300}
    if victim.flavour == "openshift":
        extra["provider_tasks"] = str(PROVIDER_TASKS)
    return extra


def recap_changed(stdout: str) -> int:
    line = next(line for line in stdout.splitlines() if line.startswith("localhost"))
    return int(line.split("changed=")[1].split()[0])


def assert_all_gone(kube: KubeApi, victim: Victim) -> None:
    assert kube.get(victim.path) is None, "the Machine is still there"
    assert kube.get(f"/api/v1/nodes/{victim.node}") is None, "the Node is still there"
    for path in victim.infra_paths:
        assert kube.get(path) is None, f"{path} is still there"


def test_gates_hold_until_hooks_go_then_everything_goes(flavour, kube, victim, run_playbook) -> None:
    v = victim(hooks={"preDrain": [("backup", "backup-ctl")], "preTerminate": [("flush-logs", "log-ctl")]})
    recorder = Recorder(v)
    recorder.start()

    released: dict[str, float] = {}

    def hook_controller() -> None:
        # Release the preDrain gate only once the Machine is marked for deletion and
        # clearly waiting; the preTerminate gate only well after the drain finished.
        # The time is taken before each removal is sent: nothing it gates can happen earlier.
        wait_for(lambda: (kube.get(v.path) or {}).get("metadata", {}).get("deletionTimestamp"), 120, what="deletion to start")
        time.sleep(5)
        released["preDrain"] = time.monotonic()
        v.remove_hook("preDrain", "backup")
        wait_for(lambda: len(recorder.evictions()) == 2 and not [p for p in v.web_pods() if p["spec"].get("nodeName") == v.node], 120, what="the drain")
        time.sleep(5)
        released["preTerminate"] = time.monotonic()
        v.remove_hook("preTerminate", "flush-logs")

    controller = threading.Thread(target=hook_controller)
    controller.start()
    result = run_playbook(PLAYBOOK, playbook_vars(v))
    controller.join()
    recorder.stop.set()
    recorder.join()
    assert result.returncode == 0, result.stdout + result.stderr

    times = recorder.times
    evictions = recorder.evictions()
    assert len(evictions) == 2
    assert min(evictions.values()) >= released["preDrain"], "a Pod was evicted while the preDrain hook existed"
    assert times["cordoned"] >= released["preDrain"], "the Node was cordoned before the preDrain gate opened"
    for key in ("node-gone", *[f"gone:{p.rsplit('/', 2)[1]}" for p in v.infra_paths]):
        assert times[key] >= released["preTerminate"], f"{key} before the preTerminate hook went"
        assert times[key] >= max(evictions.values()), f"{key} before the drain finished"
    assert_all_gone(kube, v)

    again = run_playbook(PLAYBOOK, playbook_vars(v))
    assert again.returncode == 0, again.stdout
    assert recap_changed(again.stdout) == 0, again.stdout


def _start(victim: Victim, tmp: Path) -> subprocess.Popen:
    env = ansible_env(os.environ["K8S_AUTH_KUBECONFIG"])
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    env["ANSIBLE_REMOTE_TMP"] = str(tmp / "remote")
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(PLAYBOOK), "-e", json.dumps(playbook_vars(victim))]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _kill(proc: subprocess.Popen, tmp: Path) -> None:
    """Kill the run and everything it started, as a kill -9 of the whole job would."""
    stop_process(proc)
    time.sleep(0.5)


@pytest.fixture
def kubeconfig_env(kubeconfig, monkeypatch):
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", kubeconfig)


def _spare_node(kube: KubeApi, victim: Victim) -> str:
    """The victim's spare Node: the other Node of its pool."""
    pool = kube.get(f"/api/v1/nodes/{victim.node}")["metadata"]["labels"]["lm-pool"]
    [spare] = [node["metadata"]["name"] for node in kube.list("/api/v1/nodes", label_selector=f"lm-pool={pool}") if node["metadata"]["name"] != victim.node]
    return spare


def test_killed_runs_resume_without_evicting_twice(*, flavour, kube, victim, run_playbook, audit_events, tmp_path, kubeconfig_env) -> None:
    v = victim(hooks={"preTerminate": [("flush-logs", "log-ctl")]})

    def evicted() -> Counter:
        """Evictions the API server granted, from its audit log (a poller can miss a Pod that goes at once)."""
        events = audit_events(namespace=v.namespace, subresource="eviction")
        return Counter(e["objectRef"]["name"] for e in events if (e.get("responseStatus") or {}).get("code") in (200, 201))

    # Killed during the drain: the first Pod is terminating and the budget holds the second. The spare
    # Node stays cordoned until the kill, so the first Pod's replacement cannot become healthy and the
    # budget allows nothing more: the kill never cuts an eviction the budget grants. (One cut between the
    # budget's grant and the Pod's deletion leaves the budget counting that Pod as evicted, refusing every
    # eviction for the disruption controller's two minutes; the drain's blockers say so.)
    spare = _spare_node(kube, v)
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": True}})
    first = _start(v, tmp_path / "first")
    try:
        wait_for(lambda: len(evicted()) >= 1, 120, what="the drain to evict a Pod")
    finally:
        _kill(first, tmp_path / "first")
    assert kube.get(v.path)["metadata"]["deletionTimestamp"]
    on_node = [p for p in v.web_pods() if p["spec"].get("nodeName") == v.node and not p["metadata"].get("deletionTimestamp")]
    assert len(on_node) == 1, "the budget did not hold the second Pod"
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": None}})

    # Killed again while it waits at the preTerminate gate.
    second = _start(v, tmp_path / "second")
    try:
        wait_for(lambda: len(evicted()) == 2 and not [p for p in v.web_pods() if p["spec"].get("nodeName") == v.node], 120, what="the drain")
        time.sleep(3)
    finally:
        _kill(second, tmp_path / "second")
    assert kube.get(f"/api/v1/nodes/{v.node}") is not None, "the Node went while a preTerminate hook existed"
    for path in v.infra_paths:
        assert kube.get(path) is not None, f"{path} went while a preTerminate hook existed"

    v.remove_hook("preTerminate", "flush-logs")
    final = run_playbook(PLAYBOOK, playbook_vars(v))
    assert final.returncode == 0, final.stdout + final.stderr
    assert_all_gone(kube, v)

    granted = evicted()
    assert len(granted) == 2
    assert set(granted.values()) == {1}, f"a Pod was evicted more than once: {granted}"


@pytest.mark.every_generation  # where the Node reference lives differs between the generations
@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"], indirect=True)
def test_capi_skip_cases(*, flavour, kube, namespace, make_node, make_machine, capi_cluster, run_playbook) -> None:
    """No nodeRef, or the Cluster being deleted: Cluster API skips the preDrain
    gate, the drain, the volume wait and the Node deletion, never the preTerminate gate."""
    capi_cluster(namespace, deleting=True)
    node = make_node()
    held = make_machine(namespace, node=node, hooks={"preDrain": [("never-released", "nobody")], "preTerminate": [("flush-logs", "log-ctl")]})
    name = held["metadata"]["name"]
    path = f"{machine_collection(flavour, namespace)}/{name}"
    extra = {"machine_name": name, "machine_namespace": namespace, "drain_timeout": 60, "terminate_timeout": 8}

    blocked = run_playbook(PLAYBOOK, extra)
    assert blocked.returncode != 0, "the preTerminate gate did not hold"
    assert "flush-logs" in blocked.stdout
    assert kube.get(path) is not None

    kube.patch(path, {"metadata": {"annotations": {f"{PREFIX['preTerminate']}/flush-logs": None}}})
    done = run_playbook(PLAYBOOK, {**extra, "terminate_timeout": 120})
    assert done.returncode == 0, done.stdout + done.stderr
    assert kube.get(path) is None
    assert kube.get(f"/api/v1/nodes/{node}") is not None, "the Node was deleted although the Cluster is being deleted"


def test_hook_controllers_and_the_role_together(flavour, kube, victim, run_playbook, kubeconfig_env) -> None:
    """Two hook_controller instances (preDrain and preTerminate) and delete_machine
    run at the same time: the Machine goes and each controller works exactly once."""
    v = victim(hooks={"preDrain": [("backup", "backup-ctl")], "preTerminate": [("flush-logs", "log-ctl")]})
    env = ansible_env(os.environ["K8S_AUTH_KUBECONFIG"])
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    ansible_playbook = str(Path(sys.executable).parent / "ansible-playbook")
    controllers = []
    for name, owner, point in (("backup", "backup-ctl", "preDrain"), ("flush-logs", "log-ctl", "preTerminate")):
        extra = {"machine_name": v.name, "machine_namespace": v.namespace, "hook_name": name, "hook_owner": owner, "hook_point": point}
        command = [ansible_playbook, "-i", "localhost,", "-c", "local", str(REPO / "tests/integration/files/hook_controller.yml"), "-e", json.dumps(extra)]
        controllers.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        deletion = run_playbook(PLAYBOOK, playbook_vars(v))
        outputs = [c.communicate(timeout=300)[0] for c in controllers]
    finally:
        for controller in controllers:
            stop_process(controller)
    assert deletion.returncode == 0, deletion.stdout + deletion.stderr
    for controller, output in zip(controllers, outputs, strict=True):
        assert controller.returncode == 0, output
    assert_all_gone(kube, v)
    for hook in ("backup", "flush-logs"):
        runs = kube.list(f"/api/v1/namespaces/{v.namespace}/configmaps", label_selector=f"lm-work={hook}")
        assert len(runs) == 1, f"{hook} ran {len(runs)} times"


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_a_query_chooses_the_machines_to_delete(*, flavour, kube, victim, make_machine, run_playbook) -> None:
    """machine_query (delete_machine_query) alone picks the Machines of the namespace to delete."""
    v = victim()
    bystander = make_machine(v.namespace, hooks={"preDrain": [("keep-me", "bystander-ctl")]})["metadata"]["name"]
    bystander_path = f"{machine_collection(flavour, v.namespace)}/{bystander}"
    version = kube.get(bystander_path)["metadata"]["resourceVersion"]

    result = run_playbook(PLAYBOOK, {"machine_namespace": v.namespace, "machine_query": f"[?name=='{v.name}']", "drain_timeout": 300, "terminate_timeout": 300})

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert_all_gone(kube, v)
    assert kube.get(bystander_path)["metadata"]["resourceVersion"] == version, "a Machine the query did not pick was touched"
