"""What of a kubeconfig is never printed (``_options/connection.py`` ``kubeconfig_credentials``,
``_module.py`` ``mask_credentials``), and the one home of the options several modules share
(``_options/specs.py``). That no credential reaches a run's output at -vvv is proven in
tests/integration/test_secrets_never_printed.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.parameters import remove_values

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import DEFAULT_GRACE, SETTINGS
from ansible_collections.lifecycle.machine.plugins.module_utils._module import auth_argument_spec, mask_credentials
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import kubeconfig_credentials
from ansible_collections.lifecycle.machine.plugins.module_utils._options.specs import (
    CONTROLLER_GRACE_DEFAULT,
    MACHINE_CONTROLLER_SETTINGS,
    machine_side_spec,
)

REPO = Path(__file__).resolve().parents[3]


def kubeconfig(token: str, server: str = "https://10.0.0.1:6443") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c1", "cluster": {"server": server}}],
        "users": [{"name": "u1", "user": {"token": token, "client-key-data": "S0VZ", "exec": {"env": [{"name": "X", "value": "envsecret"}]}}}],
        "contexts": [{"name": "c1", "context": {"cluster": "c1", "user": "u1"}}],
    }


def test_the_credentials_of_a_kubeconfig_are_its_users_values() -> None:
    assert kubeconfig_credentials(kubeconfig("tok")) == {"tok", "S0VZ", "X", "envsecret"}


def test_credentials_are_found_wherever_a_kubeconfig_is_nested() -> None:
    option = {"kubeconfig": kubeconfig("a"), "clusters": {"ns/c1": {"kubeconfig": kubeconfig("b")}, "c2": "/path/c2.kubeconfig", "c3": "management"}}
    assert {"a", "b"} <= kubeconfig_credentials(option)
    assert not {"/path/c2.kubeconfig", "management", "c1", "v1", "https://10.0.0.1:6443"} & kubeconfig_credentials(option)


def test_a_path_is_no_secret_and_a_pasted_kubeconfig_is() -> None:
    assert kubeconfig_credentials("~/.kube/config") == set()
    pasted = "apiVersion: v1\nusers:\n- user: {token: t}\n"
    assert kubeconfig_credentials(pasted) == {pasted}
    assert kubeconfig_credentials(None) == set()


def test_every_option_that_can_carry_a_credential_is_no_log() -> None:
    spec = auth_argument_spec()
    assert {name for name, opts in spec.items() if opts.get("no_log")} >= {"kubeconfig", "api_key", "password"}
    assert machine_side_spec()["workload_cluster"]["no_log"] is True


@pytest.fixture
def ansible_module(monkeypatch):
    def make(spec: dict, params: dict) -> basic.AnsibleModule:
        monkeypatch.setattr(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": params}).encode())
        monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
        return basic.AnsibleModule(argument_spec=spec)

    return make


def test_only_credentials_stay_masked_once_parsed(ansible_module) -> None:
    spec = {**auth_argument_spec(), **machine_side_spec()}
    params = {
        "kubeconfig": kubeconfig("management-token"),
        "api_key": "the-api-key",
        "workload_cluster": {"clusters": {"ns/c1": {"kubeconfig": kubeconfig("workload-token")}, "c2": "management"}},
    }
    module = ansible_module(spec, params)
    mask_credentials(module, spec)
    shown = json.dumps(remove_values(module.params, module.no_log_values))
    for secret in ("management-token", "workload-token", "the-api-key", "envsecret"):
        assert secret not in shown
    # Names, servers and sources still read in messages.
    for readable in ("https://10.0.0.1:6443", '"c1"', '"management"', '"v1"'):
        assert readable in shown


def test_a_kubeconfig_path_stays_readable(ansible_module) -> None:
    spec = auth_argument_spec()
    module = ansible_module(spec, {"kubeconfig": "/etc/ca.crt"})
    mask_credentials(module, spec)
    assert "/etc/ca.crt" not in module.no_log_values


def test_the_shared_options_have_one_home() -> None:
    assert SETTINGS == MACHINE_CONTROLLER_SETTINGS
    assert DEFAULT_GRACE == CONTROLLER_GRACE_DEFAULT
    for name in ("machine_drain", "machine_terminate", "machine_delete"):
        main = (REPO / "plugins" / "modules" / f"{name}.py").read_text().split("def main", 1)[1]
        assert "**machine_side_spec()" in main, name
        assert '"workload_cluster"' not in main and '"machine_controller"' not in main, f"{name} repeats a shared option"
