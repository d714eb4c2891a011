# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""REST paths and patch content types (pure)."""

from __future__ import annotations

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
