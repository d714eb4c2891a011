# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Pure drain logic: which Pods to evict, skip or wait for, in which order, and
how to report progress, following Cluster API's Machine controller.

Nothing here talks to Kubernetes. Callers pass plain dicts (Pods, Namespaces,
the Machine and its Cluster, MachineDrainRules) as the API returns them and
get plain values back. The behaviour is Cluster API's Machine controller's,
as docs/behaviour.md §3 describes it (including where the collection differs).
The rules themselves are :mod:`rules`, their label selectors :mod:`selectors`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import claim_names, controller_of, is_running, meta, phase, pod_key, volumes
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN, SKIP, WAIT_COMPLETED, DrainError, rule_for_pod, rules_for_machine
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.selectors import labels_of
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339

DRAIN_LABEL = "cluster.x-k8s.io/drain"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# When the Node is unreachable its kubelet never confirms deletions: Pods whose
# deletionTimestamp is more than this many whole seconds old are ignored, and
# evictions use this grace period instead of the Pod's own.
UNREACHABLE_SKIP_DELETED_SECONDS = 1
UNREACHABLE_GRACE_PERIOD_SECONDS = 1

WARNING_ORPHANED_DAEMONSET = "evicting orphaned DaemonSet-managed Pod"
WARNING_LOCAL_STORAGE = "evicting Pod with local storage"
WARNING_NO_CONTROLLER = "evicting Pod that has no controller"

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
_PDB_MESSAGE_LOWER = "c" + PDB_MESSAGE[1:]

_MAX_NAMES_PER_LINE = 3
_MAX_FAILURE_LINES = 5


# ---------------------------------------------------------------------------
# Classification


def daemonset_refs(pods: Iterable[dict]) -> set[tuple[str, str]]:
    """``(namespace, name)`` of the DaemonSets whose existence :func:`classify_pods` needs to know.

    Only running (not Succeeded/Failed) Pods controlled by a DaemonSet are asked about.
    """
    refs = set()
    for pod in pods:
        controller = controller_of(pod)
        if controller and controller.get("kind") == "DaemonSet" and is_running(pod):
            refs.add((meta(pod).get("namespace", ""), controller.get("name", "")))
    return refs


@dataclass
class PodDecision:
    """What the drain does with one Pod, and why."""

    namespace: str
    name: str
    behavior: str
    order: int = 0  # meaningful for Drain; WaitCompleted is always 0; 0 for Skip
    reason: str = "default"
    warnings: list[str] = field(default_factory=list)
    terminating: bool = False  # has a deletionTimestamp, or this task evicted it (passes.EvictionMemory)
    phase: str = ""
    claims: list[str] = field(default_factory=list)  # PersistentVolumeClaim names (Pod's namespace)
    rule: str | None = None  # the MachineDrainRule that decided behavior and order; None when no rule did

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def as_dict(self) -> dict:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "behavior": self.behavior,
            "order": self.order,
            "reason": self.reason,
            "warnings": list(self.warnings),
            "terminating": self.terminating,
            "phase": self.phase,
            "persistent_volume_claims": list(self.claims),
        }


def _drain_label_behavior(value: Any) -> str | None:
    text = str(value)
    if text.casefold() == SKIP.casefold():
        return SKIP
    # Cluster API drops only the first dash: wait-completed, WaitCompleted, waitcompleted.
    if text.replace("-", "", 1).casefold() == WAIT_COMPLETED.casefold():
        return WAIT_COMPLETED
    return None


@dataclass(frozen=True)
class _Candidate:
    """One Pod as the filters see it, with what the drain knows around it."""

    pod: dict
    controller: dict | None  # like metav1.GetControllerOf
    running: bool  # not Succeeded or Failed: Pending and unknown phases count as running, as upstream
    deleted_at: _dt.datetime | None
    namespace: dict | None  # the Pod's Namespace; None when it does not exist
    rules: list[dict]  # the rules that apply to the Machine, by name
    existing_daemonsets: set[tuple[str, str]]
    skip_deleted_seconds: int
    now: _dt.datetime


@dataclass(frozen=True)
class _Verdict:
    """What one filter says: a decision (``reason`` set: the sequence stops),
    or Drain with a warning (the next filter has its say)."""

    behavior: str = DRAIN
    reason: str = ""
    order: int = 0
    warning: str = ""
    rule: str | None = None  # the MachineDrainRule that decided


_MISSING_NAMESPACE = _Verdict(behavior="", reason="Pod Namespace does not exist")


def _skip_deleted(pod: _Candidate) -> _Verdict | None:
    """1. On an unreachable Node deleted Pods never go away: ignore them once old
    enough (whole seconds, as upstream truncates; API timestamps have second resolution)."""
    seconds = pod.skip_deleted_seconds
    if seconds > 0 and pod.deleted_at is not None and int((pod.now - pod.deleted_at).total_seconds()) > seconds:
        return _Verdict(SKIP, f"deletionTimestamp more than {seconds}s ago on an unreachable Node")
    return None


def _daemonset(pod: _Candidate) -> _Verdict | None:
    """2. A running DaemonSet Pod would be recreated at once (it tolerates the
    unschedulable taint); one whose DaemonSet is gone is evicted with a warning."""
    if pod.controller is None or pod.controller.get("kind") != "DaemonSet" or not pod.running:
        return None
    if (meta(pod.pod).get("namespace", ""), pod.controller.get("name", "")) in pod.existing_daemonsets:
        return _Verdict(SKIP, "DaemonSet-managed Pod")
    return _Verdict(warning=WARNING_ORPHANED_DAEMONSET)


def _mirror(pod: _Candidate) -> _Verdict | None:
    """3. Static Pods: the kubelet recreates the mirror Pod, eviction is pointless."""
    return _Verdict(SKIP, "static Pod") if MIRROR_ANNOTATION in (meta(pod.pod).get("annotations") or {}) else None


def _local_storage(pod: _Candidate) -> _Verdict | None:
    """4. A warning only, and only for a running Pod: a finished one loses nothing."""
    if pod.running and any(volume.get("emptyDir") is not None for volume in volumes(pod.pod)):
        return _Verdict(warning=WARNING_LOCAL_STORAGE)
    return None


def _unreplicated(pod: _Candidate) -> _Verdict | None:
    """5. A warning only, for a running Pod that no controller recreates."""
    return _Verdict(warning=WARNING_NO_CONTROLLER) if pod.running and pod.controller is None else None


def _drain_label(pod: _Candidate) -> _Verdict | None:
    """6. The Pod's own label wins over MachineDrainRules; unknown values are ignored."""
    labels = labels_of(pod.pod)
    behavior = _drain_label_behavior(labels[DRAIN_LABEL]) if DRAIN_LABEL in labels else None
    return _Verdict(behavior, f"label {DRAIN_LABEL}={labels[DRAIN_LABEL]}") if behavior else None


def _drain_rules(pod: _Candidate) -> _Verdict | None:
    """7. The first MachineDrainRule by name that selects the Pod; upstream needs
    the Pod's Namespace even without rules."""
    if pod.namespace is None:
        return _MISSING_NAMESPACE
    rule = rule_for_pod(pod.rules, labels_of(pod.pod), labels_of(pod.namespace))
    if rule is None:
        return None
    behavior = rule["drain"]["behavior"]
    order = (rule["drain"]["order"] or 0) if behavior == DRAIN else 0
    return _Verdict(behavior, f"MachineDrainRule {rule['name']}", order, rule=rule["name"])


# The filters in the order Cluster API's drain applies them (docs/behaviour.md §3).
# The first decision wins; a Pod no filter decides is drained with order 0 (8.).
# Warnings of the earlier filters count only for a Pod that is drained.
POD_FILTERS: tuple[Callable[[_Candidate], _Verdict | None], ...] = (
    _skip_deleted,
    _daemonset,
    _mirror,
    _local_storage,
    _unreplicated,
    _drain_label,
    _drain_rules,
)


def _classify_pod(pod: dict, namespaces: dict[str, dict], **around: Any) -> PodDecision | None:
    """The decision for one Pod, or None when its Namespace is unknown (an error upstream)."""
    pod_meta = meta(pod)
    deleted_at = parse_time(pod_meta.get("deletionTimestamp"))
    namespace = namespaces.get(pod_meta.get("namespace", ""))
    candidate = _Candidate(pod, controller_of(pod), is_running(pod), deleted_at, namespace, **around)
    decision = PodDecision(
        namespace=pod_meta.get("namespace", ""),
        name=pod_meta.get("name", ""),
        behavior=DRAIN,
        terminating=deleted_at is not None,
        phase=phase(pod),
        claims=claim_names(pod),
    )
    warnings = []
    for pod_filter in POD_FILTERS:
        verdict = pod_filter(candidate)
        if verdict is _MISSING_NAMESPACE:
            return None
        if verdict is None:
            continue
        if verdict.warning:
            warnings.append(verdict.warning)
        if verdict.reason:
            decision.behavior, decision.order, decision.reason, decision.rule = verdict.behavior, verdict.order, verdict.reason, verdict.rule
            break
    decision.warnings = warnings if decision.behavior == DRAIN else []
    return decision


def classify_pods(
    pods: list[dict],
    *,
    machine: dict | None,
    cluster: dict | None,
    namespaces: dict[str, dict],
    existing_daemonsets: set[tuple[str, str]],
    rules: list[dict],
    node_unreachable: bool,
    now: _dt.datetime,
) -> list[PodDecision]:
    """Decide Drain / Skip / WaitCompleted and the order for every Pod on the Node (docs/behaviour.md §3).

    ``namespaces`` maps Namespace name to the Namespace object (its labels feed
    namespaceSelector). ``existing_daemonsets`` holds ``(namespace, name)`` of
    the DaemonSets that exist (see :func:`daemonset_refs`). ``rules`` are
    MachineDrainRules, served or inline, already restricted to the Machine's
    namespace (see :func:`rules.normalize_rules`). ``machine``/``cluster`` may be None
    for a bare Node: their labels then count as empty.

    Returns decisions sorted by ``namespace/name``. Raises DrainRuleError for an
    invalid rule and DrainError naming every Pod whose Namespace is missing.
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=_dt.UTC)
    applicable = rules_for_machine(rules, machine, cluster)
    skip_deleted_seconds = UNREACHABLE_SKIP_DELETED_SECONDS if node_unreachable else 0
    decisions, missing_namespace = [], []
    for pod in pods:
        decision = _classify_pod(
            pod,
            rules=applicable,
            namespaces=namespaces,
            existing_daemonsets=existing_daemonsets,
            skip_deleted_seconds=skip_deleted_seconds,
            now=now,
        )
        if decision is None:
            missing_namespace.append(pod_key(pod))
        else:
            decisions.append(decision)
    if missing_namespace:
        raise DrainError(f'Failed to get Pods for eviction: Pods with error "Pod Namespace does not exist": {", ".join(sorted(missing_namespace))}')
    decisions.sort(key=lambda decision: decision.key)
    return decisions


# ---------------------------------------------------------------------------
# Batches


@dataclass
class DrainPlan:
    """The Pods of one drain pass, bucketed like Cluster API's EvictPods."""

    current_order: int | None
    evict_now: list[PodDecision]  # Drain, current order, no deletionTimestamp: evict in this pass
    terminating: list[PodDecision]  # Drain with a deletionTimestamp (any order): never evicted again
    wait_completed_now: list[PodDecision]  # WaitCompleted of the current order (with or without deletionTimestamp)
    evict_later: list[PodDecision]
    wait_completed_later: list[PodDecision]
    skipped: list[PodDecision]
    batches: list[dict]
    completed: bool  # no Drain and no WaitCompleted Pod remains

    def as_dict(self) -> dict:
        def keys(decisions: list[PodDecision]) -> list[str]:
            return [decision.key for decision in decisions]

        return {
            "current_order": self.current_order,
            "evict_now": keys(self.evict_now),
            "terminating": keys(self.terminating),
            "wait_completed_now": keys(self.wait_completed_now),
            "evict_later": keys(self.evict_later),
            "wait_completed_later": keys(self.wait_completed_later),
            "skipped": keys(self.skipped),
            "batches": [dict(batch) for batch in self.batches],
            "completed": self.completed,
        }


def plan_drain(decisions: list[PodDecision]) -> DrainPlan:
    """Bucket decisions by order (docs/behaviour.md §3.2); lower orders drain first.

    The current order is the lowest among all Drain Pods (terminating ones
    included, so they hold back higher orders until gone) and all WaitCompleted
    Pods (always 0). As upstream, a WaitCompleted Pod stays in its wait bucket
    even once it has a deletionTimestamp, and a terminating Drain Pod of any
    order is listed as terminating.

    ``batches`` lists every remaining Pod grouped by order, lowest first:
    ``{"order", "pods", "wait_completed", "terminating"}`` where ``pods`` holds
    all of the batch, ``wait_completed`` those waited for rather than evicted
    and ``terminating`` those that already have a deletionTimestamp.
    """
    ordered = sorted(decisions, key=lambda decision: decision.key)
    active = [decision for decision in ordered if decision.behavior in (DRAIN, WAIT_COMPLETED)]
    current = min((_effective_order(decision) for decision in active), default=None)
    plan = DrainPlan(
        current_order=current,
        evict_now=[],
        terminating=[],
        wait_completed_now=[],
        evict_later=[],
        wait_completed_later=[],
        skipped=[],
        batches=[],
        completed=not active,
    )
    for decision in ordered:
        is_current = _effective_order(decision) == current
        if decision.behavior == DRAIN and not decision.terminating:
            (plan.evict_now if is_current else plan.evict_later).append(decision)
        elif decision.behavior == WAIT_COMPLETED:
            (plan.wait_completed_now if is_current else plan.wait_completed_later).append(decision)
        elif decision.behavior == DRAIN:
            plan.terminating.append(decision)
        else:
            plan.skipped.append(decision)
    for order in sorted({_effective_order(decision) for decision in active}):
        members = [decision for decision in active if _effective_order(decision) == order]
        plan.batches.append(
            {
                "order": order,
                "pods": [decision.key for decision in members],
                "wait_completed": [decision.key for decision in members if decision.behavior == WAIT_COMPLETED],
                "terminating": [decision.key for decision in members if decision.terminating],
            }
        )
    return plan


def _effective_order(decision: PodDecision) -> int:
    return 0 if decision.behavior == WAIT_COMPLETED else decision.order


# ---------------------------------------------------------------------------
# The progress message


def _names(keys: list[str], limit: int = _MAX_NAMES_PER_LINE) -> str:
    shown = keys[:limit]
    if len(keys) > limit:
        shown = [*shown, f"... ({len(keys) - limit} more)"]
    return ", ".join(shown)


def _kind(count: int) -> str:
    return "Pod" if count == 1 else "Pods"


def progress_message(started_at: _dt.datetime, plan: DrainPlan, failures: dict[str, list[str]] | None = None, gone: Iterable[str] = ()) -> str:
    """Cluster API's "Drain not completed yet" message (docs/behaviour.md §3.4) after one pass.

    ``failures`` maps a failure message (from :func:`eviction_failure_message`)
    to the ``ns/name`` of the Pods that failed with it; ``gone`` lists Pods of
    ``plan.evict_now`` whose eviction returned 404. Every other Pod of
    ``plan.evict_now`` counts as evicted (deletionTimestamp set). Returns ""
    when nothing remains to wait for, as upstream (so a plan that is completed,
    or whose last Pods were all gone, gives "").
    """
    failures = {message: sorted(keys) for message, keys in (failures or {}).items() if keys}
    failed = {key for keys in failures.values() for key in keys}
    gone = set(gone)
    # Upstream lists already-terminating Pods first, then the ones it just evicted, each sorted.
    evicted = [decision.key for decision in plan.evict_now if decision.key not in failed and decision.key not in gone]
    deletion_set = [decision.key for decision in plan.terminating] + evicted
    wait_now = [decision.key for decision in plan.wait_completed_now]
    evict_later = [decision.key for decision in plan.evict_later]
    wait_later = [decision.key for decision in plan.wait_completed_later]
    if not (deletion_set or failures or wait_now or evict_later or wait_later):
        return ""

    lines = [f"Drain not completed yet (started at {rfc3339(started_at)}):"]
    if deletion_set:
        lines.append(f"* {_kind(len(deletion_set))} {_names(deletion_set)}: deletionTimestamp set, but still not removed from the Node")
    messages = sorted(failures)  # sorted on the raw message, before the rewrite below
    for message in messages[:_MAX_FAILURE_LINES]:
        keys = failures[message]
        text = message.replace(PDB_MESSAGE, _PDB_MESSAGE_LOWER)
        if not text.startswith(_PDB_MESSAGE_LOWER):
            text = "failed to evict Pod, " + text
        lines.append(f"* {_kind(len(keys))} {_names(keys)}: {text}")
    other = sum(len(failures[message]) for message in messages[_MAX_FAILURE_LINES:])
    if other:
        lines.append(f"* {other} {_kind(other)} with other issues")
    if wait_now:
        lines.append(f"* {_kind(len(wait_now))} {_names(wait_now)}: waiting for completion")
    if evict_later:
        lines.append(f"After above Pods have been removed from the Node, the following Pods will be evicted: {_names(evict_later)}")
    if wait_later:
        lines.append(f"After above Pods have been removed from the Node, waiting for the following Pods to complete without eviction: {_names(wait_later)}")
    return "\n".join(lines)
