# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The view of a Machine every reader of Machines gets (pure): machine_info,
the gate events of the event source, the inventory plugin's host variables."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for, hooks_summary, is_deleting


def describe(machine: dict | None, fallback: dict | None = None) -> dict:
    """The view of one Machine (``machine`` None: it is gone, ``fallback`` names it)."""
    if machine is None:
        meta = fallback["metadata"]
        return {"name": meta["name"], "namespace": meta.get("namespace"), "api_version": fallback["apiVersion"], "exists": False}
    flavour = flavour_for(machine)
    meta = machine["metadata"]
    infrastructure, bootstrap = flavour.infrastructure_ref(machine), flavour.bootstrap_ref(machine)
    return {
        "name": meta["name"],
        "namespace": meta.get("namespace"),
        "api_version": machine["apiVersion"],
        "flavour": flavour.name,
        "exists": True,
        "phase": (machine.get("status") or {}).get("phase"),
        "deleting": is_deleting(machine),
        "deletion_timestamp": meta.get("deletionTimestamp"),
        "finalizers": meta.get("finalizers") or [],
        "node_name": flavour.node_name(machine),
        "cluster_name": flavour.cluster_name(machine),
        "hooks": hooks_summary(flavour.hooks(machine)),
        "gates": flavour.gates(machine),
        "conditions": flavour.all_conditions(machine),
        "infrastructure_ref": infrastructure.as_dict() if infrastructure else None,
        "bootstrap_ref": bootstrap.as_dict() if bootstrap else None,
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
    }
