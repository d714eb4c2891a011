# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the identity of a connection may do, asked of the API server (SelfSubjectAccessReview).

A task asks before its first change when an option it was given needs a permission the
collection's usual role does not grant (plain Pod deletion for ``escalations`` and
``disable_eviction``), so that it fails at once, naming the permission, instead of hours later
at the first such request. Every authenticated user may ask (Kubernetes' ``system:basic-user``
role). Each answer is asked once per run and connection, whatever the number of Machines.
"""

from __future__ import annotations

import threading
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import Permission, resource_path

ACCESS_REVIEWS = resource_path("authorization.k8s.io/v1", "selfsubjectaccessreviews")


def review(permission: Permission) -> dict:
    """The SelfSubjectAccessReview that asks for ``permission``."""
    attributes = {"verb": permission.verb, "group": permission.group, "resource": permission.resource}
    for key, value in (("namespace", permission.namespace), ("subresource", permission.subresource), ("name", permission.name)):
        if value:
            attributes[key] = value
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attributes}}


class Access:
    """The answers of one connection (one API server, one identity), shared by its forks."""

    def __init__(self, api: Any):
        self._api = api
        self._lock = threading.Lock()
        self._answers: dict[Permission, bool | None] = {}

    def through(self, api: Any) -> Access:
        """The same answers, asked through ``api`` (a fork: its requests and deadline) when not known yet."""
        view = Access(api)
        view._lock, view._answers = self._lock, self._answers
        return view

    def allows(self, permission: Permission) -> bool | None:
        """Whether the identity may do ``permission``, as the API server's authorizers answer; None when the
        server cannot be asked (the review itself forbidden, or not served): then nothing is known."""
        with self._lock:
            if permission in self._answers:
                return self._answers[permission]
        try:
            answer = self._api.create(ACCESS_REVIEWS, review(permission), retry=True)
        except ApiError as exc:
            if exc.status not in (403, 404):
                raise
            allowed = None
        else:
            status = (answer or {}).get("status") or {}
            allowed = bool(status.get("allowed")) and not status.get("denied")
        with self._lock:
            self._answers[permission] = allowed
        return allowed
