# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The one Kubernetes transport: REST calls with plain dicts in and out.

A :class:`KubeApi` is built from kubernetes.core's client factory
(:mod:`connect`: :func:`connect.api_from_module`, :func:`connect.api_from_options`), so kubeconfig, context,
host, api_key, certificates, proxy, proxy headers, no_proxy, impersonation
and the ``K8S_AUTH_*`` environment variables (how AWX injects credentials)
behave exactly as in kubernetes.core modules. Every request is retried as
:mod:`retry` decides, never past the task's deadline, and counted; a "not
found" is a value (``None`` / ``False`` / ``[]``), never an exception.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.access import Access
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import Attempts, Call, Link
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Cache, Caches, Reader
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.discovery import Discovery
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import (
    TRANSPORT_ERRORS,
    ApiError,
    ApiException,
    Cancelled,
    ConnectTimeoutError,
    exception_reason,
    http_reason,
    is_permanent_tls_error,
    transport_reason,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import MERGE_PATCH
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import Failure, RetryPolicy, idempotent, parse_retry_after

# (connect, read) seconds of one request; a watch reads for its own timeout plus this slack.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
WATCH_SLACK = 10.0
# A run that has never reached the server (a mistyped host, nothing listening)
# stops retrying sooner than one that lost a server it was talking to.
FIRST_CONTACT_BUDGET = 10.0


class KubeApi:
    """REST calls against one API server: retried, counted and cancellable.

    ``deadline`` (a value of the transport's clock, :meth:`monotonic`) is the
    task's own limit: no retry waits past it, and no read waits much longer.
    It is given once, where the task's KubeApi is made (:meth:`fork`), and
    never changes: nothing outside the transport sets it.
    Without one, a request is retried for at most the policy's ``budget``.
    ``cancel()`` makes every later request raise :class:`Cancelled` at once,
    and wakes any retry pause.
    """

    # Whether watches may run in background threads (the unit tests' stand-in for the transport runs none).
    background_watches = True

    def __init__(
        self,
        api_client: Any,
        *,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        label: str = "",
        renew: Callable[[], Any] | None = None,
    ):
        self._link = Link(api_client, renew)
        # Names the server in messages when it is not the task's own ("the workload cluster ns/c1").
        self.label = label
        self._deadline_from: KubeApi | None = None
        self._deadline: float | None = None
        self._lock = threading.Lock()
        self._clock = clock
        self._cancelled = threading.Event()
        self._streams: set[Any] = set()
        self._streams_lock = threading.Lock()
        self._children: list[KubeApi] = []
        # The run's connections to other clusters, made once and shared by every fork.
        self._others: dict[str, KubeApi] = {}
        self._others_lock = threading.Lock()
        self._answered = False
        # The run's caches (one set per run: every fork and other cluster's connection shares it).
        self._caches = Caches()
        self.policy = policy or RetryPolicy()
        self.request_count = 0
        self.retries: Counter[str] = Counter()
        self.discovery = Discovery(self)
        # What this connection's identity may do (SelfSubjectAccessReview), asked once per run.
        self.access = Access(self)

    # -- lifecycle -----------------------------------------------------------
    def cancel(self) -> None:
        """Send no request from now on (a signal handler calls this), and cut every
        open watch so that nothing waits on one: the waits end at once."""
        self._cancelled.set()
        with self._streams_lock:
            streams = list(self._streams)
        for response in streams:
            _cut(response)

    @property
    def _api_client(self) -> Any:
        return self._link.client

    @property
    def deadline(self) -> float | None:
        """The task's limit on the transport's clock; a connection to another
        cluster made for a task (:meth:`beside`) follows the task's own."""
        if self._deadline is None and self._deadline_from is not None:
            return self._deadline_from.deadline
        return self._deadline

    def fork(self, *, deadline: float | None = None, deadline_from: KubeApi | None = None) -> KubeApi:
        """A KubeApi for one task, or one of several tasks run at once (say, one
        Machine among many): the same connections, discovery answers and
        cancellation, but its own request counters and its own ``deadline`` (on
        the transport's clock; None: none), or, with ``deadline_from``, that KubeApi's."""
        child = KubeApi(None, policy=self.policy, clock=self._clock, label=self.label)
        child._link = self._link
        child._deadline = deadline
        child._deadline_from = deadline_from
        child._cancelled, child._streams, child._streams_lock = self._cancelled, self._streams, self._streams_lock
        child._others, child._others_lock = self._others, self._others_lock
        child._caches = self._caches
        child.discovery = self.discovery.through(child)
        child.access = self.access.through(child)
        child._answered = self._answered
        with self._lock:
            self._children.append(child)
        return child

    def beside(self, api_client: Any, *, label: str, renew: Callable[[], Any] | None = None) -> KubeApi:
        """A KubeApi for another API server (a workload cluster) used by the same
        run: its own connections, credentials and discovery; the run's retry
        policy, clock and cancellation. Its requests count as the run's."""
        other = KubeApi(api_client, policy=self.policy, clock=self._clock, label=label, renew=renew)
        other._cancelled, other._streams, other._streams_lock = self._cancelled, self._streams, self._streams_lock
        other._caches = self._caches
        with self._lock:
            self._children.append(other)
        return other

    def other_cluster(self, key: str, make: Callable[[], tuple[Any, Callable[[], Any] | None]], *, label: str) -> KubeApi:
        """The run's connection to another cluster named ``key``, for this task (its
        deadline is this KubeApi's). The first call makes it with ``make()`` ->
        (ApiClient, renew); every later call, from any fork, shares it."""
        with self._others_lock:
            base = self._others.get(key)
            if base is None:
                api_client, renew = make()
                base = self._others[key] = self.beside(api_client, label=label, renew=renew)
        return base.fork(deadline_from=self)

    def keep_caches(self) -> None:
        """From now on the run keeps caches (:meth:`cached_reader`: one per connection) until :meth:`stop_caches`."""
        self._caches.enabled = True

    def stop_caches(self) -> None:
        """Stop the run's caches (their watches end); later reads go to the API server."""
        self._caches.stop()

    def cached_reader(self) -> Reader:
        """Reads through this connection's cache, made once (with a fork of this connection that has no
        deadline: a cache outlives each task that reads it) and shared by every fork; where the run keeps
        no caches, or the cache cannot answer, they go to the API server (see :mod:`cache`)."""
        return Reader(self, self._caches.of(self._link, lambda: Cache(self.fork())))

    def live_reader(self) -> Reader:
        """Reads that always go to the API server (the server's word, whatever the run caches)."""
        return Reader(self, None)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def monotonic(self) -> float:
        """The transport's clock (``time.monotonic``): deadlines and waits are measured on it."""
        return self._clock()

    def sleep(self, seconds: float) -> None:
        """Pause, but wake up (and raise Cancelled) as soon as the run is cancelled."""
        if self._cancelled.wait(max(0.0, seconds)):
            raise Cancelled("the run was cancelled")

    def retry_summary(self) -> str:
        """``503 Service Unavailable x3, connection reset x1`` (empty when nothing was
        retried), for this KubeApi and the ones forked from it."""
        total = self._retry_counts()
        return ", ".join(f"{reason} x{count}" for reason, count in sorted(total.items()))

    def _retry_counts(self) -> Counter[str]:
        total = Counter(self.retries)
        for child in self._children:
            total.update(child._retry_counts())
        return total

    @property
    def total_requests(self) -> int:
        """Requests sent by this KubeApi and the ones forked from it."""
        return self.request_count + sum(child.total_requests for child in self._children)

    # -- the one place a request is sent --------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        retry: bool | None = None,
        throttle: bool = True,
        verify: Callable[[], Any] | None = None,
    ) -> Any:
        """Send one request (retrying as :mod:`retry` says) and return the parsed answer.

        ``retry`` overrides whether the request is safe to repeat (by default
        :func:`retry.idempotent`); ``throttle=False`` leaves 429 answers to the
        caller; ``verify`` is asked, before a request that may already have
        taken effect is sent again, whether it did: its answer (anything but
        None) is returned instead of resending.
        """
        method = method.upper()
        eviction = path.endswith("/eviction")
        if eviction:
            # An eviction's 429 is a PodDisruptionBudget refusing it, a 500 about budgets the handler refusing
            # a Pod two budgets select: the drain's business (asked again at its own pace), never retried here.
            throttle = False
        call = Call(method, path, [(k, v) for k, v in (query or {}).items() if v is not None and v != ""], body, content_type)
        repeatable = idempotent(method, body, content_type) if retry is None else retry
        attempts = Attempts(self, call, repeatable=repeatable, throttle=throttle, verify=verify, internal_error=not eviction)
        while True:
            attempts.start()
            failure, data = self._exchange(call, self._timeout(timeout))
            if failure is None:
                return json.loads(data) if data else None
            outcome = attempts.failed(failure, data)
            if outcome is not None:
                return outcome

    def _exchange(self, call: Call, timeout: tuple[float, float]) -> tuple[Failure | None, Any]:
        """One HTTP exchange: (None, body) on success, else (the failure, its body)."""
        try:
            response = self._open(call, timeout)
            try:
                status, data, headers = response.status, response.data, response.headers
            finally:
                response.release_conn()
        except (*TRANSPORT_ERRORS, ApiException) as exc:
            return self._raised(call, exc, timeout)
        return self._answer(status, data, headers)

    @property
    def server(self) -> str:
        """The API server's URL, for messages."""
        return str(getattr(getattr(self._api_client, "configuration", None), "host", "") or "")

    def _raised(self, call: Call, exc: BaseException, timeout: tuple[float, float] = (CONNECT_TIMEOUT, READ_TIMEOUT)) -> tuple[Failure | None, Any]:
        """What the client raising ``exc`` means: no answer (status 0; raises
        at once for a certificate the server cannot be trusted with), or the
        answer the client turned into an ApiException."""
        if not isinstance(exc, ApiException):
            reason = transport_reason(exc)
            if reason.startswith("timed out"):
                # Name the server and the limit: a silent server must be told from a slow one.
                which, seconds = ("connect", timeout[0]) if isinstance(exc, ConnectTimeoutError) else ("read", timeout[1])
                reason = f"no answer from {self.server or 'the API server'} within the {which} timeout of {seconds:g} s ({reason})"
            elif reason == "connection refused" and self.server:
                reason = f"connection refused ({self.server})"
            return Failure(0, reason, sent=not isinstance(exc, ConnectTimeoutError)), None
        if exc.status:
            return self._answer(exc.status, exc.body, getattr(exc, "headers", None) or {})
        raw = str(exc.reason or exc)
        reason = exception_reason(exc, self.server)
        if is_permanent_tls_error(raw):
            raise ApiError(0, reason, None, call.method, call.path, cluster=self.label) from None
        return Failure(0, reason, sent=not raw.startswith("SSLError")), None

    def _answer(self, status: int, data: Any, headers: Any) -> tuple[Failure | None, Any]:
        """(None, body) for a success, else (the failure, its body); the server has now answered."""
        self._answered = True
        if 200 <= status <= 299:
            return None, data
        return Failure(status, http_reason(status), retry_after=parse_retry_after(_header(headers, "Retry-After"))), data

    def _window_end(self, started: float) -> float:
        end = self.policy.window_end(started, self.deadline)
        if not self._answered:
            end = min(end, started + FIRST_CONTACT_BUDGET)
        return end

    def _timeout(self, timeout: float | None) -> tuple[float, float]:
        if timeout is not None:
            return (CONNECT_TIMEOUT, timeout)
        read = READ_TIMEOUT
        if not self._answered:
            # Until the server has answered once, it may be one that accepts connections and never
            # answers: kubernetes.core's factory may not have asked it anything (its discovery is
            # cached in a file per server URL), so the first request keeps to the first-contact budget.
            read = FIRST_CONTACT_BUDGET
        if self.deadline is not None:
            read = min(read, max(5.0, self.deadline - self._clock()))
        return (CONNECT_TIMEOUT, read)

    def _open(self, call: Call, timeout: Any) -> Any:
        """Start one HTTP exchange through the kubernetes client (auth, TLS,
        proxy, default headers); returns the urllib3 response, body unread.

        Supports both generations of the generated client: the current one
        (``param_serialize``; kubernetes >= 35) and the older ``call_api``.
        """
        client = self._api_client
        headers = {"Accept": "application/json"}
        if call.body is not None:
            headers["Content-Type"] = call.content_type or "application/json"
        if hasattr(client, "param_serialize"):
            request = client.param_serialize(
                call.method, call.path, query_params=call.params, header_params=headers, body=call.body, auth_settings=["BearerToken"]
            )
            return client.call_api(*request, _request_timeout=timeout).response
        path = call.path + ("?" + urlencode(call.params) if call.params else "")
        response = client.call_api(
            path,
            call.method,
            header_params=headers,
            body=call.body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=False,
            _request_timeout=timeout,
        )
        return response[0]

    # -- watch ---------------------------------------------------------------
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
        """Stream the watch events (``{"type", "object"}``) of a collection
        until the server ends the watch after ``timeout`` seconds.

        Opening the watch is retried like any read. A stream that breaks
        midway raises :class:`ApiError` with status 0; an expired
        resourceVersion arrives as an ``ERROR`` event (or a 410 answer).
        :func:`watch.watch_until` resumes from both.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "fieldSelector": field_selector,
            "labelSelector": label_selector,
            "timeoutSeconds": timeout,
            "allowWatchBookmarks": "true" if bookmarks else None,
        }
        call = Call("GET", path, [(k, v) for k, v in query.items() if v is not None and v != ""], None, None)
        response = self._open_watch(call, timeout)
        with self._streams_lock:
            self._streams.add(response)
        if self._cancelled.is_set():
            _cut(response)
        finished = False
        try:
            buffer = b""
            try:
                for chunk in response.stream(4096, decode_content=True):
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        if line.strip():
                            yield json.loads(line)
            except (*TRANSPORT_ERRORS, ValueError) as exc:
                raise ApiError(0, f"watch stream broken: {transport_reason(exc)}", None, "GET", path, cluster=self.label) from None
            finished = True
        finally:
            if not finished:
                # Unread data must not go back into the pool with the connection.
                response.close()
            response.release_conn()
            with self._streams_lock:
                self._streams.discard(response)

    def _open_watch(self, call: Call, timeout: int) -> Any:
        attempts = Attempts(self, call, repeatable=True)
        while True:
            attempts.start()
            try:
                response = self._open(call, (CONNECT_TIMEOUT, timeout + WATCH_SLACK))
            except (*TRANSPORT_ERRORS, ApiException) as exc:
                failure, data = self._raised(call, exc, (CONNECT_TIMEOUT, timeout + WATCH_SLACK))
            else:
                if 200 <= response.status <= 299:
                    self._answered = True
                    return response
                try:
                    failure, data = self._answer(response.status, response.data, response.headers)
                finally:
                    response.release_conn()
            attempts.failed(failure, data)

    # -- conveniences ----------------------------------------------------------
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


def _cut(response: Any) -> None:
    """Wake a thread blocked reading a watch: shut its socket down (closing alone does not wake a read)."""
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _header(headers: Any, name: str) -> str | None:
    return headers.get(name) if headers and hasattr(headers, "get") else None
