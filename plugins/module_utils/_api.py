# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Thin Kubernetes REST layer: one method per call, plain dicts in and out.

The pure logic elsewhere in module_utils never imports the Kubernetes client;
it receives the dicts this layer returns. Connection settings come from
kubernetes.core's client factory so that kubeconfig, context, host, api_key,
validate_certs and the ``K8S_AUTH_*`` environment variables (how AWX injects
credentials) behave exactly as in kubernetes.core modules.

A "not found" is a value (``None`` / ``False``), never an exception.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlencode

try:
    import kubernetes.client
    import kubernetes.config
    from kubernetes.client.exceptions import ApiException
except ImportError:  # reported by the module through missing_required_lib

    class ApiException(Exception):  # type: ignore[no-redef]
        """Stand-in so this module imports without the kubernetes client."""

        status = 0
        reason = ""
        body = None


try:
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
except ImportError:  # reported by the module at run time
    get_api_client = None

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """An HTTP error answered by the API server."""

    def __init__(self, status: int, reason: str, body: Any = None, method: str = "", path: str = ""):
        self.status = status
        self.reason = reason
        self.body = body if isinstance(body, dict) else {}
        self.method = method
        self.path = path
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The server's own message when it sent a Status object, else the HTTP reason."""
        return self.body.get("message") or self.reason or f"HTTP {self.status}"

    @property
    def causes(self) -> list[dict]:
        return (self.body.get("details") or {}).get("causes") or []


def _reason(status: int) -> str:
    return {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests"}.get(status, "")


def _q(part: str) -> str:
    return quote(part, safe="")


def resource_path(api_version: str, plural: str, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
    """Build the REST path of a resource or collection."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = base
    if namespace:
        path += f"/namespaces/{_q(namespace)}"
    path += f"/{plural}"
    if name:
        path += f"/{_q(name)}"
    if subresource:
        path += f"/{subresource}"
    return path


class KubeApi:
    """REST calls against one API server, counting the requests it sends."""

    def __init__(self, api_client: Any):
        self._api_client = api_client
        self._lock = threading.Lock()
        self.request_count = 0

    # -- raw -------------------------------------------------------------
    def request(
        self, method: str, path: str, *, query: dict | None = None, body: Any = None, content_type: str | None = None, timeout: float | None = None
    ) -> Any:
        with self._lock:
            self.request_count += 1
        params = [(k, v) for k, v in (query or {}).items() if v is not None and v != ""]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        try:
            status, data = self._send(method, path, params, headers, body=body, timeout=timeout)
        except ApiException as exc:
            status, data = exc.status or 0, exc.body
            if not data:
                raise ApiError(status, exc.reason or "", None, method, path) from None
        if not 200 <= status <= 299:
            parsed: Any = None
            try:
                parsed = json.loads(data) if data else None
            except (TypeError, ValueError):
                parsed = None
            raise ApiError(status, _reason(status), parsed, method, path)
        if not data:
            return None
        return json.loads(data)

    def _open(self, method: str, path: str, params: list, headers: dict, *, body: Any, timeout: float | None) -> Any:
        """Start one HTTP exchange through the kubernetes client's transport (auth,
        TLS, proxy); returns the urllib3 response, its body not yet read.

        Supports both generations of the generated client: the current one
        (``param_serialize``; kubernetes >= 35) and the older ``call_api``.
        """
        client = self._api_client
        if hasattr(client, "param_serialize"):
            request = client.param_serialize(method, path, query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"])
            return client.call_api(*request, _request_timeout=timeout).response
        if params:
            path = path + "?" + urlencode(params)
        response = client.call_api(
            path,
            method,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=False,
            _request_timeout=timeout,
        )
        return response[0]

    def _send(self, method: str, path: str, params: list, headers: dict, *, body: Any, timeout: float | None) -> tuple[int, bytes]:
        response = self._open(method, path, params, headers, body=body, timeout=timeout)
        return response.status, response.data

    def watch(self, path: str, *, resource_version: str | None = None, field_selector: str | None = None, timeout: int = 60) -> Iterator[dict]:
        """Stream watch events (``{"type": ..., "object": ...}``) of a collection
        until the server ends the watch after ``timeout`` seconds."""
        with self._lock:
            self.request_count += 1
        query = {"watch": "true", "resourceVersion": resource_version, "fieldSelector": field_selector, "timeoutSeconds": timeout}
        params = [(k, v) for k, v in query.items() if v is not None and v != ""]
        try:
            response = self._open("GET", path, params, {"Accept": "application/json"}, body=None, timeout=timeout + 10)
        except ApiException as exc:
            raise ApiError(exc.status or 0, exc.reason or "", None, "GET", path) from None
        try:
            if not 200 <= response.status <= 299:
                raise ApiError(response.status, _reason(response.status), None, "GET", path)
            buffer = b""
            for chunk in response.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            response.release_conn()

    # -- conveniences ----------------------------------------------------
    def get(self, path: str, **query: Any) -> dict | None:
        """GET an object; ``None`` when it does not exist."""
        try:
            return self.request("GET", path, query=query or None)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, label_selector: str | None = None, field_selector: str | None = None) -> list[dict]:
        """LIST a collection (all pages); ``[]`` when the resource is not served."""
        items: list[dict] = []
        token = None
        while True:
            query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": 500, "continue": token}
            try:
                result = self.request("GET", path, query=query)
            except ApiError as exc:
                if exc.status == 404:
                    return []
                raise
            items.extend(result.get("items") or [])
            token = (result.get("metadata") or {}).get("continue")
            if not token:
                return items

    def create(self, path: str, body: dict, dry_run: bool = False) -> dict:
        return self.request("POST", path, query={"dryRun": "All" if dry_run else None}, body=body)

    def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH, dry_run: bool = False, subresource_status: bool = False) -> dict:
        if subresource_status:
            path += "/status"
        return self.request("PATCH", path, query={"dryRun": "All" if dry_run else None}, body=body, content_type=content_type)

    def replace(self, path: str, body: dict, dry_run: bool = False) -> dict:
        return self.request("PUT", path, query={"dryRun": "All" if dry_run else None}, body=body)

    def delete(self, path: str, body: dict | None = None, dry_run: bool = False) -> bool:
        """DELETE an object; ``False`` when it was already gone (404 is success)."""
        if body is not None and dry_run:
            # The server reads DeleteOptions from the body when there is one, ignoring the query.
            body = {**body, "dryRun": ["All"]}
        try:
            self.request("DELETE", path, query={"dryRun": "All" if dry_run else None}, body=body)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def wait_for_object(
        self, path: str, satisfied: Callable[[dict | None], bool], deadline: float, current: dict | None, adapt: Callable[[dict], dict] | None = None
    ) -> tuple[dict | None, bool]:
        """Wait until ``satisfied(the object at path, or None when it is gone)``
        holds or ``deadline`` (a ``time.monotonic()`` value) passes; returns
        (object, satisfied). ``current`` is the object as last read.

        Watches the object, so the wait ends as soon as the change lands, and
        re-reads it whenever a watch ends (BOOKMARK, an expired resourceVersion,
        the server closing it). ``adapt`` fixes up each object read.
        """
        collection, _slash, name = path.rpartition("/")
        adapt = adapt or (lambda obj: obj)
        while True:
            if satisfied(current):
                return current, True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return current, False
            resource_version = (current or {}).get("metadata", {}).get("resourceVersion")
            try:
                for event in self.watch(collection, field_selector=f"metadata.name={name}", resource_version=resource_version, timeout=max(1, int(remaining))):
                    kind = event.get("type")
                    if kind == "DELETED":
                        current = None
                    elif kind in ("ADDED", "MODIFIED"):
                        current = adapt(event["object"])
                    else:  # BOOKMARK, or ERROR (e.g. an expired resourceVersion): re-read below
                        break
                    if satisfied(current) or time.monotonic() >= deadline:
                        break
            except ApiError as exc:
                if exc.status not in (410, 500, 503, 504):
                    raise
                time.sleep(0.5)
            if not satisfied(current):
                fresh = self.get(path)
                current = adapt(fresh) if fresh is not None else None

    def served_versions(self, group: str) -> list[str]:
        """Versions of an API group the server serves, preferred first; ``[]`` if none."""
        info = self.get(f"/apis/{group}")
        if not info:
            return []
        preferred = (info.get("preferredVersion") or {}).get("version")
        versions = [v.get("version") for v in info.get("versions") or [] if v.get("version")]
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        return versions


def api_from_module(module: Any) -> KubeApi:
    """Build a KubeApi from a module's kubernetes.core auth options."""
    k8s_client = get_api_client(module=module)
    return api_from_configuration(k8s_client.configuration)


def api_from_configuration(configuration: Any, pool_size: int = 16) -> KubeApi:
    """Build a KubeApi from a kubernetes client Configuration."""
    configuration.connection_pool_maxsize = max(pool_size, getattr(configuration, "connection_pool_maxsize", 4) or 4)
    return KubeApi(kubernetes.client.ApiClient(configuration))


def api_from_kubeconfig(path: str, context: str | None = None) -> KubeApi:
    """Build a KubeApi from a kubeconfig file (tests, benchmarks, scripts)."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    return api_from_configuration(configuration)
