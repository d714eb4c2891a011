"""TLS verification of AWX jobs: configure_awx.yml's defaults match what AWX's "OpenShift or
Kubernetes API Bearer Token" credential injects, and the playbook says when verification is off.

AWX sets ``K8S_AUTH_VERIFY_SSL=True`` (and writes ``K8S_AUTH_SSL_CA_CERT``) only when "Verify SSL"
is on and "Certificate Authority data" is not empty; otherwise ``False``: a real AWX's jobs show it
(tests/integration/test_awx.py); these tests hold the playbook's defaults and warning to it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]


class _AnsibleYaml(yaml.SafeLoader):
    """Reads Ansible YAML: an ``!unsafe`` string is just its text here."""


_AnsibleYaml.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load_ansible_yaml(text: str):
    return yaml.load(text, Loader=_AnsibleYaml)


CONFIGURE = REPO / "extensions" / "awx" / "configure_awx.yml"
BIN = Path(sys.executable).parent
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
WARNING = "WARNING: TLS verification is OFF"
REFUSAL = "lifecycle_awx_k8s_verify_ssl is true but lifecycle_awx_k8s_ca_cert is empty"
BEARER_TOKEN = "OpenShift or Kubernetes API Bearer Token"
_PLAYBOOK = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]
REQUIRED = {
    "lifecycle_awx_project_url": "https://git.example.com/platform/lifecycle-machine.git",
    "lifecycle_awx_ee_image": "registry.example.com/platform/lifecycle-machine-ee:latest",
    "lifecycle_awx_k8s_host": "https://api.cluster.example.com:6443",
    "lifecycle_awx_k8s_token": "token",
}


def _tasks() -> list[dict]:
    return load_ansible_yaml(CONFIGURE.read_text())[0]["tasks"]


def _probe(tmp_path: Path, extra: dict) -> dict:
    """Evaluate configure_awx.yml's own expressions (its play vars, the credential's inputs, the
    verification check and the warning's conditions) with ``extra`` as extra variables."""
    play = load_ansible_yaml(CONFIGURE.read_text())[0]
    tasks = _tasks()
    # The Kubernetes credential (the other one, the workload clusters' kubeconfig, has no TLS inputs).
    (credential,) = [t["awx.awx.credential"] for t in tasks if t.get("awx.awx.credential", {}).get("credential_type") == BEARER_TOKEN]
    (check,) = [t for t in tasks if "ansible.builtin.assert" in t and "lifecycle_awx_k8s_verify_ssl" in str(t)]
    (warning,) = [t for t in tasks if "ansible.builtin.debug" in t and WARNING in t["ansible.builtin.debug"]["msg"]]
    result = tmp_path / "probe.json"
    probe = [
        {
            "name": "Probe",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {**play["vars"], "probe_inputs": credential["inputs"]},
            "tasks": [
                {
                    "name": "Write what the playbook would do",
                    "ansible.builtin.copy": {
                        "dest": str(result),
                        "mode": "0600",
                        "content": "{{ {'inputs': probe_inputs, 'verification_possible': ("
                        + check["ansible.builtin.assert"]["that"]
                        + "), 'warned': ("
                        + ") and (".join(warning["when"])
                        + ")} | to_json }}",
                    },
                }
            ],
        }
    ]
    playbook = tmp_path / "probe.yml"
    playbook.write_text(yaml.safe_dump(probe))
    ran = subprocess.run(
        [*_PLAYBOOK, "-e", json.dumps({**REQUIRED, **extra}), str(playbook)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return json.loads(result.read_text())


@pytest.mark.parametrize(
    ("extra", "verified"),
    [
        ({}, False),
        ({"lifecycle_awx_k8s_ca_cert": CA}, True),
        ({"lifecycle_awx_k8s_ca_cert": CA, "lifecycle_awx_k8s_verify_ssl": False}, False),
        ({"lifecycle_awx_k8s_ca_cert": "  \n"}, False),
    ],
    ids=["no-ca", "ca", "ca-verify-off", "blank-ca"],
)
def test_defaults_and_warning_match_what_awx_injects(tmp_path: Path, extra: dict, verified: bool) -> None:
    probed = _probe(tmp_path, extra)
    assert probed["verification_possible"]
    assert probed["inputs"]["verify_ssl"] is verified
    # AWX verifies with "Verify SSL" on and CA data given (a real AWX's jobs show it, test_awx.py).
    assert (probed["inputs"]["verify_ssl"] and bool(probed["inputs"].get("ssl_ca_cert", "").strip())) is verified
    assert probed["warned"] is not verified, "the playbook must warn exactly when AWX turns verification off"


def test_verification_asked_for_without_ca_data_is_refused(tmp_path: Path) -> None:
    probed = _probe(tmp_path, {"lifecycle_awx_k8s_verify_ssl": True})
    assert not probed["verification_possible"]


def _configure(extra: dict) -> subprocess.CompletedProcess:
    """configure_awx.yml itself, against a controller that refuses connections: the checks and the
    warning run before the first awx.awx task fails."""
    env = {**os.environ, "CONTROLLER_HOST": "https://127.0.0.1:1", "CONTROLLER_OAUTH_TOKEN": "x", "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        [*_PLAYBOOK, "-e", json.dumps({**REQUIRED, **extra}), str(CONFIGURE)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )


def test_configure_awx_prints_the_warning_without_ca_data() -> None:
    ran = _configure({})
    assert WARNING in ran.stdout, ran.stdout + ran.stderr
    assert "K8S_AUTH_VERIFY_SSL=False" in ran.stdout
    assert "TASK [Register the execution environment]" in ran.stdout


def test_configure_awx_prints_no_warning_with_ca_data() -> None:
    ran = _configure({"lifecycle_awx_k8s_ca_cert": CA})
    assert "TASK [Register the execution environment]" in ran.stdout, ran.stdout + ran.stderr
    assert WARNING not in ran.stdout


def test_configure_awx_refuses_verification_it_cannot_have() -> None:
    ran = _configure({"lifecycle_awx_k8s_verify_ssl": True})
    assert ran.returncode != 0
    assert REFUSAL in ran.stdout, ran.stdout + ran.stderr
    assert "TASK [Register the execution environment]" not in ran.stdout
