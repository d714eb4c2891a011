"""The event source file extensions/eda/plugins/event_source/machine_gates.py: its documentation lists
exactly the arguments it accepts, it refuses others by name before connecting anywhere, and its
command line (for trying it without a rulebook) turns flags into those arguments."""

from __future__ import annotations

import asyncio
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_MAP
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.logic import GateSourceRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import CONNECTION_OPTIONS

SOURCE = Path(__file__).resolve().parents[3] / "extensions" / "eda" / "plugins" / "event_source" / "machine_gates.py"


def _load():
    spec = importlib.util.spec_from_file_location("machine_gates_source", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


machine_gates = _load()
ACCEPTED = {*GateSourceRequest.SOURCE_OPTIONS, *CONNECTION_OPTIONS}


def test_the_documentation_lists_every_argument_accepted() -> None:
    documented = set(yaml.safe_load(machine_gates.DOCUMENTATION)["options"])
    assert documented == ACCEPTED


def test_the_docs_page_lists_every_argument_accepted() -> None:
    page = (SOURCE.parents[4] / "docs" / "eda.md").read_text().split("## Source options", 1)[1].split("\n## ", 1)[0]
    listed = {name for row in page.splitlines() if row.startswith("| `") for name in row.split(" | ")[0].strip("| ").replace("`", "").split(", ")}
    assert listed == ACCEPTED


def test_an_unknown_argument_is_refused_by_name_before_connecting() -> None:
    with pytest.raises(MachineError, match=r"Unknown argument\(s\) of lifecycle.machine.machine_gates: hook, selector; known: "):
        asyncio.run(machine_gates.main(asyncio.Queue(), {"hook_owner": "ctl", "hook": "x", "selector": "a=b"}))


def test_the_command_line_gives_only_the_flags_given() -> None:
    assert machine_gates.cli_args(["--hook-owner", "log-shipper"]) == {"hook_owner": "log-shipper"}


def test_the_command_line_gives_every_kind_of_argument() -> None:
    argv = [
        "--kubeconfig", "/home/me/.kube/config", "--context", "prod",
        "--point", "preDrain", "--point", "preTerminate", "--hook-name", "flush-logs", "--gate", "deleting",
        "--label-selector", "role=worker", "--label-selector", "zone=a", "--resync-interval", "0",
        "--validate-certs", "false", "--impersonate-group", "ops", "--api-version", "cluster.x-k8s.io/v1beta2",
    ]  # fmt: skip
    args = machine_gates.cli_args(argv)
    assert args == {
        "kubeconfig": "/home/me/.kube/config",
        "context": "prod",
        "point": ["preDrain", "preTerminate"],
        "hook_name": "flush-logs",
        "gate": "deleting",
        "label_selectors": ["role=worker", "zone=a"],
        "resync_interval": "0",
        "validate_certs": False,
        "impersonate_groups": ["ops"],
        "api_version": "cluster.x-k8s.io/v1beta2",
    }
    request = GateSourceRequest.from_args(args)
    assert request.points == ("preDrain", "preTerminate") and request.label_selector == "role=worker,zone=a"
    assert request.connection == {"kubeconfig": "/home/me/.kube/config", "context": "prod", "validate_certs": False, "impersonate_groups": ["ops"]}


@pytest.mark.parametrize("argv", [["--point", "preCreate"], ["--validate-certs", "maybe"], ["--hook", "x"]])
def test_the_command_line_refuses_bad_flags(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        machine_gates.cli_args(argv)
    assert "machine_gates.py: error:" in capsys.readouterr().err


def test_the_eda_credential_type_injects_what_the_source_reads() -> None:
    """extensions/eda/credential-type.yml injects kubernetes.core's K8S_AUTH_* variables, from its own
    inputs, and the CA through a file the EDA controller writes (never data baked into an image)."""
    credential_type = yaml.safe_load((SOURCE.parents[2] / "credential-type.yml").read_text())
    fields = {field["id"] for field in credential_type["inputs"]["fields"]}
    assert set(credential_type["inputs"]["required"]) <= fields
    read = {f"K8S_AUTH_{name.upper()}" for pair in AUTH_ARG_MAP.items() for name in pair}
    injectors = credential_type["injectors"]
    assert set(injectors["env"]) <= read
    assert {"K8S_AUTH_HOST", "K8S_AUTH_API_KEY", "K8S_AUTH_SSL_CA_CERT"} <= set(injectors["env"])
    files = {name.removeprefix("template.") for name in injectors.get("file", {})}
    for value in [*injectors["env"].values(), *injectors.get("file", {}).values()]:
        (name,) = re.fullmatch(r"\{\{ ([\w.]+) \}\}", value).groups()
        assert name in fields or name.removeprefix("eda.filename.") in files, value
    assert {name for name in CONNECTION_OPTIONS if name in AUTH_ARG_MAP.values()} >= {"host", "api_key", "ca_cert"}
