# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Escalations the user asks for (the ``escalations`` option, docs/stalls.md) (pure).

The machine controllers never override a PodDisruptionBudget: a Pod whose
eviction a budget refuses is asked again until the budget allows it, however
long that takes. A user who has decided otherwise for some Pods says so,
explicitly and on the record: after a deadline counted from the drain's start,
a Pod of the drain's current batch that is still on the Node (its eviction
refused, or not allowed yet) and matches the escalation's namespaces and Pod
selector (and, with ``drain_rules``, whose drain behaviour came from one of
those MachineDrainRules) is deleted with its own grace period instead of
evicted - the budget is not asked. Each such deletion is recorded as a Warning Event
``DrainEscalated`` on the Machine, naming the reason the user gave, and in the
result. Pods the drain skips (DaemonSet, static, skip label or rule) are never
touched; nothing is escalated before the deadline, in check mode nothing is
deleted (the result says what would be). Escalations naming MachineDrainRules are checked
against the task's rules before anything is touched (:func:`check_rule_names`), once per task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.selectors import labels_of, match_label_selector, selector_requirements
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import namespace_error
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import go_duration_seconds

DELETE_POD = "delete_pod"
ACTIONS = (DELETE_POD,)
KEYS = ("after", "action", "reason", "namespaces", "pod_selector", "drain_rules")
EVENT_REASON = "DrainEscalated"


@dataclass(frozen=True)
class Escalation:
    """One escalation the user asked for."""

    after: float  # seconds from the drain's start
    reason: str  # who asked and why, as the user wrote it
    action: str = DELETE_POD
    namespaces: tuple[str, ...] = ()  # none: every namespace
    pod_selector: dict | None = None  # none: every Pod
    drain_rules: tuple[str, ...] = ()  # none: whatever decided the Pod's drain

    def applies(self, pod: dict, elapsed: float, rule: str | None = None) -> bool:
        """Whether ``pod`` is escalated ``elapsed`` seconds after the drain started; ``rule``: the
        MachineDrainRule the drain's classification says decided it (None: no rule did)."""
        if elapsed < self.after:
            return False
        if self.namespaces and pod["metadata"].get("namespace") not in self.namespaces:
            return False
        if self.pod_selector is not None and not match_label_selector(self.pod_selector, labels_of(pod)):
            return False
        return not self.drain_rules or rule in self.drain_rules

    def as_dict(self) -> dict:
        return {
            "action": self.action,
            "after_seconds": self.after,
            "reason": self.reason,
            "namespaces": list(self.namespaces),
            "pod_selector": self.pod_selector,
            "drain_rules": list(self.drain_rules),
        }


def normalize_escalations(entries: Sequence[dict] | None) -> tuple[Escalation, ...]:
    """The ``escalations`` option as Escalations; MachineError naming every bad entry (before anything is touched)."""
    errors: list[str] = []
    found: list[Escalation] = []
    for index, entry in enumerate(entries or []):
        where = f"escalations[{index}]"
        if not isinstance(entry, dict):
            errors.append(f"{where} must be a mapping, not {type(entry).__name__}")
            continue
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            errors.append(f"{where} has unknown keys {unknown} (known: {list(KEYS)})")
        after = _after(entry.get("after"))
        if after is None:
            errors.append(f"{where}.after must be a duration (seconds, or a Go duration such as 30m), not {entry.get('after')!r}")
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            errors.append(f"{where}.reason must say who asked for it and why: it is recorded on the Machine")
        action = entry.get("action") or DELETE_POD
        if action not in ACTIONS:
            errors.append(f"{where}.action must be one of {list(ACTIONS)}, not {action!r}")
        namespaces, rules = _chosen(entry, where, errors)
        selector = entry.get("pod_selector")
        if selector is not None:
            try:
                selector_requirements(selector)
            except (MachineError, ValueError, TypeError) as exc:
                errors.append(f"{where}.pod_selector: {getattr(exc, 'msg', None) or exc}")
        if not errors and after is not None:
            found.append(
                Escalation(
                    after=after,
                    reason=reason.strip(),
                    action=action,
                    namespaces=tuple(namespaces),
                    pod_selector=selector,
                    drain_rules=tuple(dict.fromkeys(name.strip() for name in rules)),
                )
            )
    if errors:
        raise MachineError("Invalid escalations: " + "; ".join(errors) + "; nothing was changed")
    return tuple(found)


def _chosen(entry: dict, where: str, errors: list[str]) -> tuple[list[str], list[str]]:
    """An entry's ``namespaces`` and ``drain_rules`` (what is wrong with them added to ``errors``)."""
    namespaces = entry.get("namespaces") or []
    if not isinstance(namespaces, list):
        errors.append(f"{where}.namespaces must be a list of namespace names")
        namespaces = []
    errors.extend(error for error in (namespace_error(f"{where}.namespaces", name) for name in namespaces) if error)
    rules = entry.get("drain_rules") or []
    if not isinstance(rules, list):
        errors.append(f"{where}.drain_rules must be a list of MachineDrainRule names")
        rules = []
    if any(not isinstance(name, str) or not name.strip() for name in rules):
        errors.append(f"{where}.drain_rules must name MachineDrainRules (non-empty names), not {rules!r}")
        rules = []
    return namespaces, rules


def _after(value: object) -> float | None:
    """Seconds of ``after`` (whole seconds, or a Go duration; 0: at once); None when it is no duration."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    try:
        seconds = go_duration_seconds(str(value))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def escalation_for(pod: dict, escalations: Sequence[Escalation], elapsed: float, rule: str | None = None) -> Escalation | None:
    """The first escalation that applies to ``pod`` now (in the order the user gave them), or None;
    ``rule``: the MachineDrainRule that decided the Pod's drain."""
    return next((escalation for escalation in escalations if escalation.applies(pod, elapsed, rule)), None)


def event_message(pod_key: str, escalation: Escalation) -> str:
    """The DrainEscalated Event's message: what was done, after how long, and who asked for it."""
    return f"Deleted Pod {pod_key} instead of evicting it, {escalation.after:g} s after the drain started, as asked: {escalation.reason}"


def rule_names_wanted(escalations: Sequence[Escalation]) -> set[str]:
    """Every MachineDrainRule name the escalations' ``drain_rules`` give."""
    return {name for escalation in escalations for name in escalation.drain_rules}


def unknown_rule_names(escalations: Sequence[Escalation], known: Sequence[str]) -> list[str]:
    """The ``drain_rules`` names that are none of the task's rules (``known``: the names of its inline
    rules and of the cluster's MachineDrainRules it reads), sorted: such an entry could never match."""
    return sorted(rule_names_wanted(escalations) - set(known))


def unknown_rules_message(unknown: Sequence[str], known: Sequence[str], where: str) -> str:
    """Why escalations naming ``unknown`` rules are refused (``where``: whose rules were looked at)."""
    have = ", ".join(sorted(known)) or "none"
    return (
        f"Invalid escalations: drain_rules names {', '.join(unknown)}, which no MachineDrainRule of the task is ({where}; "
        f"the task's rules: {have}): such an escalation could never apply; nothing was changed"
    )


# What plain Pod deletion needs: (verb, API group, resource).
DELETE_PODS = ("delete", "", "pods")
# The role that grants it, not bound by the collection's own RBAC (extensions/awx/rbac.yml).
POD_DELETE_ROLE = "lifecycle-machine-pod-delete"


def permissions_needed(escalations: Sequence[Escalation], *, disable_eviction: bool = False) -> list[tuple[tuple[str, str, str], str | None, str]]:
    """What the options ask of the identity beyond evicting, each once: ((verb, group, resource), namespace (None:
    every namespace), the option that needs it). Plain Pod deletion - in every namespace for ``disable_eviction`` and
    an escalation without ``namespaces``, else in each of its namespaces."""
    needed: dict[tuple[tuple[str, str, str], str | None], str] = {}
    if disable_eviction:
        needed[(DELETE_PODS, None)] = "disable_eviction"
    for index, escalation in enumerate(escalations):
        if escalation.action == DELETE_POD:
            for namespace in escalation.namespaces or (None,):
                needed.setdefault((DELETE_PODS, namespace), f"escalations[{index}]")
    return [(permission, namespace, option) for (permission, namespace), option in needed.items()]


def permission_message(option: str, permission: str, cluster: str) -> str:
    """The failure before any change when the identity lacks what ``option`` needs (``permission``, in words)."""
    return (
        f"{option} deletes Pods instead of evicting them, which needs {permission} in {cluster}; this identity may not "
        f"(the API server's SelfSubjectAccessReview says so). Bind the {POD_DELETE_ROLE} ClusterRole of extensions/awx/rbac.yml "
        f"(or a Role granting delete on pods) to it, or leave {option.partition('[')[0]} out. Nothing was changed."
    )


def check_rule_names(escalations: Sequence[Escalation], rules: Sequence[dict], *, use_cluster_rules: bool, namespace: str | None) -> None:
    """MachineError when an escalation's ``drain_rules`` names none of ``rules`` (the task's, as read before
    anything is touched: its inline rules and, with ``use_cluster_rules``, the MachineDrainRules of
    ``namespace``): such an escalation could never apply."""
    known = [rule["name"] for rule in rules]
    unknown = unknown_rule_names(escalations, known)
    if not unknown:
        return
    if use_cluster_rules and namespace:
        where = f"its inline rules and the MachineDrainRules of namespace {namespace}"
    elif use_cluster_rules:
        where = "its inline rules; a Node given by name reads the cluster's MachineDrainRules only with namespace"
    else:
        where = "its inline rules; use_cluster_rules is false"
    raise MachineError(unknown_rules_message(unknown, known, where))


def record(escalated: Sequence[tuple[str, Escalation]], note: Callable[[str, Escalation], None], warn: Callable[[str, str], None] | None) -> None:
    """Each Pod a pass deleted instead of evicting, as the user asked: noted in the result (``note``) and, with
    ``warn`` (a Machine, not in check mode), a Warning Event on the Machine naming who asked for it and why."""
    for key, escalation in escalated:
        note(key, escalation)
        if warn is not None:
            warn(EVENT_REASON, event_message(key, escalation))
