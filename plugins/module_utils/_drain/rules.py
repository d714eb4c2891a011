# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""MachineDrainRules (docs/behaviour.md §3.1): validating them into one shape,
merging the task's own rules with the ones the cluster serves, and choosing the
rules that apply to a Machine and the rule that decides a Pod.

Pure: rule objects (as served, or written inline in a task) in, normalised
rule dicts out. Reading the served rules is ``_drain.api.load_drain_rules``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.selectors import labels_of, match_label_selector, selector_requirements
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError

DRAIN, SKIP, WAIT_COMPLETED = "Drain", "Skip", "WaitCompleted"
BEHAVIORS = (DRAIN, SKIP, WAIT_COMPLETED)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class DrainError(MachineError):
    """The drain cannot be planned (bad input, missing Namespace, ...)."""


class DrainRuleError(DrainError, ValueError):
    """A MachineDrainRule is invalid; ``rule`` names it (``ns/name`` or ``name``)."""

    def __init__(self, rule: str, reason: str):
        super().__init__(f"Invalid MachineDrainRule {rule}: {reason}")
        self.rule = rule
        self.reason = reason


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
                selector_requirements(selector)
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


class NormalizedRules(list):
    """Rules :func:`normalize_rules` validated and put in one shape, sorted by name: a
    request validates its inline rules once, and what takes them does not validate them again
    (nothing changes them afterwards)."""


def normalize_rules(rules: Sequence[dict] | None, namespace: str | None = None, served: bool = False) -> NormalizedRules:
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
    duplicate names, unknown fields in an inline rule. Rules normalised
    already (:class:`NormalizedRules`) are returned as they are.
    """
    if isinstance(rules, NormalizedRules) and namespace is None:
        return rules
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
    return NormalizedRules(normalized)


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
    machine_labels, cluster_labels = labels_of(machine), labels_of(cluster)
    return [rule for rule in normalize_rules(rules) if _rule_applies(rule["machines"], "selector", "clusterSelector", machine_labels, cluster_labels)]


def rule_for_pod(rules: list[dict], pod_labels: dict, namespace_labels: dict) -> dict | None:
    """The first of the (normalised, name-sorted) rules whose ``pods`` select the Pod in its Namespace, or None."""
    for rule in rules:
        if _rule_applies(rule["pods"], "selector", "namespaceSelector", pod_labels, namespace_labels):
            return rule
    return None


def merge_rules(inline: Sequence[dict], served: list[dict], namespace: str | None) -> NormalizedRules:
    """Inline rules and the cluster's MachineDrainRules of ``namespace`` as one
    validated list, sorted by name. An inline rule replaces a cluster rule of
    the same name. Raises DrainRuleError naming an invalid rule."""
    merged = {rule["name"]: rule for rule in normalize_rules(served, namespace=namespace, served=True)}
    merged.update({rule["name"]: rule for rule in normalize_rules(inline)})
    return NormalizedRules(merged[name] for name in sorted(merged))
