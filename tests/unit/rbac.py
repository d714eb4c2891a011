"""The permissions extensions/awx/rbac.yml grants, read as the API server's RBAC authorizer reads its rules, for
the unit tests to hold every request the collection's code sends to them (conftest.py's ``requests_are_granted``)."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import Permission, request_permission

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "extensions" / "awx" / "rbac.yml"
# The role every job is bound to, and the opt-in one that grants plain Pod deletion (escalations, disable_eviction).
ROLE = "lifecycle-machine"
OPT_IN_ROLE = "lifecycle-machine-pod-delete"
# What Kubernetes' own roles allow every authenticated user (system:basic-user: SelfSubjectAccessReviews and
# SelfSubjectRulesReviews; system:discovery: the discovery paths, which are no resources), so no rule of ours needs it.
EVERY_USER = {("authorization.k8s.io", "selfsubjectaccessreviews", "create"), ("authorization.k8s.io", "selfsubjectrulesreviews", "create")}


@functools.cache
def _roles(text: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in yaml.safe_load(text)["items"] if d["kind"] == "ClusterRole"}


def cluster_role(name: str) -> dict:
    """A ClusterRole of extensions/awx/rbac.yml as the file reads now (parsed once per content)."""
    return _roles(RBAC.read_text())[name]


def rule_allows(rule: dict, permission: Permission) -> bool:
    """One PolicyRule against one request's attributes, as RBAC matches them (``*`` for every group, resource or verb)."""
    groups, resources, verbs = rule.get("apiGroups") or [], rule.get("resources") or [], rule.get("verbs") or []
    return (
        ("*" in groups or permission.group in groups)
        and ("*" in resources or permission.rule_resource in resources or f"*/{permission.subresource}" in resources)
        and ("*" in verbs or permission.verb in verbs)
        and (not rule.get("resourceNames") or permission.name in rule["resourceNames"])
    )


def role_allows(role: str, permission: Permission) -> bool:
    return any(rule_allows(rule, permission) for rule in cluster_role(role)["rules"])


def why_not(method: str, path: str) -> str | None:
    """None when the shipped roles (the bound one, the opt-in one, or what every user may) grant the request
    ``method path`` (a watch is recorded as ``path?watch``); else what it needs, in words."""
    path, _mark, flag = path.partition("?")
    permission = request_permission(method, path, {"watch": "true"} if flag == "watch" else None)
    if permission is None:
        return None  # discovery
    if (permission.group, permission.rule_resource, permission.verb) in EVERY_USER:
        return None
    if role_allows(ROLE, permission) or role_allows(OPT_IN_ROLE, permission):
        return None
    return f"{method} {path}{'?watch' if flag else ''} needs {permission.describe()}, which {RBAC.relative_to(REPO)} does not grant"
