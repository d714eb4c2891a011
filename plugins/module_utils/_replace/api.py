# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""API calls about a Machine's owner (its MachineSet, the MachineDeployment over
it), one per call; what they mean and when to make them is ``logic.py``'s and
``run.py``'s. The owner is read in the Machine's own API version (Cluster API
serves both of its versions; the fields read and written are the same in both)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import list_machines_of, update_with_retry
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import Owner, Record, controller_of, owner_kinds, selector_query

PLURALS = {"MachineSet": "machinesets", "MachineDeployment": "machinedeployments"}


def owner_path(flavour: Flavour, kind: str, namespace: str, name: str | None = None) -> str:
    return resource_path(flavour.api_version, PLURALS[kind], namespace, name)


def _typed(obj: dict | None, flavour: Flavour, kind: str) -> dict | None:
    # A LIST item or a GET through another version carries no (or another) apiVersion: set the one read.
    if obj is not None:
        obj["apiVersion"], obj["kind"] = flavour.api_version, kind
    return obj


def get_owner_object(api: KubeApi, flavour: Flavour, kind: str, namespace: str, name: str) -> dict | None:
    return _typed(api.get(owner_path(flavour, kind, namespace, name)), flavour, kind)


def list_owned_machines(api: KubeApi, flavour: Flavour, namespace: str, selector: dict | None) -> list[dict]:
    """The Machines of ``namespace`` its owner's selector picks (none when it selects nothing)."""
    query = selector_query(selector)
    if query is None:
        return []
    return list_machines_of(api, flavour.api_version, namespace, query)[0]


def list_machine_sets(api: KubeApi, flavour: Flavour, namespace: str) -> list[dict]:
    return [_typed(item, flavour, "MachineSet") for item in api.list(owner_path(flavour, "MachineSet", namespace))]


def get_cluster(api: KubeApi, flavour: Flavour, namespace: str, name: str | None) -> dict | None:
    """The Cluster API Cluster of an owner (its pause); None for a flavour without one."""
    if not flavour.split_clusters or not name:
        return None
    return api.get(resource_path(flavour.api_version, "clusters", namespace, name))


def read_owner(api: KubeApi, machine: dict, flavour: Flavour, *, full: bool = True) -> Owner | None:
    """The Machine's owner whose replicas change (its MachineSet, or the MachineDeployment over it), with its
    Machines, and (``full``: what only the refusals need) a MachineDeployment's MachineSets with replicas and the
    Cluster; None when the Machine has no MachineSet as its controller. A MachineSet named but gone fails, naming it."""
    namespace = machine["metadata"]["namespace"]
    set_ref = owner_kinds(machine, flavour)[0]
    if set_ref is None:
        return None
    machine_set = get_owner_object(api, flavour, "MachineSet", namespace, set_ref.name)
    if machine_set is None:
        raise MachineError(f"Machine {machine_label(machine)}: its MachineSet {namespace}/{set_ref.name} was not found")
    deployment_ref = owner_kinds(machine, flavour, machine_set)[1]
    scaled, kind, active = machine_set, "MachineSet", []
    if deployment_ref is not None:
        deployment = get_owner_object(api, flavour, "MachineDeployment", namespace, deployment_ref.name)
        if deployment is None:
            raise MachineError(f"Machine {machine_label(machine)}: its MachineDeployment {namespace}/{deployment_ref.name} was not found")
        scaled, kind = deployment, "MachineDeployment"
        uid = deployment["metadata"].get("uid")
        if full:
            sets = [item for item in list_machine_sets(api, flavour, namespace) if (controller_of(item) or _NO_REF).uid == uid]
            active = sorted(item["metadata"]["name"] for item in sets if (item.get("spec") or {}).get("replicas"))
    machines = list_owned_machines(api, flavour, namespace, (scaled.get("spec") or {}).get("selector"))
    cluster = get_cluster(api, flavour, namespace, (scaled.get("spec") or {}).get("clusterName")) if full else None
    return Owner(kind=kind, obj=scaled, machine_set=machine_set, flavour=flavour, machines=machines, active_sets=active, cluster=cluster)


def owner_recording(api: KubeApi, flavour: Flavour, namespace: str, name: str) -> dict | None:
    """An owner reference to the MachineSet whose owner's record names the Machine ``name`` (the MachineSet itself, or
    one of the MachineDeployment's); None when no owner of this API in ``namespace`` records it."""
    sets = list_machine_sets(api, flavour, namespace)
    owners = [(item, item) for item in sets]
    for kind in flavour.scalable_owner_kinds[1:]:
        for deployment in api.list(owner_path(flavour, kind, namespace)):
            uid = deployment["metadata"].get("uid")
            held = next((item for item in sets if (controller_of(item) or _NO_REF).uid == uid), None)
            if held is not None:
                owners.append((deployment, held))
    for scaled, machine_set in owners:
        if name in Record.parse(scaled).entries:
            meta = machine_set["metadata"]
            return {"apiVersion": flavour.api_version, "kind": "MachineSet", "name": meta["name"], "uid": meta.get("uid"), "controller": True}
    return None


class _NoRef:
    uid = None


_NO_REF = _NoRef()


def patch_owner(api: KubeApi, owner: Owner, patch: dict) -> dict:
    """One merge patch of the scaled object (refused with 409 when it changed since ``patch``'s resourceVersion)."""
    meta = owner.obj["metadata"]
    return _typed(api.patch(owner_path(owner.flavour, owner.kind, meta["namespace"], meta["name"]), patch), owner.flavour, owner.kind)


def annotate_machine(api: KubeApi, machine: dict, key: str, value: str) -> dict:
    """Put one annotation on the Machine (guarded by its resourceVersion, rebuilt on a conflict); the Machine after."""

    def build(current: dict) -> dict | None:
        if (current["metadata"].get("annotations") or {}).get(key) == value:
            return None
        return {"metadata": {"resourceVersion": current["metadata"].get("resourceVersion"), "annotations": {key: value}}}

    return update_with_retry(api, machine, build)[0]


def get_node(api: KubeApi, name: str) -> dict | None:
    return api.get(resource_path("v1", "nodes", name=name))
