# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""When the transport retries a request, and how long it waits (pure).

API servers restart, load balancers drop idle connections, etcd times out and
API Priority and Fairness throttles: none of that should end a drain that has
minutes left. A request is retried, with bounded exponential backoff and
jitter, when its failure is transient and sending it again is safe:

- no answer at all (connection refused, reset, timed out): always when the
  request never left (the connection could not be opened); otherwise only
  when repeating it is harmless (see :func:`idempotent`) or the caller can
  check whether the first one took effect;
- 429 Too Many Requests (throttling; the request was not processed), waiting
  at least what ``Retry-After`` says - except where the caller handles 429
  itself (an eviction refused by a PodDisruptionBudget);
- 500, 502, 503, 504 under the same rule as a lost answer: the server may
  have applied the request before failing.

Retries stop at the task's own deadline (or, for tasks without one, after
``budget`` seconds), never later.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass

THROTTLED = 429
SERVER_ERRORS = (500, 502, 503, 504)
INTERNAL_ERROR = 500
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml")


@dataclass(frozen=True)
class Failure:
    """One failed attempt: the HTTP status (0 when no answer came), whether the
    request may have reached the server, and the server's Retry-After."""

    status: int
    reason: str
    sent: bool = True
    retry_after: float | None = None

    @property
    def may_be_applied(self) -> bool:
        """Whether the server may have carried the request out although it failed."""
        if self.status == 0:
            return self.sent
        return self.status in SERVER_ERRORS


def idempotent(method: str, body: object = None, content_type: str | None = None) -> bool:
    """Whether sending the request twice has the effect of sending it once.

    Reads, replacements and deletions are; so are merge patches (they set
    values). A JSON patch is only when it carries a ``test`` operation: the
    guard makes a second copy fail instead of applying twice. A POST creates
    something new each time, unless the caller says otherwise.
    """
    method = method.upper()
    if method in ("GET", "HEAD", "PUT", "DELETE"):
        return True
    if method == "PATCH":
        if (content_type or MERGE_PATCHES[0]) in MERGE_PATCHES:
            return True
        return isinstance(body, list) and any(isinstance(op, dict) and op.get("op") == "test" for op in body)
    return False


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class RetryPolicy:
    """Bounded exponential backoff with jitter.

    The n-th retry waits between half and all of ``min(cap, base * factor**n)``
    seconds (at least ``Retry-After``, up to ``max_retry_after``), so many
    clients hit by one outage do not come back in step.
    """

    def __init__(
        self,
        *,
        base: float = 0.2,
        factor: float = 2.0,
        cap: float = 5.0,
        budget: float = 60.0,
        max_retry_after: float = 30.0,
        rng: random.Random | None = None,
    ):
        self.base = base
        self.factor = factor
        self.cap = cap
        self.budget = budget
        self.max_retry_after = max_retry_after
        self.rng = rng or random.Random()

    def retryable(self, failure: Failure, *, idempotent: bool, throttle: bool = True, verifiable: bool = False, internal_error: bool = True) -> bool:
        """Whether the failure is transient and repeating the request is safe.
        ``internal_error=False``: a 500 is the server's considered answer (an
        eviction's handler refusing a Pod two budgets select), not retried."""
        if failure.status == 0:
            return not failure.sent or idempotent or verifiable
        if failure.status == THROTTLED:
            return throttle
        if failure.status == INTERNAL_ERROR and not internal_error:
            return False
        if failure.status in SERVER_ERRORS:
            return idempotent or verifiable
        return False

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first)."""
        ceiling = min(self.cap, self.base * self.factor**retry)
        wait = self.rng.uniform(ceiling / 2, ceiling)
        if retry_after:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait

    def window_end(self, started: float, deadline: float | None) -> float:
        """When retrying a request that started at ``started`` must stop: the
        task's deadline when it has one, else ``budget`` seconds later."""
        return deadline if deadline is not None else started + self.budget
