# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Conditions a Machine carries while it is deleted, with the exact upstream
types, reasons and messages (docs/behaviour.md §6), and the upstream rules for when a
condition's lastTransitionTime moves. Pure: lists of dicts in, lists out.

Two condition shapes exist:
- "v1beta1 style" (OpenShift Machines, Cluster API v1beta1 conditions):
  type/status/severity/reason/message/lastTransitionTime; the time moves
  whenever status, severity, reason or message change; sorted Ready first,
  then by type.
- metav1.Condition (Cluster API v1beta2 conditions): the time moves only
  when the status changes; observedGeneration is recorded.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339

if TYPE_CHECKING:  # the flavours import this file
    from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour

# Deletion stages, in workflow order (docs/behaviour.md §2).
STAGE_PRE_DRAIN = "WaitingForPreDrainHook"
STAGE_DRAINING = "DrainingNode"
STAGE_DRAIN_FAILED = "DrainingFailed"
STAGE_DRAINED = "Drained"
STAGE_DRAIN_SKIPPED = "DrainSkipped"
STAGE_VOLUMES = "WaitingForVolumeDetach"
STAGE_VOLUMES_DETACHED = "VolumesDetached"
STAGE_PRE_TERMINATE = "WaitingForPreTerminateHook"
STAGE_INFRASTRUCTURE = "WaitingForInfrastructureDeletion"
STAGE_BOOTSTRAP = "WaitingForBootstrapDeletion"
STAGE_DELETING_NODE = "DeletingNode"
STAGE_NODE_DELETE_FAILED = "NodeDeletionFailed"
STAGE_COMPLETED = "DeletionCompleted"
STAGES = (
    STAGE_PRE_DRAIN,
    STAGE_DRAINING,
    STAGE_DRAIN_FAILED,
    STAGE_DRAINED,
    STAGE_DRAIN_SKIPPED,
    STAGE_VOLUMES,
    STAGE_VOLUMES_DETACHED,
    STAGE_PRE_TERMINATE,
    STAGE_INFRASTRUCTURE,
    STAGE_BOOTSTRAP,
    STAGE_DELETING_NODE,
    STAGE_NODE_DELETE_FAILED,
    STAGE_COMPLETED,
)

SEVERITY_INFO = "Info"
SEVERITY_WARNING = "Warning"


@dataclass
class Stage:
    """Where a deletion stands, and what the conditions need to say about it.

    ``hooks`` are the blocking hooks of the stage's gate (objects with
    ``name``, ``owner`` and, for Cluster API, ``key``); ``kind`` is the
    infrastructure or bootstrap kind waited for; ``infra_machine`` is the
    InfraMachine as the writer read it while it exists (Cluster API mirrors it into
    ``InfrastructureReady``: :func:`capi_infrastructure_ready`,
    :func:`capi_v1beta2_infrastructure_ready`), None when it did not read it.
    """

    name: str
    message: str = ""
    hooks: list[Any] = field(default_factory=list)
    kind: str = ""
    infra_machine: dict | None = None
    # A look that ended in an error (the volume wait: a VolumeAttachment naming no PersistentVolume): the Warning Event says it.
    error: str = ""


def _condition(condition_type: str, status: str, reason: str = "", message: str = "", severity: str = "") -> dict:
    result = {"type": condition_type, "status": status}
    if severity:
        result["severity"] = severity
    if reason:
        result["reason"] = reason
    if message:
        result["message"] = message
    return result


def _same_state(old: dict, new: dict) -> bool:
    return all((old.get(key) or "") == (new.get(key) or "") for key in ("status", "severity", "reason", "message"))


def _sort_key(condition: dict) -> tuple[int, str]:
    return (0 if condition.get("type") == "Ready" else 1, condition.get("type") or "")


def set_v1beta1_condition(conditions: list[dict], new: dict, now: _dt.datetime) -> list[dict]:
    """Upsert ``new`` by type, v1beta1 style (OpenShift and Cluster API v1beta1)."""
    result = []
    found = False
    for existing in conditions:
        if existing.get("type") != new["type"]:
            result.append(existing)
            continue
        found = True
        if _same_state(existing, new):
            result.append(existing)
        else:
            result.append({**new, "lastTransitionTime": rfc3339(now)})
    if not found:
        result.append({**new, "lastTransitionTime": rfc3339(now)})
    return sorted(result, key=_sort_key)


def set_metav1_condition(conditions: list[dict], new: dict, now: _dt.datetime, generation: int | None = None) -> list[dict]:
    """Upsert ``new`` by type, metav1.Condition style (Cluster API v1beta2)."""
    new = {"type": new["type"], "status": new["status"], "reason": new.get("reason") or "", "message": new.get("message") or ""}
    if generation is not None:
        new["observedGeneration"] = generation
    result = []
    found = False
    for existing in conditions:
        if existing.get("type") != new["type"]:
            result.append(existing)
            continue
        found = True
        unchanged = all(existing.get(key) == new.get(key) for key in new)
        if unchanged:
            result.append(existing)
        elif existing.get("status") == new["status"] and existing.get("lastTransitionTime"):
            result.append({**new, "lastTransitionTime": existing["lastTransitionTime"]})
        else:
            result.append({**new, "lastTransitionTime": rfc3339(now)})
    if not found:
        result.append({**new, "lastTransitionTime": rfc3339(now)})
    return result


def openshift_hook_list(hooks: list[Any]) -> str:
    """Go's ``%+v`` of a []LifecycleHook, as the machine controller writes it."""
    return "[" + " ".join(f"{{Name:{hook.name} Owner:{hook.owner}}}" for hook in hooks) + "]"


def openshift_conditions(current: list[dict], hooks: dict[str, list[Any]], stage: Stage | None, now: _dt.datetime) -> list[dict]:
    """Drainable and Terminable from the hooks (as the machine controller sets
    them on every reconcile), and Drained from the stage."""
    from_hooks = (
        ("Drainable", "preDrain", "Drain operation currently blocked by: "),
        ("Terminable", "preTerminate", "Terminate operation currently blocked by: "),
    )
    result = list(current)
    for condition_type, point, prefix in from_hooks:
        blocking = hooks.get(point) or []
        if blocking:
            new = _condition(condition_type, "False", "HookPresent", prefix + openshift_hook_list(blocking), SEVERITY_WARNING)
        else:
            new = _condition(condition_type, "True")
        result = set_v1beta1_condition(result, new, now)
    drained = None
    if stage is not None:
        if stage.name == STAGE_DRAINED:
            drained = _condition("Drained", "True", message="Drain finished successfully")
        elif stage.name == STAGE_DRAIN_SKIPPED:
            drained = _condition("Drained", "True", message="Node drain skipped")
        elif stage.name in (STAGE_DRAINING, STAGE_DRAIN_FAILED):
            drained = _condition("Drained", "False", "DrainError", f"could not drain machine: {stage.message}", SEVERITY_WARNING)
    if drained is not None:
        result = set_v1beta1_condition(result, drained, now)
    return result


class _Fixed(str):
    """A message upstream always writes as it is, whatever the stage's own message."""

    __slots__ = ()


_PRE_DRAIN_OK = ("PreDrainDeleteHookSucceeded", "True", "", "", "")
_VOLUME_WAIT_MESSAGE = _Fixed("Waiting for node volumes to be detached")
# Cluster API v1beta1 conditions each stage sets: (type, status, reason, default message, severity);
# the stage's own message replaces the default, except where upstream writes none (None) or
# always the same text (_Fixed: the volume wait's progress goes only to the v1beta2 Deleting condition).
_CAPI_V1BETA1 = {
    STAGE_PRE_DRAIN: [("PreDrainDeleteHookSucceeded", "False", "WaitingExternalHook", None, SEVERITY_INFO)],
    STAGE_DRAINING: [_PRE_DRAIN_OK, ("DrainingSucceeded", "False", "Draining", "Draining the node before deletion", SEVERITY_INFO)],
    STAGE_DRAIN_FAILED: [_PRE_DRAIN_OK, ("DrainingSucceeded", "False", "DrainingFailed", "", SEVERITY_WARNING)],
    STAGE_DRAINED: [_PRE_DRAIN_OK, ("DrainingSucceeded", "True", "", "", "")],
    STAGE_DRAIN_SKIPPED: [_PRE_DRAIN_OK],
    STAGE_VOLUMES: [_PRE_DRAIN_OK, ("VolumeDetachSucceeded", "False", "WaitingForVolumeDetach", _VOLUME_WAIT_MESSAGE, SEVERITY_INFO)],
    STAGE_VOLUMES_DETACHED: [_PRE_DRAIN_OK, ("VolumeDetachSucceeded", "True", "", "", "")],
    STAGE_PRE_TERMINATE: [("PreTerminateDeleteHookSucceeded", "False", "WaitingExternalHook", None, SEVERITY_INFO)],
}
_PRE_TERMINATE_OK = [("PreTerminateDeleteHookSucceeded", "True", "", "", "")]
# From the termination on, as the Machine controller does: NodeHealthy False Deleting once the
# infrastructure is being deleted; InfrastructureReady False Deleted once it is gone (and with
# it Ready, see capi_ready_summary).
_NODE_DELETING = ("NodeHealthy", "False", "Deleting", None, SEVERITY_INFO)
_INFRASTRUCTURE_GONE = [("InfrastructureReady", "False", "Deleted", None, SEVERITY_INFO)]
_CAPI_V1BETA1[STAGE_INFRASTRUCTURE] = [*_PRE_TERMINATE_OK, _NODE_DELETING]
for _stage in (STAGE_BOOTSTRAP, STAGE_DELETING_NODE, STAGE_COMPLETED):
    _CAPI_V1BETA1[_stage] = [*_PRE_TERMINATE_OK, *_INFRASTRUCTURE_GONE, _NODE_DELETING]
_CAPI_V1BETA1[STAGE_NODE_DELETE_FAILED] = [*_PRE_TERMINATE_OK, *_INFRASTRUCTURE_GONE, ("NodeHealthy", "False", "DeletionFailed", None, SEVERITY_WARNING)]


# The conditions the Machine controller summarises into Ready, in its order of precedence.
_READY_INPUTS = ("InfrastructureReady", "BootstrapReady", "HealthCheckSucceeded", "OwnerRemediated", "DrainingSucceeded")
_SEVERITY_RANK = {"Error": 0, SEVERITY_WARNING: 1, SEVERITY_INFO: 2}


def capi_ready_summary(conditions: list[dict]) -> dict | None:
    """The v1beta1 ``Ready`` condition as the Machine controller summarises it during a
    deletion: False with the reason, severity and message of the first False input
    (the most severe first, then in order of precedence), True when none is False;
    None when no input condition exists."""
    inputs = [c for name in _READY_INPUTS for c in conditions if c.get("type") == name]
    if not inputs:
        return None
    failing = [c for c in inputs if c.get("status") == "False"]
    if not failing:
        return _condition("Ready", "True")
    first = min(failing, key=lambda c: _SEVERITY_RANK.get(c.get("severity") or "", 3))
    return _condition("Ready", "False", first.get("reason") or "", first.get("message") or "", first.get("severity") or "")


# The reasons of v1beta1 InfrastructureReady when the InfraMachine has no Ready condition and has
# not reported provisioned: before the Machine is deleted, and while it is.
_INFRASTRUCTURE_WAITING = "WaitingForInfrastructure"
_INFRASTRUCTURE_DELETING = "Deleting"


def _infra_v1beta1_ready(infra: dict) -> dict | None:
    """The InfraMachine's ``Ready`` condition as Cluster API's v1beta1 getter reads it:
    ``status.deprecated.v1beta1.conditions`` when that list exists, else ``status.conditions``."""
    status = infra.get("status") or {}
    deprecated = ((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions")
    listed = deprecated if deprecated is not None else status.get("conditions")
    return next((c for c in listed or [] if isinstance(c, dict) and c.get("type") == "Ready"), None)


def capi_infrastructure_ready(infra: dict | None) -> dict | None:
    """The v1beta1 ``InfrastructureReady`` Cluster API v1.14.2 writes on every look at a
    Machine being deleted while its InfraMachine exists (reconcileInfrastructure,
    SetMirror): the InfraMachine's own ``Ready`` condition under that type; without one,
    True when the InfraMachine reports provisioned (``status.initialization.provisioned``,
    or ``status.ready`` of the v1beta1 contract), else False ``Deleting`` (Info, no
    message). None without an InfraMachine (the stages then say ``Deleted``)."""
    if infra is None:
        return None
    ready = _infra_v1beta1_ready(infra)
    if ready is not None:
        return _condition(
            "InfrastructureReady", str(ready.get("status") or ""), ready.get("reason") or "", ready.get("message") or "", ready.get("severity") or ""
        )
    status = infra.get("status") or {}
    provisioned = (status.get("initialization") or {}).get("provisioned") is True or status.get("ready") is True
    if provisioned:
        return _condition("InfrastructureReady", "True")
    return _condition("InfrastructureReady", "False", _INFRASTRUCTURE_DELETING, severity=SEVERITY_INFO)


def _infrastructure_ready_while_deleting(current: list[dict], stage: Stage) -> dict | None:
    """What InfrastructureReady becomes with this stage's write: the InfraMachine's mirror
    when the writer read it; else, where Cluster API's own record shows the InfraMachine
    without a Ready condition and not provisioned (its not-deleting fallback,
    ``WaitingForInfrastructure``), the deleting fallback ``Deleting`` the controller writes
    from its first look at the deletion on."""
    if stage.infra_machine is not None:
        return capi_infrastructure_ready(stage.infra_machine)
    recorded = next((c for c in current if c.get("type") == "InfrastructureReady"), None)
    if recorded and recorded.get("status") == "False" and recorded.get("reason") == _INFRASTRUCTURE_WAITING:
        return _condition("InfrastructureReady", "False", _INFRASTRUCTURE_DELETING, severity=SEVERITY_INFO)
    return None


def capi_v1beta1_conditions(current: list[dict], stage: Stage | None, now: _dt.datetime) -> list[dict]:
    result = list(current)
    if stage is None:
        return result
    infrastructure = _infrastructure_ready_while_deleting(result, stage)
    if infrastructure is not None:
        result = set_v1beta1_condition(result, infrastructure, now)
    for condition_type, status, reason, default_message, severity in _CAPI_V1BETA1.get(stage.name, _PRE_TERMINATE_OK):
        if default_message is None or not reason:
            message = ""
        elif isinstance(default_message, _Fixed):
            message = str(default_message)
        else:
            message = stage.message or default_message
        result = set_v1beta1_condition(result, _condition(condition_type, status, reason, message, severity), now)
    ready = capi_ready_summary(result)
    if ready is not None:
        result = set_v1beta1_condition(result, ready, now)
    return result


# Stages written once the InfraMachine is gone.
_INFRASTRUCTURE_GONE_STAGES = (STAGE_BOOTSTRAP, STAGE_DELETING_NODE, STAGE_NODE_DELETE_FAILED, STAGE_COMPLETED)


def _infra_v1beta2_ready(infra: dict) -> dict | None:
    """The InfraMachine's ``Ready`` condition as Cluster API's v1beta2 getter reads it:
    ``status.v1beta2.conditions`` when that list exists, else ``status.conditions``."""
    status = infra.get("status") or {}
    v1beta2 = (status.get("v1beta2") or {}).get("conditions")
    listed = v1beta2 if v1beta2 is not None else status.get("conditions")
    return next((c for c in listed or [] if isinstance(c, dict) and c.get("type") == "Ready"), None)


def capi_v1beta2_infrastructure_ready(stage: Stage | None, *, kind: str, provisioned: bool) -> dict | None:
    """The v1beta2 ``InfrastructureReady`` Cluster API v1.14.2 writes with a stage of a Machine
    being deleted (setInfrastructureReadyCondition): while the InfraMachine exists (the writer
    read it), the InfraMachine's own ``Ready`` condition, else from whether the Machine records
    it provisioned (``status.initialization.infrastructureProvisioned``: True ``Ready``, or False
    ``NotReady`` "<Kind> status.initialization.provisioned is false"); once it is gone, False
    ``ObjectDeleted`` "<Kind> has been deleted" (``ObjectDoesNotExist`` "<Kind> does not exist"
    when it never was provisioned). None when the stage says nothing about it."""
    if stage is None or not kind or (stage.infra_machine is None and stage.name not in _INFRASTRUCTURE_GONE_STAGES):
        return None
    if stage.name in _INFRASTRUCTURE_GONE_STAGES:
        gone = ("ObjectDeleted", f"{kind} has been deleted") if provisioned else ("ObjectDoesNotExist", f"{kind} does not exist")
        return _infrastructure_v1beta2("False", *gone)
    ready = _infra_v1beta2_ready(stage.infra_machine or {})
    if ready is not None:
        status = str(ready.get("status") or "Unknown")
        # A condition without a reason, True: what Cluster API takes for a v1beta1 one, given its own reason.
        reason = ready.get("reason") or ("Ready" if status == "True" else "NoReasonReported")
        return _infrastructure_v1beta2(status, reason, ready.get("message") or "")
    if provisioned:
        return _infrastructure_v1beta2("True", "Ready", "")
    return _infrastructure_v1beta2("False", "NotReady", f"{kind} status.initialization.provisioned is false")


def _infrastructure_v1beta2(status: str, reason: str, message: str) -> dict:
    return {"type": "InfrastructureReady", "status": status, "reason": reason, "message": message}


# The upstream v1beta2 Deleting messages when a drain or a Node deletion fails; the error
# itself goes to the FailedDrainNode or FailedDeleteNode Event (and, for the drain, to the
# v1beta1 DrainingSucceeded condition).
DRAIN_ERROR_MESSAGE = "Error draining Node, please check controller logs for errors"
NODE_DELETE_ERROR_MESSAGE = "Error deleting Node, please check controller logs for errors"


def capi_deleting_message(stage: Stage) -> str:
    """The message of the v1beta2 ``Deleting`` condition for a stage."""
    keys = ",".join(sorted(hook.key or hook.name for hook in stage.hooks))
    messages = {
        STAGE_DRAIN_FAILED: DRAIN_ERROR_MESSAGE,
        STAGE_NODE_DELETE_FAILED: NODE_DELETE_ERROR_MESSAGE,
        STAGE_PRE_DRAIN: f"Waiting for pre-drain hooks to succeed (hooks: {keys})",
        STAGE_PRE_TERMINATE: f"Waiting for pre-terminate hooks to succeed (hooks: {keys})",
        STAGE_INFRASTRUCTURE: f"Waiting for {stage.kind} to be deleted",
        STAGE_BOOTSTRAP: f"Waiting for {stage.kind} to be deleted",
        STAGE_COMPLETED: "Deletion completed",
    }
    return messages.get(stage.name, stage.message)


# Stages that end a step rather than wait in one: the next waiting stage says where the deletion is.
# Deleting the Node is one of them: the Machine controller deletes it and releases the Machine in
# the same reconcile, so DeletingNode only ever shows a failed Node deletion (STAGE_NODE_DELETE_FAILED).
_STEP_DONE = (STAGE_DRAINED, STAGE_DRAIN_SKIPPED, STAGE_VOLUMES_DETACHED, STAGE_DELETING_NODE)


# Failures are reported under the reason of the step that failed.
_FAILED_STEP_REASON = {STAGE_DRAIN_FAILED: STAGE_DRAINING, STAGE_NODE_DELETE_FAILED: STAGE_DELETING_NODE}


def capi_deleting_reason(stage: Stage) -> str:
    return _FAILED_STEP_REASON.get(stage.name, stage.name)


def capi_deleting_condition(current: list[dict], stage: Stage | None, now: _dt.datetime, machine_generation: int | None = None) -> list[dict]:
    """The v1beta2 ``Deleting`` condition (True while deleting, reason per stage)."""
    if stage is None or stage.name in _STEP_DONE:
        return list(current)
    new = {"type": "Deleting", "status": "True", "reason": capi_deleting_reason(stage), "message": capi_deleting_message(stage)}
    return set_metav1_condition(current, new, now, machine_generation)


# What the Ready summary says of a Machine being deleted, and the words in the Deleting
# message that name why a long drain is slow (Cluster API's own summary rules).
_LONG_DELETION = _dt.timedelta(minutes=15)
_LONG_DRAIN = _dt.timedelta(minutes=5)
_DELAY_REASONS = (
    ("cannot evict pod as it would violate the pod's disruption budget.", "PodDisruptionBudgets"),
    ("deletionTimestamp set, but still not removed from the Node", "Pods not terminating"),
    ("failed to evict Pod", "Pod eviction errors"),
    ("waiting for completion", "Pods not completed yet"),
)


def capi_deleting_summary(deleting: dict | None, *, deleted_at: _dt.datetime | None, drain_started: _dt.datetime | None, now: _dt.datetime) -> str:
    """How the v1beta2 ``Ready`` summary words the ``Deleting`` condition: the stage
    (its reason), and after 15 minutes that it has been long, with, for a drain
    running over 5 minutes, what its message says slows it down."""
    if deleting is None:
        return "Machine deletion in progress"
    reason = deleting.get("reason") or ""
    if deleted_at is None or now - deleted_at <= _LONG_DELETION:
        return f"Machine deletion in progress, stage: {reason}"
    text = f"Machine deletion in progress since more than 15m, stage: {reason}"
    if reason == STAGE_DRAINING and drain_started is not None and now - drain_started > _LONG_DRAIN:
        message = deleting.get("message") or ""
        delays = [name for words, name in _DELAY_REASONS if words in message]
        if delays:
            text += f", delay likely due to {', '.join(delays)}"
    return text


def capi_ready_while_deleting(
    current: list[dict], *, deleted_at: _dt.datetime | None, drain_started: _dt.datetime | None, now: _dt.datetime, machine_generation: int | None = None
) -> list[dict]:
    """The v1beta2 ``Ready`` condition of a Machine being deleted, as the Machine
    controller's summary writes it when ``Deleting`` is what keeps it from being
    ready: False, reason NotReady, the Deleting line of the summary. (The summary
    lists other conditions that are not fine too; the collection writes the Deleting line.)"""
    deleting = next((c for c in current if c.get("type") == "Deleting"), None)
    if deleting is None:
        return list(current)
    line = capi_deleting_summary(deleting, deleted_at=deleted_at, drain_started=drain_started, now=now)
    ready = {"type": "Ready", "status": "False", "reason": "NotReady", "message": f"* Deleting: {line}"}
    return set_metav1_condition(current, ready, now, machine_generation)


def hook_condition_type(point: str, hook_name: str) -> str:
    """The condition in which a hook-implementing controller reports its hook's
    outcome (docs/behaviour.md §6): the lifecycle point, the hook name, then ``Succeeded``,
    each word starting with a capital letter and anything but letters and
    digits dropped. ``preTerminate`` + ``flush-logs`` gives
    ``PreTerminateFlushLogsSucceeded``; ``preDrain`` + ``MigrateImportantApp``
    gives ``PreDrainMigrateImportantAppSucceeded``."""
    words = re.findall(r"[A-Za-z0-9]+", f"{point} {hook_name}")
    return "".join(word[:1].upper() + word[1:] for word in words) + "Succeeded"


def patch_builder(flavour: Flavour, condition_type: str, condition: dict | None, now: _dt.datetime, seen: dict) -> Callable[[dict], dict | None]:
    """build(current Machine) -> status patch or None, for update_with_retry; notes the condition it found in ``seen``."""

    def build(current: dict) -> dict | None:
        seen["before"] = flavour.custom_condition(current, condition_type)
        if condition is None:
            return flavour.remove_condition_patch(current, condition_type)
        return flavour.set_condition_patch(current, condition, now)

    return build
