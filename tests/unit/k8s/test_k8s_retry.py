"""When the transport retries and how long it waits (``_k8s/retry.py``, pure)."""

from __future__ import annotations

import email.utils
import random

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import Failure, RetryPolicy, idempotent, parse_retry_after

GUARDED = [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"}, {"op": "remove", "path": "/metadata/finalizers/0"}]
UNGUARDED = [{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/x"}]

# -- idempotent ------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "get", "HEAD", "PUT", "DELETE"])
def test_reads_replacements_and_deletions_are_idempotent(method) -> None:
    assert idempotent(method)


@pytest.mark.parametrize("content_type", [None, MERGE_PATCH, STRATEGIC_PATCH, "application/apply-patch+yaml"])
def test_merge_patches_are_idempotent(content_type) -> None:
    assert idempotent("PATCH", {"metadata": {"labels": {"a": "b"}}}, content_type)


def test_a_json_patch_is_idempotent_only_with_a_test_operation() -> None:
    assert idempotent("PATCH", GUARDED, JSON_PATCH)
    assert not idempotent("PATCH", UNGUARDED, JSON_PATCH)
    assert not idempotent("PATCH", [], JSON_PATCH)
    assert not idempotent("PATCH", {"op": "test"}, JSON_PATCH), "a JSON patch is a list of operations"
    assert not idempotent("PATCH", ["test"], JSON_PATCH)


def test_a_post_is_not_idempotent() -> None:
    assert not idempotent("POST", {"metadata": {"name": "x"}})
    assert not idempotent("post")


# -- retryable ---------------------------------------------------------------------

NOT_SENT = Failure(0, "connection refused", sent=False)
LOST = Failure(0, "connection reset")


def retryable(failure: Failure, **kwargs) -> bool:
    return RetryPolicy().retryable(failure, **kwargs)


@pytest.mark.parametrize("idem", [True, False])
@pytest.mark.parametrize("verifiable", [True, False])
def test_a_request_that_never_left_is_always_retried(idem, verifiable) -> None:
    assert retryable(NOT_SENT, idempotent=idem, verifiable=verifiable)
    assert not NOT_SENT.may_be_applied


@pytest.mark.parametrize(("idem", "verifiable", "expected"), [(True, False, True), (False, True, True), (False, False, False), (True, True, True)])
def test_a_lost_answer_is_retried_when_repeating_is_safe_or_checkable(idem, verifiable, expected) -> None:
    assert retryable(LOST, idempotent=idem, verifiable=verifiable) is expected
    assert LOST.may_be_applied


@pytest.mark.parametrize("idem", [True, False])
def test_throttling_is_retried_unless_the_caller_handles_429(idem) -> None:
    throttled = Failure(429, "Too Many Requests", retry_after=3)
    assert retryable(throttled, idempotent=idem)
    assert retryable(throttled, idempotent=idem, throttle=True)
    assert not retryable(throttled, idempotent=idem, throttle=False)
    assert not throttled.may_be_applied, "a throttled request was not processed"


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_follow_the_lost_answer_rule(status) -> None:
    failure = Failure(status, "x")
    assert failure.may_be_applied
    assert retryable(failure, idempotent=True)
    assert retryable(failure, idempotent=False, verifiable=True)
    assert not retryable(failure, idempotent=False)


def test_a_500_the_caller_takes_as_an_answer_is_not_retried() -> None:
    failure = Failure(500, "This pod has more than one PodDisruptionBudget")
    assert not retryable(failure, idempotent=True, verifiable=True, internal_error=False)
    assert retryable(Failure(503, "x"), idempotent=True, verifiable=True, internal_error=False), "only 500"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 409, 410, 422, 501])
def test_client_errors_and_other_statuses_are_never_retried(status) -> None:
    failure = Failure(status, "x")
    assert not retryable(failure, idempotent=True, verifiable=True)
    assert not failure.may_be_applied


# -- delay -------------------------------------------------------------------------


def policy(seed: int = 1, **kwargs) -> RetryPolicy:
    return RetryPolicy(rng=random.Random(seed), **kwargs)


@pytest.mark.parametrize("seed", range(5))
def test_the_nth_retry_waits_between_half_and_all_of_its_ceiling(seed) -> None:
    backoff = policy(seed, base=0.2, factor=2.0, cap=5.0)
    for retry in range(10):
        ceiling = min(5.0, 0.2 * 2.0**retry)
        for _sample in range(20):
            assert ceiling / 2 <= backoff.delay(retry) <= ceiling


def test_delays_are_capped() -> None:
    backoff = policy(cap=1.5)
    assert max(backoff.delay(30) for _sample in range(100)) <= 1.5
    assert min(backoff.delay(30) for _sample in range(100)) >= 0.75


def test_the_same_seed_gives_the_same_jitter() -> None:
    assert [policy(7).delay(n) for n in range(6)] == [policy(7).delay(n) for n in range(6)]


def test_retry_after_is_a_floor_capped_by_max_retry_after() -> None:
    backoff = policy(max_retry_after=30.0)
    assert backoff.delay(0, retry_after=4.0) == 4.0
    assert backoff.delay(0, retry_after=120.0) == 30.0
    # A Retry-After shorter than the backoff does not shorten it.
    assert 2.5 <= backoff.delay(10, retry_after=0.5) <= 5.0
    assert 0.1 <= backoff.delay(0, retry_after=None) <= 0.2


# -- Retry-After ----------------------------------------------------------------------


def test_retry_after_in_seconds() -> None:
    assert parse_retry_after("5") == 5.0
    assert parse_retry_after(" 12 ") == 12.0
    assert parse_retry_after("0") == 0.0


def test_retry_after_as_an_http_date() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(email.utils.formatdate(now + 7, usegmt=True), now=now) == 7.0
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0, "a date in the past means now"


@pytest.mark.parametrize("value", [None, "", "soon", "-1", "1.5"])
def test_unreadable_retry_after_is_none(value) -> None:
    assert parse_retry_after(value) is None


# -- the retry window -----------------------------------------------------------------


def test_retries_end_at_the_deadline_or_after_the_budget() -> None:
    backoff = RetryPolicy(budget=60.0)
    assert backoff.window_end(100.0, 130.0) == 130.0
    assert backoff.window_end(100.0, 500.0) == 500.0, "a task's own deadline wins over the budget"
    assert backoff.window_end(100.0, None) == 160.0
