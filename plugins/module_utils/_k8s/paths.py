# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""REST paths and patch content types (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def _q(part: str) -> str:
    return quote(part, safe="")


def group_version_path(group_version: str) -> str:
    """The discovery path of an API: ``/api/v1`` for the core group, ``/apis/<group>/<version>`` otherwise."""
    return "/api/v1" if group_version == "v1" else f"/apis/{group_version}"


def group_version_of(path: str) -> str:
    """The API a REST path is in, as :func:`group_version_path` made it: ``/api/v1/...`` gives ``v1``,
    ``/apis/<group>/<version>/...`` gives ``<group>/<version>``."""
    parts = path.strip("/").split("/")
    return parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"


def resource_path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
    """The REST path of a resource or collection."""
    path = group_version_path(api_version)
    if namespace:
        path += f"/namespaces/{_q(namespace)}"
    path += f"/{plural}"
    if name:
        path += f"/{_q(name)}"
    if subresource:
        path += f"/{subresource}"
    return path


@dataclass(frozen=True)
class Permission:
    """What the API server authorizes a request as (RBAC's terms): ``verb`` on ``resource`` (with its
    ``subresource``) of API ``group`` ("" for the core group), in ``namespace`` (None: every namespace, or a
    resource outside namespaces), optionally one object ``name``."""

    verb: str
    resource: str
    group: str = ""
    namespace: str | None = None
    subresource: str | None = None
    name: str | None = None

    @property
    def rule_resource(self) -> str:
        """The resource as an RBAC rule names it: ``pods/eviction`` for a subresource."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def describe(self) -> str:
        """``delete pods (core API group) in namespace shop`` / ``... in every namespace``."""
        group = f"API group {self.group}" if self.group else "core API group"
        where = f"in namespace {self.namespace}" if self.namespace else "in every namespace"
        return f"{self.verb} {self.rule_resource} ({group}) {where}"


def request_permission(method: str, path: str, query: dict | None = None) -> Permission | None:
    """The permission a REST request needs, read from its method, path and query as the API server's
    request info does (GET of a collection is ``list``, with ``watch=true`` ``watch``; DELETE of a collection
    ``deletecollection``); None for a path outside resources (discovery: ``/api``, ``/apis/<group>/<version>``)."""
    parts = [part for part in path.split("?", 1)[0].strip("/").split("/") if part]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    method = method.upper()
    watching = str((query or {}).get("watch", "")).lower() in ("true", "1")
    if method in ("GET", "HEAD"):
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
    return Permission(verb, resource, group, namespace, subresource, name)


# The whole-cluster collections the collection reads (and a run may cache: cache.py).
NAMESPACES = resource_path("v1", "namespaces")
NODES = resource_path("v1", "nodes")
PODS = resource_path("v1", "pods")
BUDGETS = resource_path("policy/v1", "poddisruptionbudgets")
VOLUME_ATTACHMENTS = resource_path("storage.k8s.io/v1", "volumeattachments")
PERSISTENT_VOLUMES = resource_path("v1", "persistentvolumes")
