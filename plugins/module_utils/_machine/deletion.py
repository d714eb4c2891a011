# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What Cluster API's machine controller decides about the Node of a Machine
being deleted, beyond the hooks (pure; docs/behaviour.md, "Cluster API
v1.14.2's deletion decisions"):

- once the wait at the preTerminate gate has started, or while the
  InfraMachine is gone or being deleted, the Node is neither drained nor
  are its volumes waited for, ever again (:func:`node_work_over`);
- a Machine without a nodeRef whose providerID (its own, else its
  InfraMachine's) one Node carries is given that Node
  (:func:`provider_id`, :func:`node_with_provider_id`).

A flavour whose controller follows none of these rules (``Flavour.capi_node_rules`` false: OpenShift)
gets None from every function.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_TERMINATE, Flavour
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339


@dataclass(frozen=True)
class ObjectState:
    """Whether a referenced object exists, and whether it is already being deleted.
    ``obj``: the object as read (an InfraMachine's conditions are mirrored into the
    Machine's ``InfrastructureReady``, row 32); not compared."""

    exists: bool
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    obj: dict | None = field(default=None, compare=False, repr=False)


GONE = ObjectState(exists=False)


def object_state(obj: dict | None) -> ObjectState:
    if obj is None:
        return GONE
    meta = obj.get("metadata") or {}
    return ObjectState(
        exists=True,
        deleting=bool(meta.get("deletionTimestamp")),
        finalizers=tuple(meta.get("finalizers") or ()),
        obj=obj,
    )


def node_work_over(flavour: Flavour, machine: dict, infrastructure: ObjectState | None) -> str | None:
    """Why the drain and the volume wait of a Cluster API Machine being deleted
    are over for good (None while they are not): the wait at the preTerminate
    gate has started (``status.deletion.waitForPreTerminateHookStartTime``), or
    the InfraMachine is gone (no reference, or the object does not exist) or
    being deleted. ``infrastructure`` None: not read, so only the recorded
    start time and a missing reference are looked at."""
    if not flavour.capi_node_rules:
        return None
    started = flavour.hook_wait_started_at(machine, PRE_TERMINATE)
    if started is not None:
        return f"the wait for preTerminate hooks started at {rfc3339(started)}, so the Node is neither drained nor waited for again"
    ref = flavour.infrastructure_ref(machine)
    if ref is None:
        return "the Machine has no infrastructureRef, so its Node is neither drained nor waited for"
    state = None
    if infrastructure is not None and not infrastructure.exists:
        state = "gone"
    elif infrastructure is not None and infrastructure.deleting:
        state = "being deleted"
    return f"{ref.kind} {ref.namespace}/{ref.name} is {state}, so its Node is neither drained nor waited for" if state else None


def provider_id(flavour: Flavour, machine: dict, infrastructure: dict | None) -> str | None:
    """The providerID a Cluster API Machine's Node is found by: the Machine's own, else its InfraMachine's ``spec.providerID``."""
    if not flavour.capi_node_rules:
        return None
    return flavour.provider_id(machine) or ((infrastructure or {}).get("spec") or {}).get("providerID") or None


def node_with_provider_id(nodes: list[dict], wanted: str) -> dict | None:
    """The one Node whose ``spec.providerID`` is ``wanted``; None when none is, or more than one (Cluster API then finds none)."""
    matching = [node for node in nodes if (node.get("spec") or {}).get("providerID") == wanted]
    return matching[0] if len(matching) == 1 else None
