# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What holds a termination where :func:`logic.decide` stopped it (pure;
docs/stalls.md): the preDrain hooks or an unfinished drain it refuses to pass,
the preTerminate hooks, the volumes still attached, the infrastructure or
bootstrap object being deleted and the finalizers that keep it, the provider
tasks an OpenShift Machine waits for, the finalizers that keep a released
Machine."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    CLEARS,
    KIND_DRAIN_UNFINISHED,
    KIND_FINALIZER,
    KIND_INFRASTRUCTURE_FINALIZER,
    KIND_INSTANCE,
    KIND_NODE_DELETION_ERROR,
    KIND_VOLUME_ATTACHMENT,
    NEEDS_ACTION,
    PHASE_DRAIN,
    PHASE_INFRASTRUCTURE,
    PHASE_NODE,
    PHASE_VOLUMES,
    Blocker,
    hook_blockers,
    stamp,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import ObjectState
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, PRE_TERMINATE, Flavour, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import (
    AWAIT_INSTANCE,
    BLOCKED,
    RECORD_VOLUME_START,
    REFUSE,
    STEP_DRAIN,
    WAIT_BOOTSTRAP,
    WAIT_GONE,
    WAIT_INFRASTRUCTURE,
    WAIT_PRE_TERMINATE,
    WAIT_VOLUMES,
    Decision,
    Facts,
)


def _volume_blockers(facts: Facts, flavour: Flavour) -> list[Blocker]:
    status = facts.volumes
    if status is None:
        return []
    since = stamp(flavour.volume_detach_started_at(facts.machine or {}))
    reason = "the attach/detach controller detaches it once no Pod on the Node uses it"
    objects = (
        [f"PersistentVolumeClaim {name}" for name in status.pvcs]
        + [f"PersistentVolume {name}" for name in status.pvs_without_claim]
        + [f"attached volume {name}" for name in status.unmatched_attached]
        + [f"VolumeAttachment {name}" for name in status.unmatched_attachments]
    )
    found = [Blocker(PHASE_VOLUMES, KIND_VOLUME_ATTACHMENT, name, CLEARS, reason, since) for name in objects]
    unnamed = (
        "it names no PersistentVolume (an inline or migrated volume): Cluster API v1.14.2 ends each look of its volume wait with an error"
        " while it is attached, and the wait goes on; the attach/detach controller detaches it once no Pod on the Node uses it, and the"
        " Machine's volume-detach timeout ends the wait"
    )
    found += [
        Blocker(PHASE_VOLUMES, KIND_VOLUME_ATTACHMENT, f"VolumeAttachment {name}", CLEARS, unnamed, since, {"error": status.error})
        for name in status.without_pv
    ]
    return found


def _object_blocker(decision: Decision, state: ObjectState | None) -> list[Blocker]:
    ref = decision.target
    if ref is None:
        return []
    finalizers = list(state.finalizers) if state is not None else []
    reason = f"finalizers {', '.join(finalizers)} keep it until whoever set them (its provider) is done" if finalizers else "it is being deleted"
    name = f"{ref.kind} {ref.namespace}/{ref.name}"
    # Since its deletion was asked for (its deletionTimestamp), when the run has read it being deleted.
    deleted = ((state.obj or {}).get("metadata") or {}).get("deletionTimestamp") if state is not None else None
    return [Blocker(PHASE_INFRASTRUCTURE, KIND_INFRASTRUCTURE_FINALIZER, name, CLEARS, reason, deleted or None, {"finalizers": finalizers})]


def _refusal_blockers(decision: Decision, facts: Facts, flavour: Flavour) -> list[Blocker]:
    machine = facts.machine or {}
    if facts.hands_off is not None:
        return [facts.hands_off.blocker]
    if decision.blocked_by:
        return hook_blockers(flavour, machine, PRE_DRAIN, decision.blocked_by)
    if any(step.name == STEP_DRAIN and step.status == BLOCKED for step in decision.steps):
        node = flavour.node_name(machine)
        reason = "the Node is terminated only after its drain: run lifecycle.machine.machine_drain (or the delete_machine role)"
        return [Blocker(PHASE_DRAIN, KIND_DRAIN_UNFINISHED, f"Node {node}", NEEDS_ACTION, reason, stamp(flavour.drain_started_at(machine)))]
    return []


def _instance_blockers(decision: Decision, facts: Facts, flavour: Flavour) -> list[Blocker]:
    reason = "the provider tasks terminate the instance; run again with instance_terminated=true once they succeed"
    return [Blocker(PHASE_INFRASTRUCTURE, KIND_INSTANCE, f"Machine {machine_label(facts.machine or {})}", NEEDS_ACTION, reason)]


def _finalizer_blockers(decision: Decision, facts: Facts, flavour: Flavour) -> list[Blocker]:
    machine = facts.machine or {}
    finalizers = list((machine.get("metadata") or {}).get("finalizers") or [])
    reason = f"finalizers {', '.join(finalizers)} keep the released Machine until whoever set them removes them"
    return [Blocker(PHASE_INFRASTRUCTURE, KIND_FINALIZER, f"Machine {machine_label(machine)}", NEEDS_ACTION, reason, evidence={"finalizers": finalizers})]


_BY_ACTION = {
    REFUSE: _refusal_blockers,
    WAIT_PRE_TERMINATE: lambda decision, facts, flavour: hook_blockers(flavour, facts.machine or {}, PRE_TERMINATE, decision.blocked_by),
    WAIT_VOLUMES: lambda _decision, facts, flavour: _volume_blockers(facts, flavour),
    RECORD_VOLUME_START: lambda _decision, facts, flavour: _volume_blockers(facts, flavour),
    WAIT_INFRASTRUCTURE: lambda decision, facts, _flavour: _object_blocker(decision, facts.infrastructure),
    WAIT_BOOTSTRAP: lambda decision, facts, _flavour: _object_blocker(decision, facts.bootstrap),
    AWAIT_INSTANCE: _instance_blockers,
    WAIT_GONE: _finalizer_blockers,
}


def terminate_blockers(decision: Decision, facts: Facts, flavour: Flavour) -> list[Blocker]:
    """What holds the termination at ``decision`` (none when it is not held)."""
    find = _BY_ACTION.get(decision.action)
    return find(decision, facts, flavour) if find is not None else []


def node_deletion_blocker(node_name: str, failure: str) -> Blocker:
    """A Node whose deletion failed (or, in check mode, would): it is tried again until the Machine's node-deletion timeout has passed."""
    reason = f"{failure}; it is tried again until the Machine's node-deletion timeout has passed"
    return Blocker(PHASE_NODE, KIND_NODE_DELETION_ERROR, f"Node {node_name}", NEEDS_ACTION, reason, evidence={"error": failure})
