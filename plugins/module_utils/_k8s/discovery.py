# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the API server serves, asked once per run.

Which versions of a group are served (preferred first) and which resources a
group version has. Answers are cached for the life of the :class:`KubeApi`
(one module run); long-lived users (the event source, the inventory) call
:meth:`Discovery.invalidate` when they resync.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import group_version_path


class Discovery:
    def __init__(self, api: Any):
        self._api = api
        self._lock = threading.Lock()
        self._groups: dict[str, list[str]] = {}
        self._resources: dict[str, list[dict] | None] = {}
        # What is being asked right now, by key: the Machines of a task asking at once send one request, not one each.
        self._pending: dict[tuple[str, str], threading.Event] = {}

    def through(self, api: Any) -> Discovery:
        """The same answers (one cache), asked through ``api`` when not known yet: a fork's
        discovery requests are the fork's, within its task's deadline."""
        view = Discovery(api)
        view._lock, view._groups, view._resources, view._pending = self._lock, self._groups, self._resources, self._pending
        return view

    def _once(self, cache: dict, kind: str, key: str, fetch: Callable[[], Any]) -> Any:
        """``cache[key]``, asked once: the first caller fetches it, callers meanwhile wait for its answer
        instead of sending the same request (after a failed fetch the next caller asks again)."""
        while True:
            with self._lock:
                if key in cache:
                    return cache[key]
                pending = self._pending.get((kind, key))
                first = pending is None
                if first:
                    pending = self._pending[(kind, key)] = threading.Event()
            if not first:
                pending.wait()
                continue
            try:
                value = fetch()
                with self._lock:
                    cache[key] = value
                return value
            finally:
                with self._lock:
                    self._pending.pop((kind, key), None)
                pending.set()

    def invalidate(self) -> None:
        with self._lock:
            self._groups.clear()
            self._resources.clear()

    def served_versions(self, group: str) -> list[str]:
        """Versions of ``group`` the server serves, preferred first; ``[]`` if none."""
        return list(self._once(self._groups, "group", group, lambda: self._versions(group)))

    def _versions(self, group: str) -> list[str]:
        info = self._api.get(f"/apis/{group}") if group else {"versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}}
        versions = [v.get("version") for v in (info or {}).get("versions") or [] if v.get("version")]
        preferred = ((info or {}).get("preferredVersion") or {}).get("version")
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        return versions

    def serves(self, group_version: str) -> bool:
        """Whether the server serves this group version at all."""
        return self._resource_list(group_version) is not None

    def resources(self, group_version: str) -> list[dict]:
        """The resources (not subresources) of a group version; ``[]`` when it is not served."""
        return self._resource_list(group_version) or []

    def _resource_list(self, group_version: str) -> list[dict] | None:
        def fetch() -> list[dict] | None:
            listed = self._api.get(group_version_path(group_version))
            return None if listed is None else [r for r in listed.get("resources") or [] if "/" not in r.get("name", "/")]

        return self._once(self._resources, "resources", group_version, fetch)

    def resource(self, group_version: str, *, kind: str | None = None, plural: str | None = None) -> dict | None:
        """The discovery entry of a resource by kind or plural name; None when not served."""
        for resource in self.resources(group_version):
            if (kind is not None and resource.get("kind") == kind) or (plural is not None and resource.get("name") == plural):
                return resource
        return None

    def preferred_version(self, group: str) -> str | None:
        """``<group>/<preferred version>`` (``v1`` for the core group); None when the group is not served."""
        versions = self.served_versions(group)
        if not versions:
            return None
        return f"{group}/{versions[0]}" if group else versions[0]
