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

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.access import Access
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import CONNECT_TIMEOUT, Attempts, Call, Link
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Cache, Reader
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.discovery import Discovery
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.flow import Flow
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.http import events, exchange
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import Failure, RetryPolicy, idempotent
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.session import Session
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.verbs import Verbs

# A watch reads for its own timeout plus this slack.
WATCH_SLACK = 10.0


class KubeApi(Verbs):
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
        session: Session | None = None,
    ):
        self._link = Link(api_client, renew)
        # Names the server in messages when it is not the task's own ("the workload cluster ns/c1").
        self.label = label
        self._deadline_from: KubeApi | None = None
        self._deadline: float | None = None
        self._lock = threading.Lock()
        # What the run's KubeApis share: clock, retry policy, cancellation, other clusters, caches.
        self._session = session or Session(clock, policy or RetryPolicy())
        self.policy = self._session.policy
        self._clock = self._session.clock
        self._children: list[KubeApi] = []
        self._answered = False
        self.request_count = 0
        self.retries: Counter[str] = Counter()
        self.discovery = Discovery(self)
        # What this connection's identity may do (SelfSubjectAccessReview), asked once per run.
        self.access = Access(self)

    # -- lifecycle -----------------------------------------------------------
    def cancel(self) -> None:
        """Send no request from now on (a signal handler calls this), and cut every
        open watch so that nothing waits on one: the waits end at once."""
        self._session.cancel()

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
        child = KubeApi(None, label=self.label, session=self._session)
        child._link = self._link
        child._deadline = deadline
        child._deadline_from = deadline_from
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
        other = KubeApi(api_client, label=label, renew=renew, session=self._session)
        with self._lock:
            self._children.append(other)
        return other

    def other_cluster(self, key: str, make: Callable[[], tuple[Any, Callable[[], Any] | None]], *, label: str) -> KubeApi:
        """The run's connection to another cluster named ``key``, for this task (its
        deadline is this KubeApi's). The first call makes it with ``make()`` ->
        (ApiClient, renew); every later call, from any fork, shares it."""
        session = self._session
        with session.others_lock:
            base = session.others.get(key)
            if base is None:
                api_client, renew = make()
                base = session.others[key] = self.beside(api_client, label=label, renew=renew)
        return base.fork(deadline_from=self)

    def keep_caches(self) -> None:
        """From now on the run keeps caches (:meth:`cached_reader`: one per connection) until :meth:`stop_caches`."""
        self._session.caches.enabled = True

    def stop_caches(self) -> None:
        """Stop the run's caches (their watches end); later reads go to the API server."""
        self._session.caches.stop()

    def cached_reader(self) -> Reader:
        """Reads through this connection's cache, made once (with a fork of this connection that has no
        deadline: a cache outlives each task that reads it) and shared by every fork; where the run keeps
        no caches, or the cache cannot answer, they go to the API server (see :mod:`cache`)."""
        return Reader(self, self._session.caches.of(self._link, lambda: Cache(self.fork())))

    def flow_control(self, most: int) -> Flow:
        """The run's flow control (:meth:`Session.flow_control`): ``most`` units of work at most, fewer while the server lags."""
        return self._session.flow_control(most)

    def live_reader(self) -> Reader:
        """Reads that always go to the API server (the server's word, whatever the run caches)."""
        return Reader(self, None)

    @property
    def cancelled(self) -> bool:
        return self._session.cancelled.is_set()

    def monotonic(self) -> float:
        """The transport's clock (``time.monotonic``): deadlines and waits are measured on it."""
        return self._clock()

    def sleep(self, seconds: float) -> None:
        """Pause, but wake up (and raise Cancelled) as soon as the run is cancelled."""
        self._session.sleep(seconds)

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
        :func:`retry.idempotent`); ``throttle=False`` leaves a PodDisruptionBudget's 429
        to the caller (the server's own throttling is retried all the same); ``verify`` is asked, before a request that may already have
        taken effect is sent again, whether it did: its answer (anything but
        None) is returned instead of resending.
        """
        method = method.upper()
        eviction = path.endswith("/eviction")
        if eviction:
            # An eviction's 429 naming a budget is a PodDisruptionBudget refusing it, a 500 about budgets the handler
            # refusing a Pod two budgets select: the drain's business (asked again at its own pace), never retried here.
            throttle = False
        call = Call(method, path, [(k, v) for k, v in (query or {}).items() if v is not None and v != ""], body, content_type)
        repeatable = idempotent(method, body, content_type) if retry is None else retry
        attempts = Attempts(self, call, repeatable=repeatable, throttle=throttle, verify=verify, internal_error=not eviction)
        while True:
            attempts.start()
            failure, data = self._exchange(call, attempts.timeout(timeout))
            if failure is None:
                return json.loads(data) if data else None
            outcome = attempts.failed(failure, data)
            if outcome is not None:
                return outcome

    def _exchange(self, call: Call, timeout: tuple[float, float], *, stream: bool = False) -> tuple[Failure | None, Any]:
        """One HTTP exchange (:func:`http.exchange`): (None, body) on success, else (the failure, its body)."""
        failure, data, answered = self._session.timed(exchange, self._api_client, call, timeout, self.server, self.label, stream=stream)
        self._answered = self._answered or answered
        return failure, data

    @property
    def server(self) -> str:
        """The API server's URL, for messages."""
        return str(getattr(getattr(self._api_client, "configuration", None), "host", "") or "")

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
        self._session.opened(response)
        finished = False
        try:
            yield from events(response, path, self.label)
            finished = True
        finally:
            if not finished:
                # Unread data must not go back into the pool with the connection.
                response.close()
            response.release_conn()
            self._session.closed(response)

    def _open_watch(self, call: Call, timeout: int) -> Any:
        attempts = Attempts(self, call, repeatable=True)
        while True:
            attempts.start()
            failure, response = self._exchange(call, (CONNECT_TIMEOUT, timeout + WATCH_SLACK), stream=True)
            if failure is None:
                return response
            attempts.failed(failure, response)
