# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""machine_info's view of a Machine (pure): the fields every reader of
Machines gets (the module, the inventory plugin, the event source), and the
gates a wait can ask for."""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for, hooks_summary, is_deleting
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection, selection_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options, seconds

WAIT_STATES = ("drainable", "drained", "terminable", "creatable", "deleting", "deleted")
BOUNDS = seconds("wait_timeout")


@dataclass(frozen=True)
class InfoRequest:
    """machine_info's options."""

    selection: MachineSelection = field(default_factory=MachineSelection)
    wait: bool = False
    wait_for: str = "deleted"
    wait_timeout: int = 120

    @classmethod
    def from_params(cls, params: dict) -> InfoRequest:
        check_options("machine_info", params, BOUNDS, errors=selection_errors(params, writes=False))
        return cls(selection=MachineSelection.from_params(params), wait=params["wait"], wait_for=params["wait_for"], wait_timeout=params["wait_timeout"])


def describe(machine: dict | None, fallback: dict | None = None) -> dict:
    """The module's view of one Machine (``machine`` None: it is gone)."""
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


def reached(state: str):
    """A predicate on a Machine (None: gone) for a ``wait_for`` state."""

    def check(machine: dict | None) -> bool:
        if machine is None:
            return True
        if state == "deleted":
            return False
        if state == "deleting":
            return is_deleting(machine)
        return flavour_for(machine).gates(machine)[state]

    return check
