# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Label selectors (metav1.LabelSelector), as MachineDrainRules and
PodDisruptionBudgets use them: parsing with the API server's checks on keys
and values, and matching a set of labels. Pure: dicts in, booleans out.
"""

from __future__ import annotations

import re
from typing import Any

_LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

Requirement = tuple[str, str, frozenset[str]]


def labels_of(obj: dict | None) -> dict:
    """``metadata.labels`` of any object (``{}`` for None or no labels)."""
    return (((obj or {}).get("metadata")) or {}).get("labels") or {}


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


def _expression_requirement(expression: Any) -> Requirement:
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


def selector_requirements(selector: dict | None) -> list[Requirement]:
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


def _requirement_matches(requirement: Requirement, labels: dict) -> bool:
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
    requirements = selector_requirements(selector)
    labels = labels or {}
    return all(_requirement_matches(requirement, labels) for requirement in requirements)
