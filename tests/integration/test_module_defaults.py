"""module_defaults as docs/module_defaults.md says, on the real control plane and the ansible-core of the
venv: one ``group/lifecycle.machine.machine`` entry of connection options reaches the collection's
modules and kubernetes.core's (the example playbook, tests/integration/files/module_defaults.yml, run
with no K8S_AUTH_* variable set); and the two traps, as ansible-core has them: a
``group/kubernetes.core.k8s`` entry does not reach the collection's modules, and a collection option in
the shared group breaks a kubernetes.core task ("Unsupported parameters")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, ansible_env
from test_delete_machine import assert_all_gone

BIN = Path(sys.executable).parent
EXAMPLE = REPO / "tests" / "integration" / "files" / "module_defaults.yml"


def environment(kubeconfig: str, home: Path) -> dict:
    """No K8S_AUTH_*, no KUBECONFIG and a HOME without ~/.kube: a task is connected by module_defaults or not at all."""
    env = {key: value for key, value in ansible_env(kubeconfig).items() if not key.startswith("K8S_AUTH_") and key != "KUBECONFIG"}
    env.update(HOME=str(home), ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    return env


def play_report(tmp_path: Path, kubeconfig: str, module_defaults: dict, tasks: list[dict]) -> dict:
    """Run one play of ``tasks`` under ``module_defaults``; each task's result by name."""
    path = tmp_path / "play.yml"
    play = {"hosts": "localhost", "gather_facts": False, "module_defaults": module_defaults, "tasks": [{**t, "ignore_errors": True} for t in tasks]}
    path.write_text(yaml.safe_dump([play], sort_keys=False))
    env = {**environment(kubeconfig, tmp_path), "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    command = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(path)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    report = json.loads(proc.stdout[proc.stdout.index("{\n") :])
    return {task["task"]["name"]: task["hosts"]["localhost"] for task in report["plays"][0]["tasks"]}


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_the_documented_example_connects_both_collections_by_one_group_entry(flavour, kube, kubeconfig, victim, tmp_path) -> None:
    v = victim()
    extra = {"kubeconfig": kubeconfig, "machine_namespace": v.namespace, "machine_name": v.name}
    command = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(EXAMPLE), "-e", json.dumps(extra)]
    proc = subprocess.run(command, capture_output=True, text=True, env=environment(kubeconfig, tmp_path), timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "[WARNING]" not in proc.stderr, proc.stderr
    assert_all_gone(kube, v)


def test_a_kubernetes_core_group_entry_does_not_reach_the_collections_modules(kubeconfig, namespace, tmp_path) -> None:
    tasks = [
        {"name": "theirs", "kubernetes.core.k8s_info": {"kind": "Namespace", "name": namespace}},
        {"name": "ours", "lifecycle.machine.machine_info": {"namespace": namespace}},
    ]
    results = play_report(tmp_path, kubeconfig, {"group/kubernetes.core.k8s": {"kubeconfig": kubeconfig}}, tasks)
    assert not results["theirs"].get("failed"), results["theirs"].get("msg")
    # ansible-core takes a group's members from the meta/runtime.yml of the collection that names it only.
    assert results["ours"]["failed"] is True
    assert "configuration" in results["ours"]["msg"] or "kubeconfig" in results["ours"]["msg"], results["ours"]["msg"]


def test_a_collection_option_in_the_shared_group_breaks_kubernetes_core_tasks(kubeconfig, namespace, tmp_path) -> None:
    tasks = [
        {"name": "theirs", "kubernetes.core.k8s_info": {"kind": "Namespace", "name": namespace}},
        {"name": "other of ours", "lifecycle.machine.machine_info": {"namespace": namespace}},
    ]
    defaults = {"group/lifecycle.machine.machine": {"kubeconfig": kubeconfig, "drain_timeout": 60}}
    results = play_report(tmp_path, kubeconfig, defaults, tasks)
    assert results["theirs"]["msg"].startswith("Unsupported parameters for (kubernetes.core.k8s_info) module: drain_timeout."), results["theirs"]["msg"]
    # The collection's modules take different options too: one that another module lacks breaks it the same way.
    assert results["other of ours"]["msg"].startswith("Unsupported parameters for (lifecycle.machine.machine_info) module: drain_timeout.")
    under_module = {"group/lifecycle.machine.machine": {"kubeconfig": kubeconfig}, "lifecycle.machine.machine_delete": {"drain_timeout": 60}}
    results = play_report(tmp_path, kubeconfig, under_module, tasks)
    for name in ("theirs", "other of ours"):
        assert not results[name].get("failed"), results[name].get("msg")


def test_an_inner_entry_of_the_same_group_replaces_the_outer_one_whole(kubeconfig, namespace, tmp_path) -> None:
    inner = {"group/lifecycle.machine.machine": {"validate_certs": False}}
    tasks = [{"name": "ours", "lifecycle.machine.machine_info": {"namespace": namespace}, "module_defaults": inner}]
    results = play_report(tmp_path, kubeconfig, {"group/lifecycle.machine.machine": {"kubeconfig": kubeconfig}}, tasks)
    # The task's entry is not merged with the play's: the kubeconfig is gone from it.
    assert results["ours"]["failed"] is True
    assert "configuration" in results["ours"]["msg"] or "kubeconfig" in results["ours"]["msg"], results["ours"]["msg"]
