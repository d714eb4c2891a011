"""An in-memory stand-in for the transport (``_k8s.client.KubeApi``), for unit
tests of the runners' logic only. Whatever a user sees happen is proven
against the real API server in tests/integration.

It stores objects by REST path, gives them resourceVersions and uids, applies
merge patches (and the ``test`` / ``add`` / ``remove`` operations of JSON
patches), refuses a write whose ``metadata.resourceVersion`` is stale with 409,
records every request and every change (so a watch replays them), and can be
told to fail given requests (``fail(...)``). A namespaced resource is also
listed and watched across namespaces (``/api/v1/pods``). Time is a fake clock that
``sleep`` advances, so waits end at once.
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.access import ACCESS_REVIEWS, Access
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Cache, Reader
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled, http_reason
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.flow import Flow
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.window import Window


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def json_patch(target: dict, operations: list[dict], path: str = "") -> dict:
    """The ``test``, ``add`` and ``remove`` operations of RFC 6902 (what the collection sends)."""
    result = copy.deepcopy(target)
    for op in operations:
        *parents, last = _pointer(op["path"])
        node: Any = result
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if op["op"] == "test":
            if isinstance(node, list):
                current = node[int(last)] if last.isdigit() and int(last) < len(node) else None
            else:
                current = node.get(last) if isinstance(node, dict) else None
            if current != op["value"]:
                raise ApiError(422, "Unprocessable Entity", {"message": f"the test of {op['path']} failed"}, "PATCH", path)
        elif op["op"] == "add":
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else int(last), op["value"])
            else:
                node[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(node, list):
                node.pop(int(last))
            else:
                node.pop(last, None)
    return result


class FakeDiscovery:
    """Served groups and resources, set by the test (``serve``)."""

    def __init__(self) -> None:
        self.groups: dict[str, list[str]] = {}
        self.kinds: dict[str, list[dict]] = {}

    def serve(self, group_version: str, *resources: dict) -> None:
        group, _slash, version = group_version.rpartition("/")
        versions = self.groups.setdefault(group, [])
        if version not in versions:
            versions.append(version)
        self.kinds.setdefault(group_version, []).extend(resources)

    def invalidate(self) -> None:
        pass

    def served_versions(self, group: str) -> list[str]:
        return list(self.groups.get(group, []))

    def serves(self, group_version: str) -> bool:
        return group_version in self.kinds

    def resources(self, group_version: str) -> list[dict]:
        return list(self.kinds.get(group_version, []))

    def resource(self, group_version: str, *, kind: str | None = None, plural: str | None = None) -> dict | None:
        for resource in self.resources(group_version):
            if (kind is not None and resource.get("kind") == kind) or (plural is not None and resource.get("name") == plural):
                return resource
        return None

    def preferred_version(self, group: str) -> str | None:
        versions = self.served_versions(group)
        return (f"{group}/{versions[0]}" if group else versions[0]) if versions else None


class FakeKube:
    """The transport's interface over an in-memory store.

    Its watches replay and end at once, so the background watches of informers
    (which need a streaming server) stay off: ``background_watches`` False. A run
    keeps no caches unless a test gives it one (``cache``, its informers fed by hand).
    """

    background_watches = False
    # Called with (method, path) of every request; the unit tests' conftest holds them to extensions/awx/rbac.yml.
    permission_check: Callable[[str, str], None] | None = None

    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.changes: list[tuple[int, str, str, dict]] = []  # (resourceVersion, type, collection path, object)
        self.requests: list[tuple[str, str]] = []
        self.failures: dict[tuple[str, str], list[ApiError]] = {}
        self.discovery = FakeDiscovery()
        self.retries: Counter[str] = Counter()
        self.clock = 1000.0
        self.cancelled = False
        self._versions = itertools.count(1)
        self._uids = itertools.count(1)
        self.on_request: Callable[[str, str], None] | None = None
        # Every Namespace exists unless named here (or namespaces_implicit is off: then only those put).
        self.missing_namespaces: set[str] = set()
        self.namespaces_implicit = True
        # What the identity may not do, as SelfSubjectAccessReviews answer: (verb, group, resource, namespace or None).
        self.denied: set[tuple[str, str, str, str | None]] = set()
        self.access = Access(self)
        # The run's cache (``cached_reader``); None: every read goes to the store.
        self.cache: Cache | None = None
        self.caches_kept = False

    # -- test set-up -----------------------------------------------------------
    def put(self, path: str, obj: dict) -> dict:
        """Store an object at ``path`` (as a create would), recording the change."""
        return self._store(path, copy.deepcopy(obj), "ADDED")

    def fail(self, method: str, path: str, *errors: ApiError) -> None:
        """Make the next requests ``method path`` fail with these errors, in order."""
        self.failures.setdefault((method.upper(), path), []).extend(errors)

    @staticmethod
    def error(status: int, message: str = "", **body: Any) -> ApiError:
        return ApiError(status, http_reason(status), {"message": message, **body} if message or body else None)

    # -- the transport's interface -------------------------------------------------
    @property
    def request_count(self) -> int:
        return len(self.requests)

    @property
    def total_requests(self) -> int:
        """Every request of the store and its forks (one list: they share it)."""
        return len(self.requests)

    def cancel(self) -> None:
        self.cancelled = True

    def sleep(self, seconds: float) -> None:
        if self.cancelled:
            raise Cancelled("the run was cancelled")
        self.clock += max(0.0, seconds)

    def monotonic(self) -> float:
        return self.clock

    def retry_summary(self) -> str:
        return ""

    @property
    def deadline(self) -> float | None:
        """The store itself has no deadline: a task's is its fork's (:meth:`fork`)."""
        return None

    def fork(self, *, deadline: float | None = None, deadline_from: Any = None) -> FakeFork:
        """The KubeApi of one task: the same store and clock, its own deadline
        (the forks made are kept in ``forks``, in order, for tests to read)."""
        child = FakeFork(self, deadline if deadline_from is None else deadline_from.deadline)
        self.forks = [*getattr(self, "forks", []), child]
        return child

    # The store is one cluster: a Cluster API Machine's workload cluster is the store itself
    # (a self-hosted cluster). Reading the kubeconfig Secret is proven against the real API server.
    label = ""
    # The API server's URL, for messages (the transport's ``server``).
    server = ""

    def other_cluster(self, key: str, make: Callable[[], Any], *, label: str) -> FakeKube:
        self.other_clusters = [*getattr(self, "other_clusters", []), key]
        return self

    def served_versions(self, group: str) -> list[str]:
        return self.discovery.served_versions(group)

    def keep_caches(self) -> None:
        self.caches_kept = True

    def stop_caches(self) -> None:
        self.caches_kept = False
        if self.cache is not None:
            self.cache.stop()

    def cached_reader(self) -> Reader:
        return Reader(self, self.cache)

    def flow_control(self, most: int) -> Flow:
        # The stand-in has no server to answer: every unit of work starts at once, up to ``most``.
        return Flow(Window(most, start=most), self.monotonic)

    def live_reader(self) -> Reader:
        return Reader(self, None)

    def request(self, method: str, path: str, *, query: dict | None = None, body: Any = None, content_type: str | None = None, **_options: Any) -> Any:
        method = method.upper()
        self._probe(_options.get("verify"))
        self._sent(method, path)
        query = {k: v for k, v in (query or {}).items() if v is not None}
        if method == "GET":
            if path in self.objects:
                return copy.deepcopy(self.objects[path])
            namespace = _namespace_named(path)
            if namespace is not None and namespace not in self.missing_namespaces and self.namespaces_implicit:
                return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            items = self._collection(path, query.get("labelSelector"), query.get("fieldSelector"))
            if items is None:
                raise ApiError(404, "Not Found", {"message": f"{path} not found"}, method, path)
            return {"metadata": {"resourceVersion": str(self._current_version())}, "items": items}
        if method == "POST":
            return self._review(body) if path == ACCESS_REVIEWS else self._create(path, body, dry_run=query.get("dryRun") == "All")
        if method == "PATCH":
            return self._patch(path, body, content_type, dry_run=query.get("dryRun") == "All")
        if method == "DELETE":
            return self._delete(path, body, dry_run=query.get("dryRun") == "All" or "All" in ((body or {}).get("dryRun") or []))
        raise NotImplementedError(method)

    def get(self, path: str, **query: Any) -> dict | None:
        try:
            return self.request("GET", path, query=query or None)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list_with_version(self, path: str, label_selector: str | None = None, field_selector: str | None = None) -> tuple[list[dict], str | None]:
        try:
            listed = self.request("GET", path, query={"labelSelector": label_selector, "fieldSelector": field_selector})
        except ApiError as exc:
            if exc.status == 404:
                return [], None
            raise
        return listed["items"], listed["metadata"]["resourceVersion"]

    def list(self, path: str, label_selector: str | None = None, field_selector: str | None = None) -> list[dict]:
        return self.list_with_version(path, label_selector, field_selector)[0]

    def create(self, path: str, body: dict, dry_run: bool = False, **_options: Any) -> dict:
        return self.request("POST", path, query={"dryRun": "All" if dry_run else None}, body=body, verify=_options.get("verify"))

    def patch(self, path: str, body: Any, content_type: str = "application/merge-patch+json", dry_run: bool = False, subresource_status: bool = False) -> dict:
        if subresource_status:
            path += "/status"
        return self.request("PATCH", path, query={"dryRun": "All" if dry_run else None}, body=body, content_type=content_type)

    def delete(self, path: str, body: dict | None = None, dry_run: bool = False) -> bool:
        return self.delete_object(path, body, dry_run) is not None

    def delete_object(self, path: str, body: dict | None = None, dry_run: bool = False) -> dict | None:
        try:
            return self.request("DELETE", path, query={"dryRun": "All" if dry_run else None}, body=body)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def watch(
        self,
        path: str,
        *,
        resource_version: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout: int = 60,
        bookmarks: bool = False,
    ) -> Iterator[dict]:
        """Replay the recorded changes of the collection after ``resource_version``, then end (the watch's timeout)."""
        self._sent("GET", path + "?watch")
        since = int(resource_version or 0)
        for version, kind, collection, obj in list(self.changes):
            if version > since and _within(collection, path) and _matches(obj, label_selector, field_selector):
                yield {"type": kind, "object": copy.deepcopy(obj)}
        self.clock += timeout

    # -- the store -----------------------------------------------------------------
    def _probe(self, verify: Callable[[], Any] | None) -> None:
        """What the transport asks before it sends again a request whose answer was lost (``verify``), asked once
        here only for what it would request (the permission check), recording nothing: the store never loses an answer."""
        if verify is None or FakeKube.permission_check is None:
            return
        self._probing = True
        try:
            verify()
        except ApiError:
            pass
        finally:
            self._probing = False

    _probing = False

    def _sent(self, method: str, path: str) -> None:
        if self._probing:
            if FakeKube.permission_check is not None:
                FakeKube.permission_check(method, path)
            return
        if self.cancelled:
            raise Cancelled(f"the run was cancelled before {method} {path}")
        self.requests.append((method, path))
        if FakeKube.permission_check is not None:
            FakeKube.permission_check(method, path)
        if self.on_request is not None:
            self.on_request(method, path)
        queued = self.failures.get((method, path))
        if queued:
            error = queued.pop(0)
            error.method, error.path = method, path
            raise error

    def _review(self, body: dict) -> dict:
        """A SelfSubjectAccessReview, answered from ``denied``."""
        attributes = body["spec"]["resourceAttributes"]
        asked = (attributes["verb"], attributes.get("group", ""), attributes["resource"], attributes.get("namespace"))
        return {**body, "status": {"allowed": asked not in self.denied}}

    def _current_version(self) -> int:
        return self.changes[-1][0] if self.changes else 0

    def _store(self, path: str, obj: dict, kind: str) -> dict:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("name", path.rsplit("/", 1)[-1])
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        version = next(self._versions)
        meta["resourceVersion"] = str(version)
        self.objects[path] = obj
        self.changes.append((version, kind, path.rsplit("/", 1)[0], copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    def _collection(self, path: str, label_selector: str | None, field_selector: str | None) -> list[dict] | None:
        if not _is_collection(path):
            return None  # a missing object: 404
        found = [
            copy.deepcopy(obj)
            for key, obj in sorted(self.objects.items())
            if _within(key.rsplit("/", 1)[0], path) and _matches(obj, label_selector, field_selector)
        ]
        # A collection is "served" when anything was ever stored in it, or it is cluster-wide core.
        known = any(_within(collection, path) for _v, _k, collection, _o in self.changes)
        return found if found or known or path.startswith("/api/v1/") else None

    def _create(self, path: str, body: dict, *, dry_run: bool) -> dict:
        if path.endswith("/eviction"):
            pod_path = path[: -len("/eviction")]
            if pod_path not in self.objects:
                raise ApiError(404, "Not Found", {"message": "pod not found"}, "POST", path)
            if not dry_run:
                self._terminate(pod_path)
            return {"kind": "Status", "status": "Success"}
        name = (body.get("metadata") or {}).get("name") or f"{(body.get('metadata') or {}).get('generateName', 'obj-')}{next(self._uids)}"
        target = f"{path}/{name}"
        if target in self.objects:
            raise ApiError(409, "Conflict", {"message": f"{name} already exists", "reason": "AlreadyExists"}, "POST", path)
        obj = copy.deepcopy(body)
        obj.setdefault("metadata", {})["name"] = name
        if dry_run:
            return obj
        return self._store(target, obj, "ADDED")

    def _patch(self, path: str, body: Any, content_type: str | None, *, dry_run: bool) -> dict:
        target = path[: -len("/status")] if path.endswith("/status") else path
        if target not in self.objects:
            raise ApiError(404, "Not Found", {"message": f"{target} not found"}, "PATCH", path)
        current = self.objects[target]
        if content_type == "application/json-patch+json":
            updated = json_patch(current, body, path)
        else:
            wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", {"message": "the object has been modified", "reason": "Conflict"}, "PATCH", path)
            body = copy.deepcopy(body)
            (body.get("metadata") or {}).pop("resourceVersion", None)
            updated = merge_patch(current, body)
        if dry_run:
            return copy.deepcopy(updated)
        meta = updated.setdefault("metadata", {})
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(target)
        return self._store(target, updated, "MODIFIED")

    def _delete(self, path: str, body: dict | None, *, dry_run: bool) -> dict:
        if path not in self.objects:
            raise ApiError(404, "Not Found", {"message": f"{path} not found"}, "DELETE", path)
        uid = ((body or {}).get("preconditions") or {}).get("uid")
        if uid and uid != self.objects[path]["metadata"].get("uid"):
            raise ApiError(409, "Conflict", {"message": "Precondition failed: UID in precondition", "reason": "Conflict"}, "DELETE", path)
        if dry_run:
            return {"kind": "Status", "status": "Success"}
        return self._terminate(path)

    def _terminate(self, path: str) -> dict:
        obj = copy.deepcopy(self.objects[path])
        if obj["metadata"].get("finalizers") or path.split("/")[-2] == "pods":
            obj["metadata"].setdefault("deletionTimestamp", "2026-01-01T00:00:00Z")
            return self._store(path, obj, "MODIFIED")
        return self._remove(path)

    def _remove(self, path: str) -> dict:
        obj = self.objects.pop(path)
        version = next(self._versions)
        obj["metadata"]["resourceVersion"] = str(version)
        self.changes.append((version, "DELETED", path.rsplit("/", 1)[0], copy.deepcopy(obj)))
        return obj

    def finish(self, path: str) -> None:
        """A terminating object (say, an evicted Pod) goes away."""
        self._remove(path)


def _namespace_named(path: str) -> str | None:
    """The Namespace ``/api/v1/namespaces/<name>`` names; None for any other path."""
    parts = [part for part in path.split("/") if part]
    return parts[3] if len(parts) == 4 and parts[:3] == ["api", "v1", "namespaces"] else None


def _is_collection(path: str) -> bool:
    """Whether ``path`` names a collection (``/api/v1/namespaces/ns/pods``) rather than an object."""
    parts = [part for part in path.split("/") if part]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return len(rest) == 1


def _within(collection: str, path: str) -> bool:
    """Whether objects of ``collection`` are listed (and watched) at ``path``: the
    collection itself, or the same resource across all namespaces
    (``/api/v1/namespaces/ns/pods`` is within ``/api/v1/pods``)."""
    path = path.rstrip("/")
    if collection == path:
        return True
    head, found, rest = collection.partition("/namespaces/")
    _namespace, _slash, plural = rest.partition("/")
    return bool(found and plural) and "/" not in plural and path == f"{head}/{plural}"


def _matches(obj: dict, label_selector: str | None, field_selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (label_selector or "").split(",")):
        key, _eq, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    for term in filter(None, (field_selector or "").split(",")):
        key, _eq, value = term.partition("=")
        node: Any = obj
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != value:
            return False
    return True


class FakeFork:
    """A fork of a :class:`FakeKube`: everything is its parent's but the deadline, fixed when it is made."""

    def __init__(self, parent: FakeKube, deadline: float | None):
        self._parent = parent
        self._deadline = deadline

    @property
    def deadline(self) -> float | None:
        return self._deadline

    def fork(self, *, deadline: float | None = None, deadline_from: Any = None) -> FakeFork:
        return self._parent.fork(deadline=deadline, deadline_from=deadline_from)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parent, name)
