# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the machines inventory plugin makes of Machines (pure): the keys of a
connection, what is wrong with one, host names, groups and host variables.

A host is a Machine, named ``<namespace>.<name>`` (a namespace never holds a
dot); its groups come from its flavour, phase and deletion, and from the
labels that name its cluster, MachineSet and MachineDeployment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import ALIASES, CONNECTION_OPTIONS, connection_options
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import namespace_error, unknown_keys

# A connection's own keys besides the connection options (and their aliases).
SELECTION_KEYS = ("namespaces", "label_selectors", "api_version")
CONNECTION_KEYS = ("name", *CONNECTION_OPTIONS, *SELECTION_KEYS, *ALIASES)

# Labels that name a Machine's MachineSet and MachineDeployment, and an OpenShift Machine's cluster.
MACHINESET_LABELS = ("machine.openshift.io/cluster-api-machineset", "cluster.x-k8s.io/set-name")
MACHINEDEPLOYMENT_LABEL = "cluster.x-k8s.io/deployment-name"
OPENSHIFT_CLUSTER_LABEL = "machine.openshift.io/cluster-api-cluster"
# A warning names at most this many Secrets.
SHOWN_SECRETS = 5


@dataclass(frozen=True)
class InventoryConnection:
    """One entry of ``connections``: its name, how to reach the cluster, which Machines to read."""

    name: str = "default"
    options: dict = field(default_factory=dict)
    namespaces: tuple[str | None, ...] = (None,)
    label_selector: str | None = None
    api_version: str | None = None

    @classmethod
    def from_config(cls, connection: dict) -> InventoryConnection:
        """A checked entry (:func:`connection_errors` found nothing wrong with it)."""
        return cls(
            name=connection_name(connection),
            options=connection_options(connection),
            namespaces=tuple(connection.get("namespaces") or [None]),
            label_selector=",".join(connection.get("label_selectors") or []) or None,
            api_version=connection.get("api_version"),
        )


def connection_name(connection: dict) -> str:
    """The name of the ``lm_connection_<name>`` group: given, else the context, else the host, else ``default``."""
    return connection.get("name") or connection.get("context") or connection.get("host") or "default"


def connection_errors(connections: Any) -> list[str]:
    """What Ansible lets through in ``connections``: entries that are not mappings, unknown keys
    (an ignored ``namespace`` would read every namespace) and names no Namespace can have."""
    errors: list[str | None] = []
    for index, connection in enumerate(connections or []):
        if not isinstance(connection, dict):
            errors.append(f"connections[{index}] must be a mapping")
            continue
        errors.append(unknown_keys(connection, CONNECTION_KEYS, f"connections[{index}]"))
        namespaces = connection.get("namespaces") or []
        if not isinstance(namespaces, list):
            errors.append(f"connections[{index}].namespaces must be a list")
            continue
        errors += [namespace_error(f"connections[{index}].namespaces", namespace) for namespace in namespaces]
    return [error for error in errors if error]


def group_name(prefix: str, value: str) -> str:
    """``lm_<prefix>_<value>``, lower case, anything but letters, digits and ``_`` as ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", f"lm_{prefix}_{value}".lower())


def host_name(info: dict) -> str:
    return f"{info['namespace']}.{info['name']}"


def host_groups(info: dict, connection: str) -> list[str]:
    """The groups a Machine belongs to, from its machine_info view."""
    labels = info.get("labels") or {}
    groups = ["lm_machines", f"lm_{info['flavour']}", group_name("connection", connection)]  # lm_openshift, lm_clusterapi
    cluster = info.get("cluster_name") or labels.get(OPENSHIFT_CLUSTER_LABEL)
    if cluster:
        groups.append(group_name("cluster", cluster))
    for label in MACHINESET_LABELS:
        if labels.get(label):
            groups.append(group_name("machineset", labels[label]))
    if labels.get(MACHINEDEPLOYMENT_LABEL):
        groups.append(group_name("machinedeployment", labels[MACHINEDEPLOYMENT_LABEL]))
    if info.get("phase"):
        groups.append(group_name("phase", info["phase"]))
    if info.get("deleting"):
        groups.append("lm_deleting")
    return groups


def host_variables(connection: str, info: dict, python: str) -> dict:
    """A Machine's host variables: its machine_info view as ``machine_<key>``, ``machine_ref`` (what the
    delete_machine role and the modules take to find it again), ``machine_connection``, and how its tasks
    run: on the controller, with ``python`` (the Python running Ansible; inventory values are not templated)."""
    variables = {f"machine_{key}": value for key, value in info.items()}
    variables["machine_ref"] = {key: info[key] for key in ("name", "namespace", "api_version", "flavour")}
    variables.update(machine_connection=connection, ansible_connection="local", ansible_python_interpreter=python)
    return variables


def workload_cluster(machine: dict) -> str | None:
    """The workload cluster of a Cluster API Machine (where its Node is): spec.clusterName, else the
    cluster-name label; None for an OpenShift Machine, whose Node is beside it, or when neither is set."""
    flavour = flavour_for(machine)
    return (flavour.cluster_name(machine) or None) if flavour.split_clusters else None


def forbidden_warning(forbidden: list[str]) -> str | None:
    """The one warning for the kubeconfig Secrets the inventory may not read; None when it read them all."""
    if not forbidden:
        return None
    shown = ", ".join(forbidden[:SHOWN_SECRETS]) + (f" and {len(forbidden) - SHOWN_SECRETS} more" if len(forbidden) > SHOWN_SECRETS else "")
    return (
        f"may not read the kubeconfig Secrets {shown} (403 Forbidden), so "
        "machine_workload_kubeconfig_secret is null for their Machines; grant get on Secrets to tell whether they exist"
    )
