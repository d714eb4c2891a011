# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The connection to a Machine's Node: the workload cluster of a Cluster API
Machine, the task's own cluster for an OpenShift one (docs/topology.md).

Each workload cluster gets one connection per run, shared by every Machine
of that cluster and made the first time one of them needs its Node: its
kubeconfig Secret is read once (and once more if the workload cluster stops
accepting the credentials, since the Secret may have been rotated).
The connection has the run's retry rules, cancellation and each task's
deadline; its errors name the workload cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import client_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, ConfigError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import NODES, resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, flavour_for, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import (
    KUBECONFIG,
    MANAGEMENT,
    WorkloadEntry,
    WorkloadSettings,
    cluster_key,
    cluster_label,
    fix_hint,
    kubeconfig_from_secret,
    missing_secret_message,
    no_cluster_message,
    provider_id_conflict,
    secret_name,
)


def secret_path(namespace: str, cluster: str) -> str:
    return resource_path("v1", "secrets", namespace, secret_name(cluster))


def read_kubeconfig_secret(api: KubeApi, namespace: str, cluster: str) -> dict | None:
    """The kubeconfig in the Secret ``<cluster>-kubeconfig`` of the management cluster; None when there is no such Secret."""
    secret = api.get(secret_path(namespace, cluster))
    return None if secret is None else kubeconfig_from_secret(secret, namespace, cluster)


def workload_of(machine: dict, flavour: Flavour | None = None) -> tuple[str, str] | None:
    """(namespace, cluster name) of a Cluster API Machine's workload cluster; None
    for a Machine whose Node lives beside it (OpenShift)."""
    flavour = flavour or flavour_for(machine)
    if not flavour.split_clusters:
        return None
    namespace = machine["metadata"]["namespace"]
    cluster = flavour.cluster_name(machine)
    if not cluster:
        raise MachineError(no_cluster_message(machine_label(machine)))
    return namespace, cluster


def node_api(api: KubeApi, machine: dict, settings: WorkloadSettings, flavour: Flavour | None = None) -> KubeApi:
    """Where the Machine's Node, its Pods, PodDisruptionBudgets and
    VolumeAttachments are: ``api`` itself (OpenShift, or a self-hosted cluster)
    or the Machine's workload cluster, with ``api``'s deadline.
    MachineError when the workload cluster cannot be reached from what is given;
    nothing falls back to the management cluster."""
    where = workload_of(machine, flavour)
    if where is None:
        return api
    namespace, cluster = where
    entry = settings.entry(namespace, cluster)
    if entry.source == MANAGEMENT:
        return api
    label = cluster_label(namespace, cluster)

    def make() -> tuple[Any, Any]:
        return _client(api, machine, namespace, cluster, entry), _renewal(api, machine, namespace, cluster, entry)

    return api.other_cluster(cluster_key(namespace, cluster, entry), make, label=label)


class NodeSide:
    """The connection to a Machine's Node (:func:`node_api`), made the first time the Node is needed and kept;
    ``machine()`` gives the Machine (None: a Node given by name, on ``api`` itself)."""

    def __init__(self, api: KubeApi, machine: Callable[[], dict | None], settings: WorkloadSettings, flavour: Callable[[], Flavour | None]):
        self.api, self.machine, self.settings, self.flavour = api, machine, settings, flavour
        self.made: KubeApi | None = None

    def __call__(self) -> KubeApi:
        if self.made is None:
            machine = self.machine()
            self.made = self.api if machine is None else node_api(self.api, machine, self.settings, self.flavour())
        return self.made


def _client(api: KubeApi, machine: dict, namespace: str, cluster: str, entry: WorkloadEntry) -> Any:
    label = cluster_label(namespace, cluster)
    if entry.source == KUBECONFIG:
        kubeconfig = entry.kubeconfig
        what = f"the kubeconfig {kubeconfig}" if isinstance(kubeconfig, str) else "the kubeconfig given as a mapping"
    else:
        kubeconfig = read_kubeconfig_secret(api, namespace, cluster)
        if kubeconfig is None:
            raise MachineError(missing_secret_message(machine_label(machine), namespace, cluster))
        what = f"the kubeconfig in the Secret {namespace}/{secret_name(cluster)}"
    try:
        return client_from_kubeconfig(kubeconfig, entry.context)
    except ConfigError as exc:
        raise MachineError(f"Cannot reach {label}: {what} cannot be used ({exc}); fix it, " + fix_hint(cluster)) from None


def _renewal(api: KubeApi, machine: dict, namespace: str, cluster: str, entry: WorkloadEntry):
    """What the transport calls once after a 401 from the workload cluster: the
    Secret read again (a rotated kubeconfig); a kubeconfig file is read again too."""

    def renew() -> Any:
        try:
            return _client(api, machine, namespace, cluster, entry)
        except (MachineError, ApiError):
            return None  # the 401 stands, and says why

    return renew


def check_node_side(api: KubeApi, machine: dict, settings: WorkloadSettings) -> None:
    """Before a Machine is marked for deletion: can its Node be reached, and is the
    Node of that name its own? MachineError (no Secret, no usable kubeconfig, a
    Node with another machine's providerID) or ApiError (the workload cluster does
    not answer), so that bad input changes nothing. A Machine without a Node
    (whose workload cluster only has to answer when it has a providerID to find
    its Node by), or whose Node lives beside it, needs no check."""
    flavour = flavour_for(machine)
    node_name = flavour.node_name(machine)
    if not flavour.split_clusters:
        return
    if not node_name:
        if flavour.provider_id(machine):
            # Its Node is looked for by providerID once it is being deleted: the workload cluster must answer.
            node_api(api, machine, settings, flavour).get(NODES, limit=1)
        return
    node_side = node_api(api, machine, settings, flavour)
    # Live, not the run's cache of Nodes: this check is the gate before the Machine is marked for
    # deletion (a write no resourceVersion guards against a Node that changed), so it takes the server's word.
    node = node_side.live_reader().get(f"{NODES}/{node_name}")
    conflict = provider_id_conflict(machine, node, node_side.label or "the management cluster")
    if conflict:
        raise MachineError(conflict + "; the Machine was not marked for deletion")
