"""No credential reaches the output, at -vvv, from any entry point that takes one (issue 28).

Each entry point runs with a unique token it actually uses: an inline kubeconfig mapping whose user
token is the secret (the task's own connection, and the workload cluster's under ``kubeconfig`` and
under ``clusters``), and ``api_key``. The server they name answers nothing (a closed port on this
host), so the runs fail the way a user meets them first; what is proven is only what gets printed:
no part of any secret appears in stdout or stderr, while the server's address still does (masking
everything would hide the cause of the failure).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

BIN = Path(sys.executable).parent
AD_HOC = [str(BIN / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-vvv", "-m"]


def closed_port() -> int:
    """A port on this host where nothing listens (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Secrets:
    """The secrets of one run, and the kubeconfig mappings that carry them."""

    def __init__(self) -> None:
        self.server = f"https://127.0.0.1:{closed_port()}"
        self.token = f"lm-token-{uuid.uuid4().hex}"
        self.workload_token = f"lm-workload-{uuid.uuid4().hex}"
        self.api_key = f"lm-apikey-{uuid.uuid4().hex}"
        self.password = f"lm-password-{uuid.uuid4().hex}"

    def kubeconfig(self, token: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c1", "cluster": {"server": self.server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u1", "user": {"token": token}}],
            "contexts": [{"name": "c1", "context": {"cluster": "c1", "user": "u1"}}],
            "current-context": "c1",
        }

    def workload_cluster(self) -> dict:
        return {"clusters": {"ns/c1": {"kubeconfig": self.kubeconfig(self.workload_token)}}, "kubeconfig": self.kubeconfig(self.workload_token)}

    def assert_hidden(self, output: str) -> None:
        for secret in (self.token, self.workload_token, self.api_key, self.password):
            # Any 8 characters of its random part, not only the whole: a secret cut in two still leaks.
            random = secret.rsplit("-", 1)[1]
            parts = [random[start : start + 8] for start in range(0, len(random) - 7, 4)]
            leaked = [part for part in parts if part in output]
            assert not leaked, f"{secret} leaked ({leaked}):\n{output[-6000:]}"


def run(command: list[str], tmp_path: Path, extra_env: dict | None = None, timeout: float = 240) -> str:
    env = cluster_tool.ansible_environment(tmp_path / "absent-kubeconfig", **(extra_env or {}))
    env.pop("K8S_AUTH_KUBECONFIG")
    env["HOME"] = str(tmp_path)  # no default kubeconfig of the machine's user
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=tmp_path)
    return proc.stdout + proc.stderr


@pytest.fixture
def secrets() -> Secrets:
    return Secrets()


MODULES = {
    "machine_info": {"namespace": "default"},
    "machine_drain": {"node": "worker-1", "wait_timeout": 5},
    "machine_terminate": {"machine": "m1", "namespace": "ns", "wait_timeout": 5},
    "machine_delete": {"machines": [{"name": "m1", "namespace": "ns"}], "drain_timeout": 5, "terminate_timeout": 5},
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_never_prints_a_credential(tmp_path, secrets, module) -> None:
    params = {**MODULES[module], "kubeconfig": secrets.kubeconfig(secrets.token)}
    if module != "machine_info":
        params["workload_cluster"] = secrets.workload_cluster()
    args = tmp_path / "args.json"
    args.write_text(json.dumps(params))
    playbook = tmp_path / "play.yml"
    task = {"name": "the task", f"lifecycle.machine.{module}": "{{ task_args }}"}
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [task]}]))
    output = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-vvv", "-e", f"{{'task_args': {json.dumps(params)}}}", str(playbook)], tmp_path)
    assert "the task" in output, output
    secrets.assert_hidden(output)
    # The server stays named: only the credentials are masked.
    assert secrets.server.split("//")[1] in output, output[-3000:]


def test_api_key_and_password_are_never_printed(tmp_path, secrets) -> None:
    params = {"namespace": "default", "host": secrets.server, "api_key": secrets.api_key, "validate_certs": False}
    output = run([*AD_HOC, "lifecycle.machine.machine_info", "-a", json.dumps(params)], tmp_path)
    secrets.assert_hidden(output)
    params = {"namespace": "default", "host": secrets.server, "username": "admin", "password": secrets.password, "validate_certs": False}
    output = run([*AD_HOC, "lifecycle.machine.machine_info", "-a", json.dumps(params)], tmp_path)
    secrets.assert_hidden(output)


def test_the_delete_machine_role_never_prints_a_credential(tmp_path, secrets) -> None:
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(secrets.kubeconfig(secrets.token)))
    playbook = tmp_path / "play.yml"
    role = {
        "name": "lifecycle.machine.delete_machine",
        "vars": {
            "delete_machine_machines": [{"name": "m1", "namespace": "ns"}],
            "delete_machine_workload_cluster": secrets.workload_cluster(),
            "delete_machine_drain_timeout": 5,
            "delete_machine_terminate_timeout": 5,
        },
    }
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False, "roles": [role]}]))
    output = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-vvv", str(playbook)], tmp_path, {"K8S_AUTH_KUBECONFIG": str(tmp_path / "kubeconfig")})
    assert "delete_machine" in output, output
    secrets.assert_hidden(output)


@pytest.mark.parametrize(
    ("playbook", "extra"),
    [
        ("delete_machine.yml", {"machine_name": "m1", "machine_namespace": "ns", "drain_timeout": 5, "terminate_timeout": 5}),
        ("drain_node.yml", {"node": "worker-1", "drain_timeout": 5}),
    ],
)
def test_the_playbooks_never_print_a_credential(tmp_path, secrets, playbook, extra) -> None:
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(secrets.kubeconfig(secrets.token)))
    variables = tmp_path / "vars.json"
    variables.write_text(json.dumps({**extra, "workload_cluster": secrets.workload_cluster()}))
    output = run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-vvv", "-e", f"@{variables}", str(REPO / "playbooks" / playbook)],
        tmp_path,
        {"K8S_AUTH_KUBECONFIG": str(tmp_path / "kubeconfig"), "K8S_AUTH_API_KEY": secrets.api_key},
    )
    assert "PLAY" in output, output
    secrets.assert_hidden(output)


def test_a_workload_cluster_that_is_not_a_mapping_is_not_echoed(tmp_path, secrets) -> None:
    """A kubeconfig pasted as text where the playbook wants a mapping."""
    variables = tmp_path / "vars.json"
    variables.write_text(json.dumps({"node": "worker-1", "workload_cluster": yaml.safe_dump(secrets.kubeconfig(secrets.workload_token))}))
    output = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-vvv", "-e", f"@{variables}", str(REPO / "playbooks" / "drain_node.yml")], tmp_path)
    assert "workload_cluster must be a mapping" in output, output
    secrets.assert_hidden(output)


def test_the_inventory_plugin_never_prints_a_credential(tmp_path, secrets) -> None:
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(secrets.kubeconfig(secrets.token)))
    source = tmp_path / "machines.yml"
    connections = [
        {"name": "by-file", "kubeconfig": str(tmp_path / "kubeconfig")},
        {"name": "by-key", "host": secrets.server, "api_key": secrets.api_key, "validate_certs": False},
        {"name": "by-password", "host": secrets.server, "username": "admin", "password": secrets.password, "validate_certs": False},
    ]
    source.write_text(yaml.safe_dump({"plugin": "lifecycle.machine.machines", "connections": connections}))
    output = run([str(BIN / "ansible-inventory"), "-vvv", "-i", str(source), "--list"], tmp_path, {"ANSIBLE_INVENTORY_UNPARSED_FAILED": "false"})
    assert "machines" in output, output
    secrets.assert_hidden(output)


def test_the_event_source_never_prints_a_credential(tmp_path, secrets) -> None:
    source = REPO / "extensions" / "eda" / "plugins" / "event_source" / "machine_gates.py"
    env = cluster_tool.ansible_environment(tmp_path / "absent")
    env.pop("K8S_AUTH_KUBECONFIG")
    env["PYTHONPATH"] = str(cluster_tool.collections_root())
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(secrets.kubeconfig(secrets.token)))
    for flags in (["--kubeconfig", str(tmp_path / "kubeconfig")], ["--host", secrets.server, "--api-key", secrets.api_key, "--validate-certs", "false"]):
        proc = subprocess.run(
            [sys.executable, str(source), "--point", "preDrain", "--hook-owner", "me", *flags],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode != 0
        secrets.assert_hidden(proc.stdout + proc.stderr)
