# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Pure drain logic: which Pods to evict, skip or wait for, in which order, and
how to report progress, following Cluster API's Machine controller.

Nothing here talks to Kubernetes. Callers pass plain dicts (Pods, Namespaces,
MachineDrainRules, the Machine and its Cluster) as the API returns them and
get plain values back. The behaviour is Cluster API's Machine controller's,
as docs/behaviour.md §3 describes it (including where the collection differs).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339

DRAIN, SKIP, WAIT_COMPLETED = "Drain", "Skip", "WaitCompleted"
BEHAVIORS = (DRAIN, SKIP, WAIT_COMPLETED)
DRAIN_LABEL = "cluster.x-k8s.io/drain"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"

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
TERMINATING_NAMESPACE_MESSAGE = "Cannot evict pod from terminating namespace: unable to create eviction (kube-controller-manager should set deletionTimestamp)"

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_FINISHED_PHASES = ("Succeeded", "Failed")
_MAX_NAMES_PER_LINE = 3
_MAX_FAILURE_LINES = 5

_LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class DrainError(MachineError):
    """The drain cannot be planned (bad input, missing Namespace, ...)."""


class DrainRuleError(DrainError, ValueError):
    """A MachineDrainRule is invalid; ``rule`` names it (``ns/name`` or ``name``)."""

    def __init__(self, rule: str, reason: str):
        super().__init__(f"Invalid MachineDrainRule {rule}: {reason}")
        self.rule = rule
        self.reason = reason


# ---------------------------------------------------------------------------
# Small accessors


def _meta(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata")) or {}


def _labels(obj: dict | None) -> dict:
    return _meta(obj).get("labels") or {}


def pod_key(pod: dict) -> str:
    """``namespace/name`` of a Pod (or of any namespaced object)."""
    meta = _meta(pod)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def is_node_unreachable(node: dict | None) -> bool:
    """True when the Node's Ready condition is ``Unknown`` (``False`` is reachable but not ready)."""
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "Unknown"
    return False


def is_unschedulable(node: dict | None) -> bool:
    """Whether the Node is cordoned (``spec.unschedulable``)."""
    return bool(((node or {}).get("spec") or {}).get("unschedulable"))


def _controller_of(pod: dict) -> dict | None:
    # Like metav1.GetControllerOf: the first ownerReference with controller=true.
    for ref in _meta(pod).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return ref
    return None


def _phase(pod: dict) -> str:
    return ((pod.get("status") or {}).get("phase")) or ""


def _volumes(pod: dict) -> list[dict]:
    return ((pod.get("spec") or {}).get("volumes")) or []


def _claim_names(pod: dict) -> list[str]:
    names = []
    for volume in _volumes(pod):
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            names.append(claim)
    return names


def daemonset_refs(pods: Iterable[dict]) -> set[tuple[str, str]]:
    """``(namespace, name)`` of the DaemonSets whose existence :func:`classify_pods` needs to know.

    Only running (not Succeeded/Failed) Pods controlled by a DaemonSet are asked about.
    """
    refs = set()
    for pod in pods:
        controller = _controller_of(pod)
        if controller and controller.get("kind") == "DaemonSet" and _phase(pod) not in _FINISHED_PHASES:
            refs.add((_meta(pod).get("namespace", ""), controller.get("name", "")))
    return refs


# ---------------------------------------------------------------------------
# Label selectors (metav1.LabelSelector)


def _check_label_key(key: Any) -> None:
    if not isinstance(key, str):
        raise ValueError(f"label key {key!r} must be a string")
    if key.count("/") > 1:
        raise ValueError(f"invalid label key {key!r}: at most one '/' is allowed")
    prefix, slash, name = key.partition("/") if "/" in key else ("", "", key)
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix)):
        raise ValueError(f"invalid label key {key!r}: the prefix must be a DNS subdomain of at most 253 characters")
    if not name or len(name) > 63 or not _LABEL_NAME_RE.match(name):
        raise ValueError(
            f"invalid label key {key!r}: the name part must be 1-63 characters, alphanumeric, '-', '_' or '.',"
            " starting and ending with an alphanumeric character"
        )


def _check_label_value(key: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ValueError(f"value {value!r} for label key {key!r} must be a string")
    if len(value) > 63 or not _LABEL_VALUE_RE.match(value):
        raise ValueError(
            f"invalid value {value!r} for label key {key!r}: must be empty or at most 63 characters,"
            " alphanumeric, '-', '_' or '.', starting and ending with an alphanumeric character"
        )


def _expression_requirement(expression: Any) -> tuple[str, str, frozenset[str]]:
    if not isinstance(expression, dict):
        raise ValueError("each matchExpressions entry must be a mapping")
    unknown = sorted(set(expression) - {"key", "operator", "values"})
    if unknown:
        raise ValueError(f"unknown matchExpressions field(s): {', '.join(unknown)}")
    operator = expression.get("operator")
    if operator not in _SELECTOR_OPERATORS:
        raise ValueError(f"{operator!r} is not a valid label selector operator (expected In, NotIn, Exists or DoesNotExist)")
    key = expression.get("key")
    _check_label_key(key)
    values = expression.get("values") or []
    if not isinstance(values, list):
        raise ValueError(f"values of the {operator} expression on {key!r} must be a list")
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"the {operator} expression on {key!r} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"the {operator} expression on {key!r} must not have values")
    for value in values:
        _check_label_value(key, value)
    return key, operator, frozenset(values)


def _selector_requirements(selector: dict | None) -> list[tuple[str, str, frozenset[str]]]:
    """Parse a LabelSelector into ``(key, operator, values)``; ``[]`` selects everything."""
    if selector is None:
        return []
    if not isinstance(selector, dict):
        raise ValueError(f"a label selector must be a mapping, got {type(selector).__name__}")
    unknown = sorted(set(selector) - {"matchLabels", "matchExpressions"})
    if unknown:
        raise ValueError(f"unknown label selector field(s): {', '.join(unknown)}")
    match_labels = selector.get("matchLabels") or {}
    match_expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict):
        raise ValueError("matchLabels must be a mapping")
    if not isinstance(match_expressions, list):
        raise ValueError("matchExpressions must be a list")
    requirements = []
    for key, value in match_labels.items():
        _check_label_key(key)
        _check_label_value(key, value)
        requirements.append((key, "In", frozenset([value])))
    for expression in match_expressions:
        requirements.append(_expression_requirement(expression))
    return requirements


def _requirement_matches(requirement: tuple[str, str, frozenset[str]], labels: dict) -> bool:
    key, operator, values = requirement
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


def match_label_selector(selector: dict | None, labels: dict | None) -> bool:
    """Whether ``labels`` satisfy a metav1.LabelSelector.

    ``None`` and ``{}`` select everything (as Cluster API treats them in
    MachineDrainRules). matchLabels and matchExpressions are ANDed; NotIn and
    DoesNotExist match when the key is absent. Raises ValueError on an invalid
    selector (unknown operator, In/NotIn without values, Exists with values,
    invalid keys or values).
    """
    requirements = _selector_requirements(selector)
    labels = labels or {}
    return all(_requirement_matches(requirement, labels) for requirement in requirements)


# ---------------------------------------------------------------------------
# MachineDrainRules

_INLINE_FIELDS = {"name", "namespace", "drain", "machines", "pods"}
_DRAIN_FIELDS = {"behavior", "order"}
_ENTRY_SELECTORS = {"machines": ("selector", "clusterSelector"), "pods": ("selector", "namespaceSelector")}


def _parse_order(rule: str, value: Any) -> int | None:
    if value is None:
        return None
    # Templated playbook values often arrive as strings; accept integer text, never bools or floats.
    if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9]+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise DrainRuleError(rule, f"spec.drain.order must be an integer, got {value!r}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise DrainRuleError(rule, f"spec.drain.order {value} is out of the int32 range {INT32_MIN}..{INT32_MAX}")
    return value


def _normalize_entries(rule: str, spec: dict, list_name: str, strict: bool) -> list[dict]:
    entries = spec.get(list_name)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise DrainRuleError(rule, f"spec.{list_name} must be a list")
    allowed = _ENTRY_SELECTORS[list_name]
    normalized = []
    for index, entry in enumerate(entries):
        path = f"spec.{list_name}[{index}]"
        if not isinstance(entry, dict):
            raise DrainRuleError(rule, f"{path} must be a mapping")
        unknown = sorted(set(entry) - set(allowed))
        if unknown and strict:
            # A typo (say namespaceSelector under machines) would otherwise select everything.
            raise DrainRuleError(rule, f"{path} has unknown field(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})")
        item = {}
        for selector_name in allowed:
            selector = entry.get(selector_name)
            try:
                _selector_requirements(selector)
            except ValueError as exc:
                raise DrainRuleError(rule, f"{path}.{selector_name}: {exc}") from None
            item[selector_name] = selector
        normalized.append(item)
    return normalized


_OBJECT_FIELDS = {"apiVersion", "kind", "metadata", "spec", "status"}


def _rule_parts(raw: Any, index: int, served: bool = False) -> tuple[str, str | None, dict, bool]:
    """Name, namespace, spec and strictness of a rule in the object's shape or an inline rule.

    Only objects read from the cluster (``served``) may carry fields this
    collection does not know: a newer Cluster API release must not break drains.
    A rule the user wrote is checked strictly in either shape: an ignored
    ``podSelector`` would widen the rule to every Pod.
    """
    if not isinstance(raw, dict):
        raise DrainRuleError(f"#{index}", "a rule must be a mapping")
    if "spec" in raw or "metadata" in raw:
        # The object's shape (v1beta1 and v1beta2 share it).
        meta = raw.get("metadata") or {}
        name, namespace, spec, strict = meta.get("name"), meta.get("namespace"), raw.get("spec"), not served
        unknown = sorted(set(raw) - _OBJECT_FIELDS)
        if strict and unknown:
            label = name if isinstance(name, str) and name else f"#{index}"
            raise DrainRuleError(label, f"unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(_OBJECT_FIELDS))})")
    else:
        name, namespace, spec, strict = raw.get("name"), raw.get("namespace"), raw, True
    if not isinstance(name, str) or not name:
        raise DrainRuleError(f"#{index}", "a rule needs a non-empty name (metadata.name, or name for an inline rule)")
    label = f"{namespace}/{name}" if namespace else name
    if not isinstance(spec, dict):
        raise DrainRuleError(label, "spec must be a mapping")
    if strict:
        unknown = sorted(set(spec) - _INLINE_FIELDS)
        if unknown:
            allowed = _INLINE_FIELDS - {"name", "namespace"} if "spec" in raw else _INLINE_FIELDS
            where = "spec has " if "spec" in raw else ""
            raise DrainRuleError(label, f"{where}unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")
    if namespace is not None and not isinstance(namespace, str):
        raise DrainRuleError(label, "namespace must be a string")
    return name, namespace or None, spec, strict


def normalize_rules(rules: list[dict] | None, namespace: str | None = None, served: bool = False) -> list[dict]:
    """Validate MachineDrainRules and return them in one shape, sorted by name (byte order).

    Accepts objects as served (``metadata.name``/``namespace`` and ``spec.drain``,
    ``spec.machines``, ``spec.pods``; v1beta1 and v1beta2 have the same shape) and
    inline rules ``{"name", "drain": {"behavior", "order"}, "machines", "pods"}``.
    With ``namespace``, served rules of other namespaces are dropped (inline
    rules have no namespace and always apply). ``served`` says the rules were
    read from the cluster, whose unknown fields are ignored; anything else is
    checked strictly.

    Each result is ``{"name", "namespace", "drain": {"behavior", "order"},
    "machines": [{"selector", "clusterSelector"}], "pods": [{"selector",
    "namespaceSelector"}]}`` with ``order`` None when unset and absent lists as
    ``[]`` (which matches everything). The result is itself a valid inline rule
    list, so normalising twice changes nothing.

    Raises DrainRuleError naming the rule: unknown behavior, order with a
    behavior other than Drain, order outside int32, an invalid selector,
    duplicate names, unknown fields in an inline rule.
    """
    normalized = []
    seen: set[str] = set()
    for index, raw in enumerate(rules or []):
        name, rule_namespace, spec, strict = _rule_parts(raw, index, served)
        label = f"{rule_namespace}/{name}" if rule_namespace else name
        if namespace is not None and rule_namespace is not None and rule_namespace != namespace:
            continue
        drain = spec.get("drain")
        if not isinstance(drain, dict):
            raise DrainRuleError(label, "spec.drain must be a mapping with a behavior")
        if strict:
            unknown = sorted(set(drain) - _DRAIN_FIELDS)
            if unknown:
                raise DrainRuleError(label, f"spec.drain has unknown field(s) {', '.join(unknown)} (allowed: behavior, order)")
        behavior = drain.get("behavior")
        if behavior not in BEHAVIORS:
            raise DrainRuleError(label, f"spec.drain.behavior must be one of {', '.join(BEHAVIORS)}, got {behavior!r}")
        order = _parse_order(label, drain.get("order"))
        if order is not None and behavior != DRAIN:
            raise DrainRuleError(label, f'spec.drain.order must not be set if drain behavior is "{SKIP}" or "{WAIT_COMPLETED}"')
        if name in seen:
            raise DrainRuleError(label, "another rule has the same name")
        seen.add(name)
        normalized.append(
            {
                "name": name,
                "namespace": rule_namespace,
                "drain": {"behavior": behavior, "order": order},
                "machines": _normalize_entries(label, spec, "machines", strict),
                "pods": _normalize_entries(label, spec, "pods", strict),
            }
        )
    # Python compares str by code point, which is the UTF-8 byte order Go's sort uses.
    normalized.sort(key=lambda rule: rule["name"])
    return normalized


def _rule_applies(entries: list[dict], first: str, second: str, first_labels: dict, second_labels: dict) -> bool:
    # An empty list applies to everything; entries are ORed, the two selectors in one entry ANDed.
    if not entries:
        return True
    return any(match_label_selector(entry.get(first), first_labels) and match_label_selector(entry.get(second), second_labels) for entry in entries)


def rules_for_machine(rules: list[dict], machine: dict | None, cluster: dict | None) -> list[dict]:
    """The normalised rules whose ``machines`` select this Machine (and its Cluster), by name.

    Without a Machine or Cluster (a bare Node) their labels count as empty: a
    rule without ``machines`` still applies, one that requires labels does not.
    """
    machine_labels, cluster_labels = _labels(machine), _labels(cluster)
    return [rule for rule in normalize_rules(rules) if _rule_applies(rule["machines"], "selector", "clusterSelector", machine_labels, cluster_labels)]


# ---------------------------------------------------------------------------
# Classification


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


def _basic_filters(
    pod: dict, *, running: bool, deleted_at: _dt.datetime | None, existing_daemonsets: set[tuple[str, str]], skip_deleted_seconds: int, now: _dt.datetime
) -> tuple[str | None, list[str]]:
    """Steps 1-5 (aligned with kubectl drain): a reason to Skip, or None and the warnings so far."""
    meta = _meta(pod)
    # 1. On an unreachable Node deleted Pods never go away: ignore them once old enough.
    # Whole seconds, as upstream truncates (API timestamps have second resolution anyway).
    if skip_deleted_seconds > 0 and deleted_at is not None and int((now - deleted_at).total_seconds()) > skip_deleted_seconds:
        return f"deletionTimestamp more than {skip_deleted_seconds}s ago on an unreachable Node", []

    warnings: list[str] = []
    controller = _controller_of(pod)
    # 2. DaemonSet Pods would be recreated at once (they tolerate the unschedulable taint).
    if controller is not None and controller.get("kind") == "DaemonSet" and running:
        if (meta.get("namespace", ""), controller.get("name", "")) in existing_daemonsets:
            return "DaemonSet-managed Pod", []
        warnings.append(WARNING_ORPHANED_DAEMONSET)
    # 3. Static Pods: the kubelet recreates the mirror Pod, eviction is pointless.
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return "static Pod", []
    # 4-5. Warnings only, and only for running Pods: a finished Pod loses nothing.
    if running and any(volume.get("emptyDir") is not None for volume in _volumes(pod)):
        warnings.append(WARNING_LOCAL_STORAGE)
    if running and controller is None:
        warnings.append(WARNING_NO_CONTROLLER)
    return None, warnings


def _label_and_rules(labels: dict, namespace: dict | None, rules: list[dict]) -> tuple[str, int, str] | None:
    """Steps 6-8: ``(behavior, order, reason)``, or None when the Pod's Namespace is unknown."""
    # 6. The Pod's own label wins over MachineDrainRules; unknown values are ignored.
    if DRAIN_LABEL in labels:
        behavior = _drain_label_behavior(labels[DRAIN_LABEL])
        if behavior is not None:
            return behavior, 0, f"label {DRAIN_LABEL}={labels[DRAIN_LABEL]}"
    # 7. First matching MachineDrainRule by name. Upstream needs the Namespace even without rules.
    if namespace is None:
        return None
    namespace_labels = _labels(namespace)
    for rule in rules:
        if _rule_applies(rule["pods"], "selector", "namespaceSelector", labels, namespace_labels):
            behavior = rule["drain"]["behavior"]
            order = (rule["drain"]["order"] or 0) if behavior == DRAIN else 0
            return behavior, order, f"MachineDrainRule {rule['name']}"
    # 8. Default.
    return DRAIN, 0, "default"


def _classify_pod(
    pod: dict,
    *,
    rules: list[dict],
    namespaces: dict[str, dict],
    existing_daemonsets: set[tuple[str, str]],
    skip_deleted_seconds: int,
    now: _dt.datetime,
) -> PodDecision | None:
    """The decision for one Pod, or None when its Namespace is unknown (an error upstream)."""
    meta = _meta(pod)
    namespace = meta.get("namespace", "")
    phase = _phase(pod)
    deleted_at = parse_time(meta.get("deletionTimestamp"))
    decision = PodDecision(
        namespace=namespace,
        name=meta.get("name", ""),
        behavior=SKIP,
        terminating=deleted_at is not None,
        phase=phase,
        claims=_claim_names(pod),
    )
    skip_reason, warnings = _basic_filters(
        pod,
        running=phase not in _FINISHED_PHASES,  # Pending and unknown phases count as running, as upstream
        deleted_at=deleted_at,
        existing_daemonsets=existing_daemonsets,
        skip_deleted_seconds=skip_deleted_seconds,
        now=now,
    )
    if skip_reason is not None:
        decision.reason = skip_reason
        return decision
    outcome = _label_and_rules(meta.get("labels") or {}, namespaces.get(namespace), rules)
    if outcome is None:
        return None
    decision.behavior, decision.order, decision.reason = outcome
    # Warnings only matter for Pods that will be evicted.
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
    namespace (see :func:`normalize_rules`). ``machine``/``cluster`` may be None
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


def skipped_claim_keys(decisions: Iterable[PodDecision]) -> set[str]:
    """``namespace/claim`` of PVCs used by Skipped Pods: the volume-detach wait ignores them (docs/behaviour.md §4)."""
    return {f"{decision.namespace}/{claim}" for decision in decisions if decision.behavior == SKIP for claim in decision.claims}


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
# Eviction results and the progress message


def eviction_failure_message(status: int, message: str, causes: list[str] | list[dict] | None = None, namespace_terminating: bool = False) -> str | None:
    """What Cluster API records for a failed eviction; None when the Pod is gone (404 is success).

    ``causes`` are the Status ``details.causes`` (messages, or the cause dicts
    themselves, in which case a ``NamespaceTerminating`` cause is recognised);
    pass None when the Status had no ``details``. On 429 (PodDisruptionBudget)
    the cause messages are appended after a space, joined by "," as upstream
    does. A 403 in a terminating namespace gets the fixed docs/behaviour.md §3.3 text.
    """
    if status == 404:
        return None
    cause_messages, cause_types = [], set()
    for cause in causes or []:
        if isinstance(cause, dict):
            cause_messages.append(str(cause.get("message") or ""))
            cause_types.add(cause.get("type") or cause.get("reason"))
        else:
            cause_messages.append(str(cause))
    if status == 429:
        if causes is None:
            return message
        return f"{message} {','.join(cause_messages)}"
    if status == 403 and (namespace_terminating or NAMESPACE_TERMINATING_CAUSE in cause_types):
        return TERMINATING_NAMESPACE_MESSAGE
    return message or f"eviction failed with HTTP status {status}"


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


class PodWait:
    """Which watch event ends the wait between two passes: the last Pod waited
    for gone (``"gone"``), or a new Pod bound to the Node (``"added"``: it must
    be classified). Without Pods to wait for only an addition ends it."""

    def __init__(self, waiting_for: Iterable[str]):
        self.pending = set(waiting_for)
        self.waiting = bool(self.pending)

    def see(self, event: dict) -> str | None:
        kind = event.get("type")
        if kind == "ADDED":
            return "added"
        if kind == "DELETED":
            self.pending.discard(pod_key(event.get("object") or {}))
            if self.waiting and not self.pending:
                return "gone"
        return None


def go_quote(text: str) -> str:
    """Go's ``%q`` of a plain string, as upstream Event messages quote names."""
    return json.dumps(text, ensure_ascii=False)


def merge_rules(inline: list[dict], served: list[dict], namespace: str | None) -> list[dict]:
    """Inline rules and the cluster's MachineDrainRules of ``namespace`` as one
    validated list, sorted by name. An inline rule replaces a cluster rule of
    the same name. Raises DrainRuleError naming an invalid rule."""
    merged = {rule["name"]: rule for rule in normalize_rules(served, namespace=namespace, served=True)}
    merged.update({rule["name"]: rule for rule in normalize_rules(inline)})
    return [merged[name] for name in sorted(merged)]
