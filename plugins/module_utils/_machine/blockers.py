# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What holds a Machine's deletion now (pure; docs/stalls.md): one
:class:`Blocker` per thing that holds it, with the phase it holds, its kind,
the object, since when, the evidence, and a verdict: it clears by itself,
needs someone to act, or can never clear as things stand. The drain and the
termination find their own (``_drain/stalls.py``, ``_terminate/stalls.py``);
the hooks are found here, since both gates hold a Machine the same way."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, PRE_TERMINATE, Flavour, Hook
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339

# Phases, in the order a deletion meets them.
PHASE_PRE_DRAIN = "preDrain hook"
PHASE_DRAIN = "drain"
PHASE_VOLUMES = "volumes"
PHASE_PRE_TERMINATE = "preTerminate hook"
PHASE_INFRASTRUCTURE = "infrastructure"
PHASE_NODE = "node"
PHASE_CONTROLLER = "controller"

# Kinds.
KIND_HOOK = "hook"
KIND_BUDGET = "budget refusal"
KIND_TWO_BUDGETS = "two budgets"
KIND_EVICTION_ERROR = "eviction error"
KIND_TERMINATING = "pod terminating"
KIND_TERMINATING_PAST_GRACE = "pod terminating past its grace"
KIND_FINALIZER = "finalizer"
KIND_NAMESPACE_TERMINATING = "namespace terminating"
KIND_WAIT_COMPLETED = "wait-for-completion"
KIND_UNREACHABLE_NODE = "unreachable node"
KIND_VOLUME_ATTACHMENT = "volume attachment"
KIND_INFRASTRUCTURE_FINALIZER = "infrastructure finalizer"
KIND_NODE_DELETION_ERROR = "node deletion error"
KIND_DRAIN_UNFINISHED = "drain unfinished"
KIND_CONTROLLER = "controller"
KIND_CONTROLLER_STALLED = "controller not progressing"

# Verdicts.
CLEARS = "clears by itself"
NEEDS_ACTION = "needs someone to act"
NEVER = "can never clear as things stand"


@dataclass(frozen=True)
class Blocker:
    """One thing that holds a Machine's deletion now."""

    phase: str
    kind: str
    object: str
    verdict: str
    reason: str
    since: str | None = None  # RFC 3339
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "phase": self.phase,
            "kind": self.kind,
            "object": self.object,
            "since": self.since,
            "evidence": dict(self.evidence),
            "verdict": self.verdict,
            "reason": self.reason,
        }


def stamp(moment: _dt.datetime | None) -> str | None:
    return rfc3339(moment) if moment is not None else None


def hook_blockers(flavour: Flavour, machine: dict, point: str, hooks: list[Hook]) -> list[Blocker]:
    """The hooks holding ``point``'s gate. Since when: where the flavour records the wait's start
    (Cluster API's ``status.deletion``), else unknown. Only the hook's owner can let the gate open."""
    phase = PHASE_PRE_DRAIN if point == PRE_DRAIN else PHASE_PRE_TERMINATE
    since = stamp(flavour.hook_wait_started_at(machine, point))
    blockers = []
    for hook in hooks:
        evidence = {"owner": hook.owner, "name": hook.name}
        if hook.key:
            evidence["annotation"] = hook.key
        reason = f"its owner {hook.owner or '(none given)'} removes it once its work before the {point} gate is done"
        blockers.append(Blocker(phase, KIND_HOOK, hook.key or hook.name, NEEDS_ACTION, reason, since, evidence))
    return blockers


# What each flavour's live controller writes when a hook holds a gate (Cluster API's Deleting
# reason, OpenShift's condition type), and after how long an unchanged report counts as stalled
# (the Machine controller's own Ready summary calls a deletion long after 15 minutes).
_HOOK_WAITS = {"WaitingForPreDrainHook": PRE_DRAIN, "Drainable": PRE_DRAIN, "WaitingForPreTerminateHook": PRE_TERMINATE, "Terminable": PRE_TERMINATE}
STALLED_AFTER = _dt.timedelta(minutes=15)


def controller_blockers(
    flavour: Flavour, machine: dict, progress: dict, *, manager: str | None, reported_at: _dt.datetime | None, now: _dt.datetime
) -> list[Blocker]:
    """What holds a Machine whose live controller carries out its deletion, from what
    the controller reports (``progress``, ``_machine.controller.controller_progress``):
    the hooks holding the gate it waits at, else the controller itself - not
    progressing once its report (written at ``reported_at``) has not changed for 15 minutes."""
    point = _HOOK_WAITS.get(progress.get("reason") or "") or _HOOK_WAITS.get((progress.get("message") or "").split(" ", 1)[0])
    hooks = flavour.hooks(machine).get(point) or [] if point else []
    if hooks:
        return hook_blockers(flavour, machine, point, hooks)
    who = f"controller {manager}" if manager else "the Machine's controller"
    evidence = {"reason": progress.get("reason"), "details": list(progress.get("details") or [])}
    since = stamp(reported_at)
    if reported_at is not None and now - reported_at > STALLED_AFTER:
        minutes = int((now - reported_at).total_seconds() // 60)
        reason = f"its report has not changed for {minutes} min: {progress.get('message')}; look at the controller and what it reports"
        return [Blocker(PHASE_CONTROLLER, KIND_CONTROLLER_STALLED, who, NEEDS_ACTION, reason, since, evidence)]
    return [Blocker(PHASE_CONTROLLER, KIND_CONTROLLER, who, CLEARS, f"it carries out the deletion: {progress.get('message')}", since, evidence)]


def reported_at(conditions: list[dict], types: tuple[str, ...]) -> _dt.datetime | None:
    """When the newest of the controller's conditions of ``types`` last changed."""
    times = [parse_time(c.get("lastTransitionTime")) for c in conditions if c.get("type") in types]
    times = [t for t in times if t is not None]
    return max(times) if times else None


def as_dicts(blockers: list[Blocker]) -> list[dict]:
    return [blocker.as_dict() for blocker in blockers]


def worst(blockers: list[dict]) -> str | None:
    """The gravest verdict among ``blockers`` (dicts), None when there are none."""
    verdicts = {blocker.get("verdict") for blocker in blockers}
    return next((verdict for verdict in (NEVER, NEEDS_ACTION, CLEARS) if verdict in verdicts), None)


# At most this many blockers per Machine in a progress report: the gravest first.
MAX_BLOCKER_LINES = 3
_GRAVITY = {NEVER: 0, NEEDS_ACTION: 1}


def blocker_lines(blockers: list[dict]) -> list[str]:
    """The blockers (dicts) that need someone, or can never clear, as progress lines (docs/stalls.md)."""
    grave = sorted((b for b in blockers if b.get("verdict") in _GRAVITY), key=lambda b: _GRAVITY[b["verdict"]])
    lines = []
    for blocker in grave[:MAX_BLOCKER_LINES]:
        since = f" since {blocker['since']}" if blocker.get("since") else ""
        lines.append(f"! {blocker['verdict']}: {blocker['kind']} {blocker['object']}{since}: {blocker['reason']}")
    if len(grave) > MAX_BLOCKER_LINES:
        lines.append(f"! and {len(grave) - MAX_BLOCKER_LINES} more (see the result's blockers)")
    return lines
