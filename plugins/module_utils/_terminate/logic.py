# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Pure decisions of machine_terminate: given what the API says now (the
Machine, its Node, the Cluster API skip reason, the volumes still attached,
whether the infrastructure and bootstrap objects exist), which deletion step
comes next, what it waits for or why it must not start (docs/behaviour.md §2, §4, §6).

Nothing here talks to the API server. The module observes, calls
:func:`decide`, performs the one action it names, observes again, and so on:
every step is derived from the state in the API, so a second run changes
nothing and a run killed anywhere continues where it stopped.
"""

from __future__ import annotations

import copy
import datetime as _dt
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    STAGE_BOOTSTRAP,
    STAGE_COMPLETED,
    STAGE_DELETING_NODE,
    STAGE_INFRASTRUCTURE,
    STAGE_PRE_TERMINATE,
    STAGE_VOLUMES,
    STAGE_VOLUMES_DETACHED,
    Stage,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import AUTO, DEFAULT_GRACE
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import ObjectState, node_work_over
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import (
    PRE_DRAIN,
    PRE_TERMINATE,
    Flavour,
    Hook,
    ObjectRef,
    hooks_text,
    is_deleting,
    machine_label,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import HandsOff, override_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options, empty_names, invalid_names, seconds
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.volumes import VOLUME_ERROR_MESSAGE, VolumeWaitStatus, volume_detach_message
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import WorkloadSettings, workload_settings

# wait_timeout 0 waits for nothing; a wait_sleep of 0 would read the volumes without pause.
BOUNDS = (*seconds("wait_timeout", "controller_grace"), *seconds("wait_sleep", least=1))


@dataclass(frozen=True)
class TerminateRequest:
    """machine_terminate's options."""

    namespace: str
    machine: str
    api_version: str | None = None
    wait: bool = False
    wait_timeout: int = 120
    wait_sleep: int = 2
    instance_terminated: bool = False
    rules: list | None = None
    use_cluster_rules: bool = True
    check_mode: bool = False
    # How the Node of a Cluster API Machine is reached (its workload cluster).
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)
    # Who terminates a Machine being deleted: its live controller (followed) or the collection (_machine/controller.py).
    machine_controller: str = AUTO
    controller_grace: int = DEFAULT_GRACE
    # Who asked to act on a paused Machine, and why (_machine/pause.py); None: a paused Machine is left alone.
    override_pause: str | None = None

    @classmethod
    def from_params(cls, params: dict, check_mode: bool) -> TerminateRequest:
        """The request of a task; MachineError naming every option out of range."""
        errors = empty_names(params, ("machine", "namespace")) + invalid_names(params, ("machine",), ("namespace",))
        workload = workload_settings(params.get("workload_cluster"), errors)
        errors += override_errors(params.get("override_pause"))
        check_options("machine_terminate", params, BOUNDS, errors=errors)
        return cls(
            namespace=params["namespace"],
            machine=params["machine"],
            api_version=params.get("api_version"),
            wait=params["wait"],
            wait_timeout=params["wait_timeout"],
            wait_sleep=params["wait_sleep"],
            instance_terminated=params["instance_terminated"],
            rules=params.get("rules"),
            use_cluster_rules=params["use_cluster_rules"],
            check_mode=check_mode,
            workload=workload,
            machine_controller=params.get("machine_controller") or AUTO,
            controller_grace=DEFAULT_GRACE if params.get("controller_grace") is None else params["controller_grace"],
            override_pause=params.get("override_pause") or None,
        )


# Steps, in workflow order (docs/behaviour.md §2, from the preDrain gate on).
STEP_PRE_DRAIN = "pre_drain_hook"
STEP_DRAIN = "drain"
STEP_VOLUMES = "volume_detach"
STEP_PRE_TERMINATE = "pre_terminate_hook"
STEP_INFRASTRUCTURE = "infrastructure"
STEP_BOOTSTRAP = "bootstrap"
STEP_INSTANCE = "instance"
STEP_NODE = "node"
# How the failure of a Node deletion whose retries are spent begins (machine_delete tries again on it).
NODE_DELETION_FAILED = "Failed to delete Node "
STEP_RELEASE = "release"

# Step status.
DONE = "done"
SKIPPED = "skipped"
WAITING = "waiting"
BLOCKED = "blocked"
PENDING = "pending"  # not reached yet, or (check mode) the step that would act next

# What the module does next.
REFUSE = "refuse"
OBSERVE_VOLUMES = "observe_volumes"
OBSERVE_INFRASTRUCTURE = "observe_infrastructure"
OBSERVE_BOOTSTRAP = "observe_bootstrap"
RECORD_VOLUME_START = "record_volume_start"
WAIT_VOLUMES = "wait_volumes"
WAIT_PRE_TERMINATE = "wait_pre_terminate"
DELETE_INFRASTRUCTURE = "delete_infrastructure"
WAIT_INFRASTRUCTURE = "wait_infrastructure"
DELETE_BOOTSTRAP = "delete_bootstrap"
WAIT_BOOTSTRAP = "wait_bootstrap"
AWAIT_INSTANCE = "await_instance"
DELETE_NODE = "delete_node"
RELEASE = "release"
WAIT_GONE = "wait_gone"
FINISHED = "finished"

# Actions that write to the API (check mode stops before them).
WRITE_ACTIONS = (RECORD_VOLUME_START, DELETE_INFRASTRUCTURE, DELETE_BOOTSTRAP, DELETE_NODE, RELEASE)
# Actions that wait for something outside the module.
WAIT_ACTIONS = (WAIT_VOLUMES, WAIT_PRE_TERMINATE, WAIT_INFRASTRUCTURE, WAIT_BOOTSTRAP, WAIT_GONE)


@dataclass
class Facts:
    """What the API says now. ``None`` in an optional observation means "not observed yet".

    ``node`` is the Machine's Node (None when it has no nodeRef or the Node is
    gone); ``skip_reason`` is the Cluster API reason to skip the Node steps;
    ``node_deletion_abandoned`` is set once Node deletion failed past the
    Machine's node-deletion timeout (the workflow then goes on without it).
    """

    machine: dict | None
    now: _dt.datetime
    node: dict | None = None
    skip_reason: str | None = None
    volumes: VolumeWaitStatus | None = None
    infrastructure: ObjectState | None = None
    bootstrap: ObjectState | None = None
    instance_terminated: bool = False
    node_deletion_abandoned: str | None = None
    # Why the Machine is left alone, as its controllers leave it (paused, another API authoritative; not overridden).
    hands_off: HandsOff | None = None


@dataclass
class Step:
    name: str
    status: str
    reason: str = ""

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "reason": self.reason}


@dataclass
class Decision:
    """The next action, the state of every step, and the stages to record first.

    ``stages`` are written to the Machine's conditions before the action, in
    order (``None`` refreshes only the hook-derived conditions). ``target`` is
    the object an infrastructure/bootstrap action is about.
    """

    action: str
    steps: list[Step]
    stages: list[Stage | None] = field(default_factory=list)
    message: str = ""
    blocked_by: list[Hook] = field(default_factory=list)
    target: ObjectRef | None = None
    volumes: dict | None = None

    @property
    def next_step(self) -> str | None:
        return next((step.name for step in self.steps if step.status not in (DONE, SKIPPED)), None)

    @property
    def released(self) -> bool:
        return any(step.name == STEP_RELEASE and step.status == DONE for step in self.steps)


def step_names(flavour: Flavour) -> list[str]:
    """The steps of this flavour's workflow, in order."""
    terminate = [STEP_INSTANCE] if flavour.provider_terminates_instance else [STEP_INFRASTRUCTURE, STEP_BOOTSTRAP]
    return [STEP_PRE_DRAIN, STEP_DRAIN, STEP_VOLUMES, STEP_PRE_TERMINATE, *terminate, STEP_NODE, STEP_RELEASE]


def timeout_passed(started_at: _dt.datetime | None, timeout: float | None, now: _dt.datetime) -> bool:
    """Whether ``timeout`` seconds have passed since ``started_at`` (never without either, as upstream)."""
    if not timeout or started_at is None:
        return False
    return (now - started_at).total_seconds() >= timeout


def node_deletion_deadline(machine: dict, flavour: Flavour) -> _dt.datetime | None:
    """When the workflow may go on without deleting the Node: the Machine's
    deletionTimestamp plus its node-deletion timeout (None: retry forever)."""
    timeout = flavour.node_deletion_timeout(machine)
    deleted_at = parse_time((machine.get("metadata") or {}).get("deletionTimestamp"))
    if not timeout or deleted_at is None:
        return None
    return deleted_at + _dt.timedelta(seconds=timeout)


def hook_dicts(hooks: list[Hook]) -> list[dict]:
    return [{"point": hook.point, **hook.as_dict()} for hook in hooks]


def _node_part(node_name: str | None) -> str:
    return f" (Node {node_name})" if node_name else " (no Node)"


def _ref_text(ref: ObjectRef) -> str:
    return f"{ref.kind} {ref.namespace}/{ref.name}"


def _volumes_summary(status: VolumeWaitStatus | None, skipped: str | None, started_at: _dt.datetime | None, message: str = "") -> dict:
    result = (status or VolumeWaitStatus()).as_dict()
    if skipped:
        result["skipped"] = skipped
    result["started_at"] = rfc3339(started_at) if started_at else None
    result["message"] = message
    return result


class _Builder:
    """Collects step results; the remaining steps are reported as pending."""

    def __init__(self, flavour: Flavour):
        self.names = step_names(flavour)
        self.steps: list[Step] = []
        self.stages: list[Stage | None] = []
        self.volumes: dict | None = None

    def add(self, name: str, status: str, reason: str = "") -> None:
        self.steps.append(Step(name, status, reason))

    def finish(self, action: str, **kwargs: Any) -> Decision:
        seen = {step.name for step in self.steps}
        steps = self.steps + [Step(name, PENDING) for name in self.names if name not in seen]
        return Decision(action=action, steps=steps, stages=list(self.stages), volumes=self.volumes, **kwargs)


def _skip_text(facts: Facts) -> str:
    return f"Cluster API skips the Node steps: {facts.skip_reason}"


def _drain_status(facts: Facts, flavour: Flavour, node_name: str | None) -> tuple[str, str] | None:
    """(status, reason) of the drain step, or None when the drain is unfinished."""
    if flavour.drained(facts.machine or {}):
        return DONE, "the Machine records the drain as finished"
    reason = _drain_skip_reason(facts, flavour, node_name)
    return (SKIPPED, reason) if reason else None


def _drain_skip_reason(facts: Facts, flavour: Flavour, node_name: str | None) -> str | None:
    machine = facts.machine or {}
    if flavour.drain_excluded(machine):
        return f"excluded by annotation {flavour.exclude_drain_annotation}"
    over = node_work_over(flavour, machine, facts.infrastructure)
    if over:
        return over
    if not node_name:
        return "the Machine has no nodeRef"
    if facts.node is None:
        return f"Node {node_name} not found"
    timeout = flavour.drain_timeout(machine)
    started_at = flavour.drain_started_at(machine)
    if timeout_passed(started_at, timeout, facts.now):
        return f"the drain timeout of {timeout}s has passed since the drain started at {rfc3339(started_at)}"
    return None


def _drain_unfinished_detail(facts: Facts, flavour: Flavour) -> str:
    machine = facts.machine or {}
    started_at = flavour.drain_started_at(machine)
    if started_at is None:
        return "the drain has not started"
    detail = f"the drain started at {rfc3339(started_at)}"
    timeout = flavour.drain_timeout(machine)
    if timeout:
        return f"{detail} and its timeout of {timeout}s has not passed"
    return detail


def _drain_steps(facts: Facts, flavour: Flavour, builder: _Builder) -> Decision | None:
    """The preDrain gate and the drain: both finished before anything is terminated."""
    machine = facts.machine or {}
    if facts.skip_reason:
        builder.add(STEP_PRE_DRAIN, SKIPPED, _skip_text(facts))
        builder.add(STEP_DRAIN, SKIPPED, _skip_text(facts))
        return None
    label = machine_label(machine)
    node_name = flavour.node_name(machine)
    blocking = flavour.hooks(machine).get(PRE_DRAIN) or []
    if blocking:
        builder.add(STEP_PRE_DRAIN, BLOCKED, f"preDrain hooks: {hooks_text(blocking)}")
        message = (
            f"Refusing to terminate Machine {label}{_node_part(node_name)}: the preDrain gate is closed, "
            f"so the Node has not been drained; waiting for preDrain hooks: {hooks_text(blocking)}"
        )
        return builder.finish(REFUSE, message=message, blocked_by=list(blocking))
    builder.add(STEP_PRE_DRAIN, DONE, "no preDrain hook")
    ref = flavour.infrastructure_ref(machine)
    if facts.infrastructure is None and ref is not None and node_work_over(flavour, machine, None) is None:
        # Cluster API drains (and waits for volumes) only while the InfraMachine exists and is not being deleted.
        return builder.finish(OBSERVE_INFRASTRUCTURE, target=ref)
    drain = _drain_status(facts, flavour, node_name)
    if drain is None:
        detail = _drain_unfinished_detail(facts, flavour)
        builder.add(STEP_DRAIN, BLOCKED, f"the drain of Node {node_name} is not finished: {detail}")
        message = (
            f"Refusing to terminate Machine {label}: the drain of Node {node_name} is not finished ({detail}); drain it first (lifecycle.machine.machine_drain)"
        )
        return builder.finish(REFUSE, message=message)
    builder.add(STEP_DRAIN, *drain)
    return None


def _volume_skip_reason(facts: Facts, flavour: Flavour) -> str | None:
    machine = facts.machine or {}
    if facts.skip_reason:
        return _skip_text(facts)
    if flavour.volume_wait_excluded(machine):
        return f"excluded by annotation {flavour.exclude_volume_wait_annotation}"
    over = node_work_over(flavour, machine, facts.infrastructure)
    if over:
        return over
    started_at = flavour.volume_detach_started_at(machine)
    timeout = flavour.volume_detach_timeout(machine)
    if timeout_passed(started_at, timeout, facts.now):
        return f"the volume detach timeout of {timeout}s has passed since the wait started at {rfc3339(started_at)}"
    return None


def _volume_wait_not_run(facts: Facts, flavour: Flavour, builder: _Builder, skipped: str) -> None:
    """The volume step of a wait that does not run (``skipped`` says why)."""
    machine = facts.machine or {}
    started_at = flavour.volume_detach_started_at(machine)
    recorded = flavour.condition(machine, "VolumeDetachSucceeded")
    if not facts.skip_reason and recorded and recorded.get("status") == "True":
        # Finished before the Node work ended for good (the InfraMachine went, say): that is what happened.
        builder.add(STEP_VOLUMES, DONE, "the Machine records the volume wait as finished")
        seen = facts.volumes if facts.volumes is not None and not facts.volumes.waiting else None
        builder.volumes = _volumes_summary(seen, None, started_at)
    else:
        builder.add(STEP_VOLUMES, SKIPPED, skipped)
        builder.volumes = _volumes_summary(None, skipped, started_at)


def _volume_step(facts: Facts, flavour: Flavour, builder: _Builder) -> Decision | None:
    """The volume detach wait (docs/behaviour.md §4)."""
    machine = facts.machine or {}
    started_at = flavour.volume_detach_started_at(machine)
    skipped = _volume_skip_reason(facts, flavour)
    if skipped:
        _volume_wait_not_run(facts, flavour, builder, skipped)
        return None
    if started_at is None and not flavour.volume_start_when_attached:
        # As Cluster API: the start is recorded once whenever the wait runs, before the volumes are
        # looked at, so also when none is attached or the Node is gone (docs/behaviour.md, row 21a).
        builder.add(STEP_VOLUMES, PENDING, "recording when the volume wait started")
        return builder.finish(RECORD_VOLUME_START)
    if facts.volumes is None:
        return builder.finish(OBSERVE_VOLUMES)
    return _volumes_seen(facts.volumes, started_at, builder)


def _volumes_seen(status: VolumeWaitStatus, started_at: _dt.datetime | None, builder: _Builder) -> Decision | None:
    """The volume wait, once the volumes are observed: over, or still waiting."""
    if status.skipped:
        # Upstream records the wait as succeeded when the Node is gone or unreachable.
        builder.add(STEP_VOLUMES, SKIPPED, status.skipped)
        builder.stages.append(Stage(STAGE_VOLUMES_DETACHED))
        builder.volumes = _volumes_summary(status, status.skipped, started_at)
        return None
    if status.waiting:
        if started_at is None:
            builder.add(STEP_VOLUMES, WAITING, "volumes are still attached; recording when the wait started")
            builder.volumes = _volumes_summary(status, None, None)
            return builder.finish(RECORD_VOLUME_START)
        if status.error:
            # As Cluster API v1.14.2: its Deleting message, the error in a Warning Event, and the wait goes on.
            message = f"{VOLUME_ERROR_MESSAGE}: {status.error}"
            builder.add(STEP_VOLUMES, WAITING, message)
            builder.stages.append(Stage(STAGE_VOLUMES, message=VOLUME_ERROR_MESSAGE, error=status.error))
            builder.volumes = _volumes_summary(status, None, started_at, message)
            return builder.finish(WAIT_VOLUMES, message=message)
        message = volume_detach_message(started_at, status)
        builder.add(STEP_VOLUMES, WAITING, message)
        builder.stages.append(Stage(STAGE_VOLUMES, message=message))
        builder.volumes = _volumes_summary(status, None, started_at, message)
        return builder.finish(WAIT_VOLUMES, message=message)
    reason = "no volume is attached to the Node"
    if status.ignored_pvcs:
        reason += f" (ignored: claims of Pods the drain skipped: {', '.join(status.ignored_pvcs)})"
    builder.add(STEP_VOLUMES, DONE, reason)
    builder.stages.append(Stage(STAGE_VOLUMES_DETACHED))
    builder.volumes = _volumes_summary(status, None, started_at)
    return None


def _pre_terminate_step(facts: Facts, flavour: Flavour, builder: _Builder) -> Decision | None:
    machine = facts.machine or {}
    blocking = list(flavour.hooks(machine).get(PRE_TERMINATE) or [])
    if not blocking:
        builder.add(STEP_PRE_TERMINATE, DONE, "no preTerminate hook")
        return None
    builder.add(STEP_PRE_TERMINATE, BLOCKED, f"preTerminate hooks: {hooks_text(blocking)}")
    builder.stages.append(Stage(STAGE_PRE_TERMINATE, hooks=blocking))
    node_part = _node_part(flavour.node_name(machine))
    message = f"Machine {machine_label(machine)}{node_part} waits at the preTerminate gate for hooks: {hooks_text(blocking)}"
    return builder.finish(WAIT_PRE_TERMINATE, message=message, blocked_by=blocking)


@dataclass(frozen=True)
class _ObjectStep:
    step: str
    stage: str
    observe: str
    delete: str
    wait: str
    missing: str


_INFRASTRUCTURE = _ObjectStep(
    STEP_INFRASTRUCTURE, STAGE_INFRASTRUCTURE, OBSERVE_INFRASTRUCTURE, DELETE_INFRASTRUCTURE, WAIT_INFRASTRUCTURE, "the Machine has no infrastructureRef"
)
_BOOTSTRAP = _ObjectStep(STEP_BOOTSTRAP, STAGE_BOOTSTRAP, OBSERVE_BOOTSTRAP, DELETE_BOOTSTRAP, WAIT_BOOTSTRAP, "the Machine has no bootstrap configRef")


def _object_step(builder: _Builder, kind: _ObjectStep, ref: ObjectRef | None, state: ObjectState | None) -> Decision | None:
    """Delete a referenced object and wait until it is gone (Cluster API infrastructure and bootstrap)."""
    if ref is None:
        builder.add(kind.step, SKIPPED, kind.missing)
        return None
    if state is None:
        return builder.finish(kind.observe, target=ref)
    if not state.exists:
        builder.add(kind.step, DONE, f"{_ref_text(ref)} is gone")
        return None
    builder.stages.append(Stage(kind.stage, kind=ref.kind))
    if state.deleting:
        held = f" (finalizers: {', '.join(state.finalizers)})" if state.finalizers else ""
        builder.add(kind.step, WAITING, f"waiting for {_ref_text(ref)} to be deleted{held}")
        return builder.finish(kind.wait, target=ref, message=f"Waiting for {ref.kind} to be deleted")
    builder.add(kind.step, PENDING, f"deleting {_ref_text(ref)}")
    return builder.finish(kind.delete, target=ref)


def _instance_steps(facts: Facts, flavour: Flavour, builder: _Builder) -> Decision | None:
    """The instance: Cluster API infrastructure and bootstrap objects, or provider tasks outside the module."""
    machine = facts.machine or {}
    if not flavour.provider_terminates_instance:
        return _object_step(builder, _INFRASTRUCTURE, flavour.infrastructure_ref(machine), facts.infrastructure) or _object_step(
            builder, _BOOTSTRAP, flavour.bootstrap_ref(machine), facts.bootstrap
        )
    if facts.instance_terminated:
        builder.add(STEP_INSTANCE, DONE, "the provider tasks reported the instance terminated (instance_terminated=true)")
        return None
    builder.add(STEP_INSTANCE, WAITING, "the instance is terminated by provider tasks; run again with instance_terminated=true once they succeed")
    # Refresh the hook-derived conditions (Terminable) now that the gate is open.
    builder.stages.append(None)
    return builder.finish(AWAIT_INSTANCE)


def _node_step(facts: Facts, flavour: Flavour, builder: _Builder) -> Decision | None:
    """Delete the Node, only once the instance is gone."""
    node_name = flavour.node_name(facts.machine or {})
    if facts.skip_reason:
        builder.add(STEP_NODE, SKIPPED, _skip_text(facts))
    elif not node_name:
        builder.add(STEP_NODE, SKIPPED, "the Machine has no nodeRef")
    elif facts.node_deletion_abandoned:
        builder.add(STEP_NODE, SKIPPED, facts.node_deletion_abandoned)
    elif facts.node is None:
        builder.add(STEP_NODE, DONE, f"Node {node_name} is gone")
    elif (facts.node.get("metadata") or {}).get("deletionTimestamp"):
        builder.add(STEP_NODE, DONE, f"Node {node_name} is being deleted")
    else:
        builder.add(STEP_NODE, PENDING, f"deleting Node {node_name}")
        builder.stages.append(Stage(STAGE_DELETING_NODE, message=f"Deleting Node {node_name}"))
        return builder.finish(DELETE_NODE)
    return None


def _release_step(facts: Facts, flavour: Flavour, builder: _Builder) -> Decision:
    """Remove the flavour's finalizer; other finalizers may still hold the Machine."""
    machine = facts.machine or {}
    finalizers = list((machine.get("metadata") or {}).get("finalizers") or [])
    if flavour.finalizer in finalizers:
        builder.add(STEP_RELEASE, PENDING, f"removing finalizer {flavour.finalizer}")
        builder.stages.append(Stage(STAGE_COMPLETED))
        return builder.finish(RELEASE)
    held = f"; finalizers still hold the Machine: {', '.join(finalizers)}" if finalizers else ""
    builder.add(STEP_RELEASE, DONE, f"finalizer {flavour.finalizer} removed{held}")
    return builder.finish(WAIT_GONE, message=f"Machine {machine_label(machine)} was released but is still held by finalizers: {', '.join(finalizers)}")


_STEPS = (_drain_steps, _volume_step, _pre_terminate_step, _instance_steps, _node_step)


def decide(facts: Facts, flavour: Flavour) -> Decision:
    """The next action for a Machine, from the facts observed so far.

    Steps follow docs/behaviour.md §2 from the preDrain gate on; the first that has to act,
    wait or observe something not yet observed ends the decision.
    """
    builder = _Builder(flavour)
    machine = facts.machine
    if machine is None:
        for name in builder.names:
            builder.add(name, DONE, "the Machine is gone")
        return builder.finish(FINISHED)
    if not is_deleting(machine):
        message = (
            f"Refusing to terminate Machine {machine_label(machine)}{_node_part(flavour.node_name(machine))}: it is not marked for deletion "
            "(metadata.deletionTimestamp is not set); delete the Machine first"
        )
        return builder.finish(REFUSE, message=message)
    if facts.hands_off is not None:
        # As its controllers: a paused Machine, or one another API is authoritative for (row O5), is left alone.
        return builder.finish(REFUSE, message=facts.hands_off.message)
    for step in _STEPS:
        stop = step(facts, flavour, builder)
        if stop is not None:
            return _with_infrastructure_ready(stop, facts.infrastructure)
    return _with_infrastructure_ready(_release_step(facts, flavour, builder), facts.infrastructure)


def _with_infrastructure_ready(decision: Decision, infrastructure: ObjectState | None) -> Decision:
    """As Cluster API on every look while the InfraMachine exists: the stages written carry the
    InfraMachine, which it mirrors into ``InfrastructureReady`` (docs/behaviour.md, row 32)."""
    infra_machine = infrastructure.obj if infrastructure is not None and infrastructure.exists else None
    if infra_machine is not None:
        decision.stages = [stage if stage is None else replace(stage, infra_machine=infra_machine) for stage in decision.stages]
    return decision


def with_volume_start(machine: dict, flavour: Flavour, started: _dt.datetime) -> dict:
    """``machine`` as it looks once the volume wait's start is recorded (check mode: what a dry run
    said, should its answer not show it), so the run goes on to the next step."""
    result = copy.deepcopy(machine)
    for patch in flavour.start_time_patches(volumes=started):
        if patch is not None:
            _merge(result, patch)
    return result


def _merge(target: dict, patch: dict) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def remove_finalizer_patch(machine: dict, finalizer: str) -> dict | None:
    """A merge patch of ``metadata.finalizers`` without ``finalizer`` (every other one
    kept), guarded by the resourceVersion; None when it is not there."""
    meta = machine.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if finalizer not in finalizers:
        return None
    return {"metadata": {"resourceVersion": meta.get("resourceVersion"), "finalizers": [f for f in finalizers if f != finalizer]}}


def snapshot(machine: dict | None, flavour: Flavour, objects: dict[str, bool]) -> dict:
    """What the module may change, normalised for ``diff``: the Machine's
    finalizers, recorded volume-wait start and deletion conditions (without
    timestamps), and whether each object it deletes exists (``objects``:
    ``"<Kind> <namespace/name>"`` -> exists)."""
    result: dict[str, Any] = {}
    if machine is None:
        result["machine"] = {"exists": False}
    else:
        started = flavour.volume_detach_started_at(machine)
        result["machine"] = {
            "exists": True,
            "finalizers": list((machine.get("metadata") or {}).get("finalizers") or []),
            "volume_detach_started_at": rfc3339(started) if started else None,
            "conditions": sorted(
                (
                    {key: condition.get(key) for key in ("type", "status", "reason", "message") if condition.get(key)}
                    for condition in flavour.all_conditions(machine)
                ),
                key=lambda condition: condition.get("type") or "",
            ),
        }
    result.update({key: {"exists": exists} for key, exists in sorted(objects.items())})
    return result


def timeout_message(decision: Decision, machine: dict, flavour: Flavour, wait_timeout: int) -> str:
    """Why a run with ``wait`` failed when ``wait_timeout`` ran out at ``decision``."""
    label = machine_label(machine)
    node_name = flavour.node_name(machine)
    spent = f"Timed out after {wait_timeout}s"
    if decision.action == WAIT_PRE_TERMINATE:
        hooks = hooks_text(decision.blocked_by)
        return f"{spent} waiting at the preTerminate gate of Machine {label}{_node_part(node_name)}: blocked by preTerminate hooks: {hooks}"
    if decision.action == WAIT_VOLUMES:
        return f"{spent} waiting for the volumes of Node {node_name} to detach before terminating Machine {label}: {decision.message}"
    if decision.action in (WAIT_INFRASTRUCTURE, WAIT_BOOTSTRAP) and decision.target is not None:
        step = next((s for s in decision.steps if s.status == WAITING), None)
        detail = f" ({step.reason})" if step else ""
        return f"{spent} waiting for {_ref_text(decision.target)} of Machine {label} to be deleted{detail}"
    if decision.action == WAIT_GONE:
        return f"{spent}: {decision.message}"
    return f"{spent} waiting for Machine {label}: {decision.message}"
