# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The REST verbs every caller uses, with plain dicts in and out, built on a transport's one
``request()`` (``client.KubeApi``): a "not found" is a value (``None`` / ``False`` / ``[]``), never an
exception; a LIST is read page by page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import MERGE_PATCH


class Verbs:
    """get, list, create, patch, replace and delete on top of :meth:`request` (the transport's, which sends,
    retries and counts) and its discovery."""

    discovery: Any

    def request(self, method: str, path: str, **options: Any) -> Any:
        raise NotImplementedError

    def get(self, path: str, **query: Any) -> dict | None:
        """GET an object; ``None`` when it does not exist."""
        try:
            return self.request("GET", path, query=query or None)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list_with_version(self, path: str, label_selector: str | None = None, field_selector: str | None = None) -> tuple[list[dict], str | None]:
        """LIST a collection, every page, and the list's resourceVersion (to watch
        from); ``([], None)`` when the resource is not served. A continue token
        that expires midway restarts the list."""
        for _restart in range(3):
            items: list[dict] = []
            token = None
            resource_version = None
            while True:
                query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": 500, "continue": token}
                try:
                    result = self.request("GET", path, query=query)
                except ApiError as exc:
                    if exc.status == 404 and token is None:
                        return [], None
                    if exc.status == 410 and token is not None:
                        break  # the snapshot expired: list again from the start
                    raise
                items.extend(result.get("items") or [])
                meta = result.get("metadata") or {}
                resource_version = resource_version or meta.get("resourceVersion")
                token = meta.get("continue")
                if not token:
                    return items, resource_version
        raise ApiError(410, "Gone", {"message": "the list kept expiring while it was read page by page"}, "GET", path)

    def list(self, path: str, label_selector: str | None = None, field_selector: str | None = None) -> list[dict]:
        """LIST a collection (all pages); ``[]`` when the resource is not served."""
        return self.list_with_version(path, label_selector, field_selector)[0]

    def create(
        self,
        path: str,
        body: dict,
        dry_run: bool = False,
        *,
        exists_ok: bool = False,
        retry: bool | None = None,
        throttle: bool = True,
        verify: Callable[[], Any] | None = None,
    ) -> dict:
        """POST an object. With ``exists_ok`` a 409 AlreadyExists answer (someone,
        or an earlier attempt of ours, created it) returns the existing object,
        which makes the create safe to retry."""
        query = {"dryRun": "All" if dry_run else None}
        try:
            return self.request("POST", path, query=query, body=body, retry=True if exists_ok else retry, throttle=throttle, verify=verify)
        except ApiError as exc:
            name = (body.get("metadata") or {}).get("name")
            if exists_ok and exc.status == 409 and name:
                existing = self.get(f"{path}/{name}")
                if existing is not None:
                    return existing
            raise

    def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH, dry_run: bool = False, subresource_status: bool = False) -> dict:
        if subresource_status:
            path += "/status"
        return self.request("PATCH", path, query={"dryRun": "All" if dry_run else None}, body=body, content_type=content_type)

    def replace(self, path: str, body: dict, dry_run: bool = False) -> dict:
        return self.request("PUT", path, query={"dryRun": "All" if dry_run else None}, body=body)

    def delete(self, path: str, body: dict | None = None, dry_run: bool = False) -> bool:
        """DELETE an object; ``False`` when it was already gone (404 is success)."""
        return self.delete_object(path, body, dry_run) is not None

    def delete_object(self, path: str, body: dict | None = None, dry_run: bool = False) -> dict | None:
        """DELETE an object; the answer: the object while finalizers hold it (with its
        deletionTimestamp), a Status once it is gone, None when it was already gone (404;
        a 404 after an attempt whose answer was lost is our own deletion: ``{}``)."""
        if body is not None and dry_run:
            # The server reads DeleteOptions from the body when there is one, ignoring the query.
            body = {**body, "dryRun": ["All"]}
        try:
            return self.request("DELETE", path, query={"dryRun": "All" if dry_run else None}, body=body) or {}
        except ApiError as exc:
            if exc.status == 404:
                return {} if exc.after_ambiguous else None
            raise

    def served_versions(self, group: str) -> list[str]:
        """Versions of an API group the server serves, preferred first; ``[]`` if none (cached)."""
        return self.discovery.served_versions(group)
