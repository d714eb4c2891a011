"""Connection settings the way kubernetes.core users give them, on the real
control plane: a kubeconfig encrypted with Ansible Vault (as a task option, in
a module_defaults group, or by a path relative to the playbook's files/), and
one module_defaults group that reaches kubernetes.core's modules too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ansible_env

BIN = Path(sys.executable).parent
PASSWORD = "correct horse battery staple"


@pytest.fixture
def vaulted(tmp_path: Path, kubeconfig: str) -> tuple[Path, Path]:
    """(a vault-encrypted copy of the control plane's kubeconfig in files/, the password file)."""
    secret = tmp_path / "vault-password"
    secret.write_text(PASSWORD)
    (tmp_path / "files").mkdir()
    target = tmp_path / "files" / "kubeconfig.vault"
    target.write_text(Path(kubeconfig).read_text())
    env = ansible_env(kubeconfig)
    subprocess.run([str(BIN / "ansible-vault"), "encrypt", "--vault-password-file", str(secret), str(target)], env=env, check=True, capture_output=True)
    assert target.read_text().startswith("$ANSIBLE_VAULT;")
    return target, secret


def play(tmp_path: Path, kubeconfig: str, secret: Path, playbook: list[dict]) -> dict:
    """Run ``playbook`` with no K8S_AUTH_* in the environment; the json callback's report of its tasks."""
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    env = {key: value for key, value in ansible_env(kubeconfig).items() if not key.startswith("K8S_AUTH_")}
    env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    command = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--vault-password-file", str(secret), str(path)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{\n") :])
    except ValueError:
        raise AssertionError(f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}") from None
    return {task["task"]["name"]: task["hosts"]["localhost"] for task in report["plays"][0]["tasks"]}


def test_a_vaulted_kubeconfig_works_as_a_task_option_and_by_a_relative_path(tmp_path, kubeconfig, vaulted, namespace) -> None:
    target, secret = vaulted
    tasks = [
        {"name": "absolute", "lifecycle.machine.machine_info": {"kubeconfig": str(target), "namespace": namespace}},
        {"name": "relative", "lifecycle.machine.machine_info": {"kubeconfig": "kubeconfig.vault", "namespace": namespace}},
    ]
    results = play(tmp_path, kubeconfig, secret, [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}])
    for name in ("absolute", "relative"):
        assert not results[name].get("failed"), results[name].get("msg")
        assert results[name]["machines"] == []


def test_one_module_defaults_group_reaches_the_collection_and_kubernetes_core(tmp_path, kubeconfig, vaulted, namespace) -> None:
    target, secret = vaulted
    tasks = [
        {"name": "ours", "lifecycle.machine.machine_info": {"namespace": namespace}},
        {"name": "theirs", "kubernetes.core.k8s_info": {"kind": "Namespace", "name": namespace}},
    ]
    defaults = {"group/lifecycle.machine.machine": {"kubeconfig": str(target)}}
    results = play(tmp_path, kubeconfig, secret, [{"hosts": "localhost", "gather_facts": False, "module_defaults": defaults, "tasks": tasks}])
    assert not results["ours"].get("failed"), results["ours"].get("msg")
    assert not results["theirs"].get("failed"), results["theirs"].get("msg")
    assert [item["metadata"]["name"] for item in results["theirs"]["resources"]] == [namespace]


def test_a_kubeconfig_that_cannot_be_found_fails_before_the_module_runs(tmp_path, kubeconfig, vaulted) -> None:
    _target, secret = vaulted
    tasks = [{"name": "missing", "lifecycle.machine.machine_info": {"kubeconfig": "no-such-kubeconfig"}}]
    result = play(tmp_path, kubeconfig, secret, [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}])["missing"]
    assert result["failed"] is True
    assert result["msg"].startswith("lifecycle.machine.machine_info: Could not find or access 'no-such-kubeconfig'"), result["msg"]
    assert result["msg"].endswith("; nothing was changed")


def test_the_inventory_plugin_reads_a_vaulted_kubeconfig(tmp_path, kubeconfig, vaulted, namespace) -> None:
    target, secret = vaulted
    source = tmp_path / "vaulted.machines.yml"
    source.write_text(yaml.safe_dump({"plugin": "lifecycle.machine.machines", "connections": [{"kubeconfig": str(target), "namespaces": [namespace]}]}))
    env = {key: value for key, value in ansible_env(kubeconfig).items() if not key.startswith("K8S_AUTH_")}
    command = [str(BIN / "ansible-inventory"), "-i", str(source), "--list", "--vault-password-file", str(secret)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[WARNING]" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["_meta"]["hostvars"] == {}
