# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the Machines of one ``machine_delete`` task share: their Machines, control-plane
Machines and Clusters, listed once per namespace and kept current by one informer each
(``_k8s/informer.py``).

A round reads each Machine from its namespace's informer: one LIST of the namespace's
Machines for the whole task, then one watch. Whatever the round needs to know about
the Machine later (before each drain pass, after a termination wait, in the next turn
of a round that waits for an unreachable cluster) comes from there too, and so do the
questions Cluster API asks of the Cluster and its control-plane Machines before each
Node step (is the Cluster being deleted, is an active control-plane Machine left).
A Machine so costs no read of its own however long its drain and termination take,
and a task over many Machines in one namespace holds two watches, not one per Machine.

These are caches, and read by the rules ``_k8s/cache.py`` sets out for every cache: every
write to a Machine stays guarded by the resourceVersion it was built from, so a stale copy
is refused by the API server, never written over; when an informer cannot run (no
permission to list or watch, say), what it would have answered is read from the API server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.informer import Informer
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import CAPI_CLUSTER_NAME_LABEL, CAPI_CONTROL_PLANE_LABEL


class MachineFeeds:
    """The task's informers, per namespace and API version: its Machines with the control-plane Machines
    beside them, and the Clusters (Cluster API); each lists on first need (it is a ``scope.CachedMachines``)."""

    def __init__(self, api: KubeApi, machines: list[dict]):
        self.api = api
        self.names: dict[str, set[str]] = {}
        for machine in machines:
            self.names.setdefault(machine["namespace"], set()).add(machine["name"])
        self._lock = threading.Lock()
        self._informers: dict[tuple[str, str, str], Informer] = {}

    def machines(self, api_version: str, namespace: str) -> Informer:
        names = self.names.get(namespace, set())

        def keep(machine: dict) -> bool:
            meta = machine.get("metadata") or {}
            return meta.get("name") in names or CAPI_CONTROL_PLANE_LABEL in (meta.get("labels") or {})

        return self._informer("machines", api_version, namespace, "Machine", keep)

    def clusters(self, api_version: str, namespace: str) -> Informer:
        return self._informer("clusters", api_version, namespace, "Cluster", lambda _cluster: True)

    def _informer(self, plural: str, api_version: str, namespace: str, kind: str, keep: Callable[[dict], bool]) -> Informer:
        key = (plural, api_version, namespace)
        with self._lock:
            found = self._informers.get(key)
            if found is None:
                found = self._informers[key] = Informer(self.api.fork(), resource_path(api_version, plural, namespace), api_version, kind, keep)
        return found

    def read(self, machine: dict) -> dict | None:
        """The Machine as now known (see :meth:`Informer.read`)."""
        return self.machines(machine["apiVersion"], machine["metadata"]["namespace"]).read(machine)

    def machine(self, api_version: str, namespace: str, name: str) -> tuple[bool, dict | None]:
        """(whether the informer knows, the Machine or None when there is none)."""
        return self.machines(api_version, namespace).get(name)

    # -- what Cluster API asks before each Node step (_machine.api.node_steps_skip_reason) ---------
    def cluster(self, api_version: str, namespace: str, name: str) -> tuple[bool, dict | None]:
        return self.clusters(api_version, namespace).get(name)

    def control_plane_machines(self, api_version: str, namespace: str, cluster_name: str) -> list[dict] | None:
        """The Cluster's control-plane Machines; None when the informer cannot answer."""
        items = self.machines(api_version, namespace).items()
        if items is None:
            return None
        labels = [(machine, machine["metadata"].get("labels") or {}) for machine in items]
        return [machine for machine, found in labels if CAPI_CONTROL_PLANE_LABEL in found and found.get(CAPI_CLUSTER_NAME_LABEL) == cluster_name]

    def stop(self) -> None:
        with self._lock:
            informers = list(self._informers.values())
        for found in informers:
            found.stop()
