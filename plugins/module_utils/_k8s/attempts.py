# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""How one request of a :class:`client.KubeApi` is sent again: its attempts,
counted and paused as the retry policy (:mod:`retry`) says, never past the
task's deadline; and the credentials they send with (:class:`Link`), read again
once after a 401.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled, describe_path, json_body
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import THROTTLED, Failure

if TYPE_CHECKING:
    from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

# (connect, read) seconds of one request.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
# A run that has never reached the server (a mistyped host, nothing listening)
# stops retrying sooner than one that lost a server it was talking to.
FIRST_CONTACT_BUDGET = 10.0


class Call:
    """One request as sent: method, path, query parameters, body and its content type."""

    __slots__ = ("body", "content_type", "method", "params", "path")

    def __init__(self, method: str, path: str, params: list, body: Any, content_type: str | None):
        self.method = method
        self.path = path
        self.params = params
        self.body = body
        self.content_type = content_type


class Attempts:
    """The attempts of one request: counts them, and after a failure either
    waits and lets the caller send again, or raises the error."""

    def __init__(
        self,
        api: KubeApi,
        call: Call,
        *,
        repeatable: bool,
        throttle: bool = True,
        verify: Callable[[], Any] | None = None,
        internal_error: bool = True,
    ):
        self.api = api
        self.call = call
        self.repeatable = repeatable
        self.throttle = throttle
        self.internal_error = internal_error
        self.verify = verify
        self.started = api.monotonic()
        self.count = 0
        self.ambiguous = False
        self.renewed = False

    def window_end(self) -> float:
        """When the attempts give up: the policy's window within the task's deadline; before the server has
        answered once, the first-contact budget."""
        end = self.api.policy.window_end(self.started, self.api.deadline)
        if not self.api._answered:
            end = min(end, self.started + FIRST_CONTACT_BUDGET)
        return end

    def timeout(self, timeout: float | None) -> tuple[float, float]:
        """(connect, read) seconds of the next attempt: ``timeout`` when given, else the read timeout within the task's deadline."""
        if timeout is not None:
            return (CONNECT_TIMEOUT, timeout)
        api, read = self.api, READ_TIMEOUT
        if not api._answered:
            # Until the server has answered once, it may be one that accepts connections and never
            # answers: kubernetes.core's factory may not have asked it anything (its discovery is
            # cached in a file per server URL), so the first request keeps to the first-contact budget.
            read = FIRST_CONTACT_BUDGET
        if api.deadline is not None:
            read = min(read, max(5.0, api.deadline - api.monotonic()))
        return (CONNECT_TIMEOUT, read)

    def start(self) -> None:
        api = self.api
        if api.cancelled:
            raise Cancelled(f"the run was cancelled before {self.call.method} {describe_path(self.call.path)}")
        self.count += 1
        self.generation = api._link.generation
        with api._lock:
            api.request_count += 1

    def failed(self, failure: Failure, data: Any) -> Any:
        """Wait before the next attempt (returning None), return what ``verify``
        found when an earlier attempt took effect, or raise the ApiError."""
        api = self.api
        if failure.status == 401 and not self.renewed and api._link.renew(self.generation):
            # The connection's credentials were read again (a rotated kubeconfig Secret): send once more.
            self.renewed = True
            return None
        # Only a 500 that answers about the Pod's budgets is the eviction handler's considered answer
        # (two budgets select it); any other 500 (etcd timing out, say) is a lost answer as ever.
        internal_error = self.internal_error or not _names_a_budget(data)
        # Only a 429 that names a budget is a budget's refusal (the caller's business); any other 429 is
        # the server throttling (Priority and Fairness, max-requests-inflight): it processed nothing, so
        # it is asked again like any throttled request, whoever said throttle=False.
        throttle = self.throttle or (failure.status == THROTTLED and not budget_refusal(data))
        retryable = api.policy.retryable(
            failure, idempotent=self.repeatable, throttle=throttle, verifiable=self.verify is not None, internal_error=internal_error
        )
        if not retryable:
            raise self.error(failure, data)
        wait = api.policy.delay(self.count - 1, failure.retry_after)
        if api.monotonic() + wait >= self.window_end():
            raise self.error(failure, data, out_of_time=api.deadline is not None and api.monotonic() + wait >= api.deadline)
        with api._lock:  # concurrent requests (a batch of evictions) share the counter
            api.retries[retry_label(failure)] += 1
        self.ambiguous = self.ambiguous or failure.may_be_applied
        api.sleep(wait)
        if failure.may_be_applied and self.verify is not None:
            return self.verify()
        return None

    def error(self, failure: Failure, data: Any, out_of_time: bool = False) -> ApiError:
        return ApiError(
            failure.status,
            failure.reason,
            json_body(data),
            self.call.method,
            self.call.path,
            retry_after=failure.retry_after,
            attempts=self.count,
            after_ambiguous=self.ambiguous,
            elapsed=self.api.monotonic() - self.started,
            out_of_time=out_of_time,
            cluster=self.api.label,
        )


class Link:
    """The ApiClient a KubeApi (and every fork of it) sends through, and how to
    make a new one when the server stops accepting its credentials.

    ``renew()`` returns a fresh ApiClient (say, from a kubeconfig Secret read
    again after a rotation) or None. It is asked at most once per generation of
    the link: the requests that failed with the old credentials all send once
    more with the new ones, and the Secret is read once, not once per request.
    """

    def __init__(self, api_client: Any, renew: Callable[[], Any] | None = None):
        self.client = api_client
        self._renew = renew
        self._lock = threading.Lock()
        self.generation = 0

    def renew(self, generation: int) -> bool:
        """After a 401 on a request sent with ``generation``: True when the request
        should be sent again (the credentials are new, or were renewed meanwhile)."""
        if self._renew is None:
            return False
        with self._lock:
            if self.generation != generation:
                return True
            fresh = self._renew()
            self._renew = None  # once per run: a second 401 is the answer
            if fresh is None:
                return False
            self.client = fresh
            self.generation += 1
            return True


def retry_label(failure: Failure) -> str:
    if failure.status:
        return f"{failure.status} {failure.reason}".strip()
    return failure.reason.split(" (", 1)[0]


def _names_a_budget(data: Any) -> bool:
    """Whether an answer's body speaks of PodDisruptionBudgets."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
    return "PodDisruptionBudget" in text


def budget_refusal(data: Any) -> bool:
    """Whether a 429's body is a PodDisruptionBudget's refusal of an eviction (the eviction API's
    "Cannot evict pod as it would violate the pod's disruption budget.", its causes DisruptionBudget),
    not the server throttling (Priority and Fairness: "Too many requests, please try again later.")."""
    text = (data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")).lower()
    return "disruption budget" in text or "disruptionbudget" in text


def overloaded(failure: Failure, data: Any) -> bool:
    """Whether a failed attempt says the server is not keeping up: throttled (429, but a PodDisruptionBudget's
    refusal of an eviction), unavailable or timing out (503, 504), or no answer within the read timeout."""
    if failure.status == THROTTLED:
        return not budget_refusal(data)
    return failure.status in (503, 504) or (failure.status == 0 and failure.reason.startswith("no answer from") and "read timeout" in failure.reason)
