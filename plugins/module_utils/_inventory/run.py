# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The machines inventory plugin's run: read the Machines of each connection,
with each Cluster API Machine's workload cluster and whether that cluster's
kubeconfig Secret exists (one GET per workload cluster, whatever the number of
its Machines). The plugin turns what this returns into hosts and groups."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.logic import InventoryConnection, forbidden_warning, workload_cluster
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_options
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, ConfigError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import list_machines, namespace_missing
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.view import describe
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.api import secret_path
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import secret_name


@dataclass
class Inventory:
    """(connection name, machine_info view) of every Machine read, and the warning to show, if any."""

    machines: list[tuple[str, dict]] = field(default_factory=list)
    warning: str | None = None


def kubeconfig_secrets(api: KubeApi, clusters: set[tuple[str, str]], forbidden: list[str]) -> dict[tuple[str, str], bool | None]:
    """Whether the Secret ``<cluster>-kubeconfig`` exists, for each (namespace, cluster): one GET per cluster,
    whatever the number of its Machines. None when the GET is forbidden; the Secret is added to ``forbidden``."""
    found: dict[tuple[str, str], bool | None] = {}
    for namespace, cluster in sorted(clusters):
        try:
            found[(namespace, cluster)] = api.get(secret_path(namespace, cluster)) is not None
        except ApiError as exc:
            if exc.status != 403:
                raise MachineError(f"cannot tell whether the Secret {namespace}/{secret_name(cluster)} exists: {exc}") from None
            found[(namespace, cluster)] = None
            forbidden.append(f"{namespace}/{secret_name(cluster)}")
    return found


def read_connection(api: KubeApi, connection: InventoryConnection) -> list[dict]:
    """The Machines of one connection; a namespace that does not exist is a typo, never "no Machines"."""
    machines = []
    for namespace in connection.namespaces:
        listed = list_machines(api, namespace, connection.label_selector, connection.api_version)
        if not listed and namespace and namespace_missing(api, namespace):
            raise MachineError(f"Namespace {namespace} not found")
        machines.extend(listed)
    return machines


def read_inventory(
    connections: list[InventoryConnection],
    *,
    kubeconfig_file: Callable[[str], str] = lambda path: path,
    connect: Callable[..., Any] = api_from_options,
) -> Inventory:
    """Every Machine of every connection (in order), each with ``workload_cluster`` and
    ``workload_kubeconfig_secret``. ``kubeconfig_file(path)`` gives the file to read a
    kubeconfig path from (a vaulted one decrypted: the plugin's loader knows how);
    ``connect(**options)`` makes the transport of a connection.

    Raises MachineError naming the connection that could not be read.
    """
    inventory = Inventory()
    forbidden: list[str] = []
    for connection in connections:
        try:
            options = dict(connection.options)
            if isinstance(options.get("kubeconfig"), str):
                options["kubeconfig"] = kubeconfig_file(options["kubeconfig"])
            api = connect(**options)
            machines = read_connection(api, connection)
        except (ApiError, MachineError, ConfigError) as exc:
            raise MachineError(f"cannot read the Machines of connection {connection.name}: {exc}") from None
        # Where each Machine's Node is, and whether its kubeconfig Secret is there: one GET per workload cluster.
        where = [(machine, machine["metadata"]["namespace"], workload_cluster(machine)) for machine in machines]
        try:
            secrets = kubeconfig_secrets(api, {(namespace, cluster) for _m, namespace, cluster in where if cluster}, forbidden)
        except MachineError as exc:
            raise MachineError(f"connection {connection.name}: {exc}") from None
        for machine, namespace, cluster in where:
            info = describe(machine)
            info["workload_cluster"] = cluster
            info["workload_kubeconfig_secret"] = secrets[(namespace, cluster)] if cluster else None
            inventory.machines.append((connection.name, info))
    inventory.warning = forbidden_warning(forbidden)
    return inventory
