"""One list of connection options - kubernetes.core's - for the modules, the inventory plugin and the event source."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.lifecycle.machine.plugins.module_utils._module import auth_argument_spec
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import ALIASES, CONNECTION_OPTIONS, connection_options

REPO = Path(__file__).resolve().parents[3]


def documented_options(path: Path) -> dict:
    source = path.read_text()
    return yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])["options"]


def test_the_list_is_kubernetes_cores_with_its_aliases() -> None:
    assert set(CONNECTION_OPTIONS) == set(AUTH_ARG_SPEC)
    assert {alias: name for name, spec in AUTH_ARG_SPEC.items() for alias in spec.get("aliases", [])} == ALIASES


def test_the_modules_take_the_list_as_kubernetes_core_specifies_it() -> None:
    spec = auth_argument_spec()
    assert tuple(spec) == CONNECTION_OPTIONS
    assert spec == AUTH_ARG_SPEC
    spec["kubeconfig"]["type"] = "changed"
    assert AUTH_ARG_SPEC["kubeconfig"]["type"] == "raw", "a copy: kubernetes.core's own spec is never changed"


def test_the_inventory_plugin_documents_the_list_and_its_aliases() -> None:
    connection = documented_options(REPO / "plugins" / "inventory" / "machines.py")["connections"]["suboptions"]
    assert set(connection) == {*CONNECTION_OPTIONS, "name", "namespaces", "label_selectors", "api_version"}
    assert {alias: name for name, option in connection.items() for alias in option.get("aliases", [])} == ALIASES


def test_the_event_source_documents_the_list() -> None:
    options = documented_options(REPO / "extensions" / "eda" / "plugins" / "event_source" / "machine_gates.py")
    assert set(CONNECTION_OPTIONS) <= set(options)


def test_the_options_set_under_their_own_names() -> None:
    given = {"host": "https://h", "verify_ssl": False, "ssl_ca_cert": "/ca", "api_key": None, "context": "", "namespaces": ["ns"], "point": "preDrain"}
    assert connection_options(given) == {"host": "https://h", "validate_certs": False, "ca_cert": "/ca"}
    assert connection_options({"validate_certs": True, "verify_ssl": False}) == {"validate_certs": True}, "the option's own name wins"
