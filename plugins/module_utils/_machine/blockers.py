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
import re
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
# Before anything: the Machine is left alone as its controllers leave it (paused, another API authoritative).
PHASE_PAUSED = "paused"

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
KIND_INSTANCE = "instance"
KIND_NODE_DELETION_ERROR = "node deletion error"
KIND_DRAIN_UNFINISHED = "drain unfinished"
KIND_CONTROLLER = "controller"
KIND_CONTROLLER_STALLED = "controller not progressing"
KIND_CONTROLLER_WILL_NOT_ACT = "controller will not act"
KIND_PAUSED = "paused"
KIND_MIGRATING = "migration in progress"
KIND_AUTHORITY_ELSEWHERE = "authority elsewhere"

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
# reason, OpenShift's condition type), and after how long a controller that stands at the same
# stage counts as not progressing (the Machine controller's own Ready summary calls a deletion
# long after 15 minutes).
_HOOK_WAITS = {"WaitingForPreDrainHook": PRE_DRAIN, "Drainable": PRE_DRAIN, "WaitingForPreTerminateHook": PRE_TERMINATE, "Terminable": PRE_TERMINATE}
STALLED_AFTER = _dt.timedelta(minutes=15)

# The reason of a budget refusal a live controller reports, until its budget is read and judged.
REPORTED_BUDGET_REASON = "a budget refuses its eviction for now and the controller asks again"
# What a live controller's drain report (Cluster API's Deleting message: ``* Pod[s] <ns/name, ...>: <why>``)
# says holds its Pods, matched on the words the Machine controller's own summary looks for; the first match wins.
# A budget refusal is "clears by itself" here: machine_delete then reads the refusing budgets on the workload side
# and judges them as its own drain does (``_delete/followed.py``); a Pod two budgets select is "never" from the
# eviction API's own answer.
_REPORTED_POD_HOLDS = (
    (
        "more than one PodDisruptionBudget",
        KIND_TWO_BUDGETS,
        NEVER,
        "the eviction API refuses a Pod more than one budget selects, whatever they allow: change the budgets so one selects it",
    ),
    (
        "cannot evict pod as it would violate the pod's disruption budget",
        KIND_BUDGET,
        CLEARS,
        REPORTED_BUDGET_REASON,
    ),
    ("because it is being terminated", KIND_NAMESPACE_TERMINATING, CLEARS, "its namespace is being deleted; the namespace controller deletes the Pod"),
    ("deletionTimestamp set, but still not removed from the Node", KIND_TERMINATING, CLEARS, "it is being deleted; its kubelet removes it"),
    ("waiting for completion", KIND_WAIT_COMPLETED, CLEARS, "the drain waits for it to complete, without evicting it"),
    ("failed to evict Pod", KIND_EVICTION_ERROR, NEEDS_ACTION, "the API server refuses its eviction"),
)
_REPORTED_PODS = re.compile(r"^\* Pods? (?P<pods>[^:]+): (?P<why>.+)$")


def reported_pod_blockers(details: list[str], who: str) -> list[Blocker]:
    """What a live controller's drain report (its detail lines) says holds each Pod it names."""
    blockers = []
    for line in details:
        match = _REPORTED_PODS.match(line.strip())
        if not match:
            continue
        why = match.group("why")
        found = next((entry for entry in _REPORTED_POD_HOLDS if entry[0] in why), None)
        if found is None:
            continue
        _words, kind, verdict, reason = found
        if kind == KIND_EVICTION_ERROR:
            reason = f"{reason}: {why}"
        for pod in match.group("pods").split(", "):
            if pod.startswith("..."):
                continue  # "... (N more)": the controller names three Pods at most
            blockers.append(Blocker(PHASE_DRAIN, kind, f"Pod {pod}", verdict, reason, evidence={"reported_by": who, "report": why}))
    return blockers


# OpenShift's machine controller drains with kubectl's drain library, 20 s per try, and names what failed, one
# error per Pod (``<error>`` or ``[<error>, ...]``), in a Normal Event DrainRequeued (``Node drain requeued: ...``)
# and in its Drained condition (False, DrainError, ``could not drain machine: ...``) - which it never writes, as it
# returns before its status patch; why an eviction was refused (a budget's 429) goes only to its log. The collection
# splits the newest DrainRequeued Event's message (or the condition's, should a controller write it; docs/stalls.md).
_OPENSHIFT_ERROR_END = r"(?=, error when |\]?$)"  # the next Pod's error, or the end of the list
_OPENSHIFT_EVICTION = re.compile(r'error when evicting pods/"(?P<name>[^"]+)" -n "(?P<namespace>[^"]+)": (?P<why>.+?)' + _OPENSHIFT_ERROR_END)
_OPENSHIFT_TERMINATING = re.compile(
    r'error when waiting for pod "(?P<name>[^"]+)" in namespace "(?P<namespace>[^"]+)" to terminate: (?P<why>.+?)' + _OPENSHIFT_ERROR_END
)
OPENSHIFT_TIMEOUT_WORDS = "global timeout reached"
OPENSHIFT_REFUSED_REASON = (
    "its eviction was refused for the whole of the controller's try (a budget's refusal, most often; the controller logs why) and the controller tries again"
)


def openshift_pod_blockers(message: str, who: str) -> list[Blocker]:
    """What OpenShift's machine controller's drain error (its Drained condition's message, ``could not drain
    machine: ...``, or its DrainRequeued Event's) says holds each Pod it names: an eviction never accepted within its try (refused by a budget, as a rule:
    a budget refusal, judged like Cluster API's once its budget is read), another eviction error (two budgets,
    from the eviction API's own words, or an error someone must look at), a Pod evicted but not gone yet."""
    blockers = []
    for match in _OPENSHIFT_EVICTION.finditer(message or ""):
        pod, why = f"Pod {match.group('namespace')}/{match.group('name')}", match.group("why")
        evidence = {"reported_by": who, "report": match.group(0)}
        if OPENSHIFT_TIMEOUT_WORDS in why:
            blockers.append(Blocker(PHASE_DRAIN, KIND_BUDGET, pod, CLEARS, OPENSHIFT_REFUSED_REASON, evidence=evidence))
        elif _REPORTED_POD_HOLDS[0][0] in why:
            blockers.append(Blocker(PHASE_DRAIN, KIND_TWO_BUDGETS, pod, NEVER, _REPORTED_POD_HOLDS[0][3], evidence=evidence))
        else:
            blockers.append(Blocker(PHASE_DRAIN, KIND_EVICTION_ERROR, pod, NEEDS_ACTION, f"the API server refuses its eviction: {why}", evidence=evidence))
    for match in _OPENSHIFT_TERMINATING.finditer(message or ""):
        pod = f"Pod {match.group('namespace')}/{match.group('name')}"
        reason = "it was evicted and is being deleted; its kubelet removes it"
        blockers.append(Blocker(PHASE_DRAIN, KIND_TERMINATING, pod, CLEARS, reason, evidence={"reported_by": who, "report": match.group(0)}))
    return blockers


def budget_refused_pods(blockers: list[Blocker]) -> list[str]:
    """The Pods (``namespace/name``) a live controller's report names as refused by a budget, in order, once each."""
    keys = [blocker.object.removeprefix("Pod ") for blocker in blockers if blocker.kind == KIND_BUDGET and "reported_by" in blocker.evidence]
    return list(dict.fromkeys(keys))


def stage_started_at(flavour: Flavour, machine: dict) -> _dt.datetime | None:
    """When the Machine's deletion entered the stage it stands at, where the flavour records it (Cluster API's
    ``status.deletion``: the hook waits, the drain, the volume wait); None when nothing records it."""
    times = [
        flavour.hook_wait_started_at(machine, PRE_DRAIN),
        flavour.drain_started_at(machine),
        flavour.volume_detach_started_at(machine),
        flavour.hook_wait_started_at(machine, PRE_TERMINATE),
    ]
    times = [moment for moment in times if moment is not None]
    return max(times) if times else None


def controller_blockers(
    flavour: Flavour,
    machine: dict,
    progress: dict,
    *,
    manager: str | None,
    reported_at: _dt.datetime | None,
    now: _dt.datetime,
    drain_report: str | None = None,
) -> list[Blocker]:
    """What holds a Machine whose live controller carries out its deletion, from what
    the controller reports (``progress``, ``_machine.controller.controller_progress``):
    the hooks holding the gate it waits at; else the controller itself, with the Pods its
    drain report names. Since when: the later of ``reported_at`` (when its conditions last
    changed) and the start of the stage the Machine records; a controller that has stood
    there for 15 minutes is not progressing (Cluster API keeps its Deleting condition True,
    with the same transition time, from the deletion's start to its end: the stage's
    recorded start is what moves). ``drain_report``: OpenShift's newest DrainRequeued Event's message, which
    names the Pods its drain could not evict (its Drained condition, which would say the same, is never written)."""
    point = _HOOK_WAITS.get(progress.get("reason") or "") or _HOOK_WAITS.get((progress.get("message") or "").split(" ", 1)[0])
    hooks = flavour.hooks(machine).get(point) or [] if point else []
    if hooks:
        return hook_blockers(flavour, machine, point, hooks)
    who = f"controller {manager}" if manager else "the Machine's controller"
    details = list(progress.get("details") or [])
    evidence = {"reason": progress.get("reason"), "details": details}
    stage = stage_started_at(flavour, machine)
    changed = max((moment for moment in (reported_at, stage) if moment is not None), default=None)
    since = stamp(changed)
    pods = reported_pod_blockers(details, who)
    if flavour.drain_report_event:  # OpenShift names them in its Drained condition's message, or that Event
        drained = next((c for c in flavour.all_conditions(machine) if c.get("type") == "Drained" and c.get("status") == "False"), {})
        pods = openshift_pod_blockers(str(drained.get("message") or drain_report or ""), who)
    if changed is not None and now - changed > STALLED_AFTER:
        minutes = int((now - changed).total_seconds() // 60)
        reason = f"it has stood at the same stage for {minutes} min: {progress.get('message')}; look at the controller and what it reports"
        return [Blocker(PHASE_CONTROLLER, KIND_CONTROLLER_STALLED, who, NEEDS_ACTION, reason, since, evidence), *pods]
    return [Blocker(PHASE_CONTROLLER, KIND_CONTROLLER, who, CLEARS, f"it carries out the deletion: {progress.get('message')}", since, evidence), *pods]


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
