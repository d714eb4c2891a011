"""The transport's request loop (``_k8s/client.py`` ``KubeApi``), driven by a
scripted ApiClient on a fake clock: what is retried, what is not, when
retrying stops, and what the conveniences make of the answers. Whether the
real client and server behave so is proven in tests/integration."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from fake_api_client import FakeApiClient, LegacyApiClient, Response, make_api, ok, read_timeout, refused, reset, ssl_error, status

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import FIRST_CONTACT_BUDGET, READ_TIMEOUT
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import JSON_PATCH
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import RetryPolicy

MACHINE = "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines/m1"
MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machines"
PODS = "/api/v1/namespaces/ns/pods"
EVICTION = "/api/v1/namespaces/ns/pods/web-0/eviction"
OBJ = {"metadata": {"name": "m1", "resourceVersion": "7"}}


# -- reads ------------------------------------------------------------------------------


def test_a_get_survives_resets_and_503s_and_returns_the_body() -> None:
    api, client, clock = make_api()
    client.script(reset(), status(503, "etcdserver: request timed out"), reset(), ok(OBJ))
    assert api.get(MACHINE) == OBJ
    assert client.requests == [("GET", MACHINE)] * 4
    assert api.request_count == 4
    assert len(clock.sleeps) == 3
    assert api.retries == {"connection reset": 2, "503 Service Unavailable": 1}
    assert api.retry_summary() == "503 Service Unavailable x1, connection reset x2"


def test_a_get_of_a_missing_object_is_none_and_not_retried() -> None:
    api, client, clock = make_api()
    client.script(status(404, 'machines "m1" not found', "NotFound"))
    assert api.get(MACHINE) is None
    assert api.request_count == 1
    assert clock.sleeps == []
    assert api.retry_summary() == ""


def test_the_query_and_headers_sent() -> None:
    api, client, _clock = make_api()
    client.script(ok({"items": []}))
    api.request("GET", PODS, query={"labelSelector": "app=web", "fieldSelector": None, "continue": ""})
    sent = client.sent[0]
    assert sent.params == {"labelSelector": "app=web"}, "unset parameters are left out"
    assert sent.headers == {"Accept": "application/json"}
    client.script(ok(OBJ))
    api.patch(MACHINE, [{"op": "test", "path": "/a", "value": 1}], content_type=JSON_PATCH, dry_run=True)
    assert client.sent[1].headers["Content-Type"] == JSON_PATCH
    assert client.sent[1].params == {"dryRun": "All"}


def test_the_older_generated_client_gets_the_query_in_the_path() -> None:
    api, client, _clock = make_api(LegacyApiClient())
    client.script(reset(), ok(OBJ))
    assert api.request("GET", MACHINES, query={"labelSelector": "a=b", "limit": 500}) == OBJ
    assert client.sent[1].params == {"labelSelector": "a%3Db", "limit": "500"}
    assert client.sent[1].extra["_preload_content"] is False


def test_read_timeouts_follow_the_deadline() -> None:
    api, client, clock = make_api()
    client.always = lambda _sent: ok({})
    api.request("GET", MACHINE)
    assert client.sent[-1].timeout[1] == FIRST_CONTACT_BUDGET, "until the server has answered once"
    api.request("GET", MACHINE)
    assert client.sent[-1].timeout[1] == READ_TIMEOUT
    api.fork(deadline=clock() + 20).request("GET", MACHINE)
    assert client.sent[-1].timeout[1] == 20
    short = api.fork(deadline=clock() + 1)
    short.request("GET", MACHINE)
    assert client.sent[-1].timeout[1] == 5.0, "never less than 5 s"
    short.request("GET", MACHINE, timeout=3)
    assert client.sent[-1].timeout[1] == 3


# -- writes that may have landed ------------------------------------------------------------


@pytest.mark.parametrize("failure", [read_timeout, reset, lambda: status(503), lambda: status(500)])
def test_a_post_is_not_resent_after_an_ambiguous_failure(failure) -> None:
    api, client, clock = make_api()
    client.script(failure())
    with pytest.raises(ApiError) as caught:
        api.create(MACHINES, OBJ)
    assert client.requests == [("POST", MACHINES)]
    assert caught.value.attempts == 1
    assert not caught.value.after_ambiguous
    assert clock.sleeps == []


def test_with_verify_a_landed_post_is_not_resent() -> None:
    api, client, _clock = make_api()
    client.script(read_timeout(), ok(OBJ))
    created = api.create(MACHINES, OBJ, verify=lambda: api.get(MACHINE))
    assert created == OBJ
    assert client.requests == [("POST", MACHINES), ("GET", MACHINE)], "verified, not resent"
    assert api.request_count == 2


def test_with_verify_a_post_that_did_not_land_is_resent() -> None:
    api, client, _clock = make_api()
    client.script(status(503), status(404), ok(OBJ, 201))
    assert api.create(MACHINES, OBJ, verify=lambda: api.get(MACHINE)) == OBJ
    assert client.requests == [("POST", MACHINES), ("GET", MACHINE), ("POST", MACHINES)]


@pytest.mark.parametrize("failure", [refused, lambda: ssl_error("EOF occurred in violation of protocol (_ssl.c:2427)")])
def test_a_request_that_never_left_is_retried_even_for_a_post(failure) -> None:
    api, client, _clock = make_api()
    client.script(failure(), ok(OBJ, 201))
    assert api.create(MACHINES, OBJ) == OBJ
    assert client.requests == [("POST", MACHINES)] * 2


def test_a_guarded_json_patch_is_resent_and_an_unguarded_one_is_not() -> None:
    api, client, _clock = make_api()
    guarded = [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"}, {"op": "remove", "path": "/metadata/finalizers/0"}]
    client.script(reset(), ok(OBJ))
    assert api.patch(MACHINE, guarded, content_type=JSON_PATCH) == OBJ
    client.script(reset())
    with pytest.raises(ApiError):
        api.patch(MACHINE, [{"op": "add", "path": "/metadata/finalizers/-", "value": "x"}], content_type=JSON_PATCH)
    assert api.request_count == 3


def test_after_ambiguous_is_set_when_an_earlier_attempt_may_have_been_applied() -> None:
    api, client, _clock = make_api()
    client.script(status(503), status(409, "the object has been modified", "Conflict"))
    with pytest.raises(ApiError) as caught:
        api.replace(MACHINE, OBJ)
    assert caught.value.status == 409
    assert caught.value.after_ambiguous
    assert caught.value.attempts == 2

    client.script(refused(), status(409, "the object has been modified", "Conflict"))
    with pytest.raises(ApiError) as caught:
        api.replace(MACHINE, OBJ)
    assert not caught.value.after_ambiguous, "a request that never left was not applied"

    client.script(status(409))
    with pytest.raises(ApiError) as caught:
        api.replace(MACHINE, OBJ)
    assert not caught.value.after_ambiguous


def test_delete_is_true_for_a_404_after_an_ambiguous_attempt() -> None:
    api, client, _clock = make_api()
    client.script(read_timeout(), status(404))
    assert api.delete(MACHINE) is True
    client.script(status(404))
    assert api.delete(MACHINE) is False
    client.script(refused(), status(404))
    assert api.delete(MACHINE) is False, "the first attempt never left: someone else deleted it"
    client.script(ok({"kind": "Status", "status": "Success"}))
    assert api.delete(MACHINE, body={"preconditions": {"uid": "u"}}, dry_run=True) is True
    assert client.sent[-1].body == {"preconditions": {"uid": "u"}, "dryRun": ["All"]}


def test_create_exists_ok_returns_the_existing_object() -> None:
    api, client, _clock = make_api()
    existing = {**OBJ, "spec": {"by": "someone else"}}
    client.script(status(409, 'machines "m1" already exists', "AlreadyExists"), ok(existing))
    assert api.create(MACHINES, OBJ, exists_ok=True) == existing
    assert client.requests == [("POST", MACHINES), ("GET", MACHINE)]


def test_create_exists_ok_is_safe_to_resend() -> None:
    api, client, _clock = make_api()
    client.script(read_timeout(), status(409, "", "AlreadyExists"), ok(OBJ))
    assert api.create(MACHINES, OBJ, exists_ok=True) == OBJ
    assert client.requests == [("POST", MACHINES), ("POST", MACHINES), ("GET", MACHINE)]


def test_create_conflict_without_exists_ok_raises() -> None:
    api, client, _clock = make_api()
    client.script(status(409, "", "AlreadyExists"))
    with pytest.raises(ApiError) as caught:
        api.create(MACHINES, OBJ)
    assert caught.value.status == 409


# -- throttling ------------------------------------------------------------------------------


def test_an_eviction_429_is_never_retried() -> None:
    api, client, clock = make_api()
    client.script(status(429, "Cannot evict pod as it would violate the pod's disruption budget.", Retry_After="1"))
    with pytest.raises(ApiError) as caught:
        api.create(EVICTION, {"metadata": {"name": "web-0", "namespace": "ns"}}, retry=True)
    assert caught.value.status == 429
    assert caught.value.retry_after == 1.0
    assert api.request_count == 1
    assert clock.sleeps == []


def test_an_eviction_500_is_the_servers_answer_and_never_retried() -> None:
    api, client, clock = make_api()
    two_budgets = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    client.script(status(500, two_budgets))
    with pytest.raises(ApiError) as caught:
        api.create(EVICTION, {"metadata": {"name": "web-0", "namespace": "ns"}}, verify=lambda: None)
    assert (caught.value.status, caught.value.message) == (500, two_budgets)
    assert api.request_count == 1 and clock.sleeps == [], "the drain asks again at its own pace"


def test_an_eviction_500_about_something_else_is_a_lost_answer_and_retried() -> None:
    api, client, _clock = make_api()
    client.script(status(500, "etcdserver: request timed out"), ok({"kind": "Status", "status": "Success"}, 201))
    api.create(EVICTION, {"metadata": {"name": "web-0", "namespace": "ns"}}, verify=lambda: None)
    assert api.request_count == 2


def test_an_eviction_503_is_a_lost_answer_and_retried_after_checking() -> None:
    api, client, _clock = make_api()
    client.script(status(503, "etcdserver: request timed out"), ok({"kind": "Status", "status": "Success"}, 201))
    checked = []
    api.create(EVICTION, {"metadata": {"name": "web-0", "namespace": "ns"}}, verify=lambda: checked.append(1))
    assert api.request_count == 2 and checked == [1]


def test_any_other_429_honours_retry_after() -> None:
    api, client, clock = make_api()
    client.script(status(429, "too many requests", Retry_After="7"), ok(OBJ, 201))
    assert api.create(MACHINES, OBJ) == OBJ, "a throttled request was not processed: even a POST is resent"
    assert clock.sleeps == [7.0]
    assert api.retries == {"429 Too Many Requests": 1}


def test_throttle_false_leaves_a_budgets_429_to_the_caller() -> None:
    api, client, _clock = make_api()
    client.script(status(429, "Cannot evict pod as it would violate the pod's disruption budget.", Retry_After="1"))
    with pytest.raises(ApiError):
        api.request("GET", MACHINE, throttle=False)


def test_an_eviction_throttled_by_the_server_is_asked_again() -> None:
    """Priority and Fairness (or max-requests-inflight) refuses a request it processed nothing of: an eviction
    it refuses is no budget's refusal, and is sent again after Retry-After, not handed to the drain as a failure."""
    api, client, clock = make_api()
    client.script(status(429, "Too many requests, please try again later.", "TooManyRequests", Retry_After="1"), ok({"kind": "Status"}, 201))
    api.create(EVICTION, {"metadata": {"name": "web-0", "namespace": "ns"}}, verify=lambda: None)
    assert api.request_count == 2
    assert clock.sleeps == [1.0]
    assert api.retries == {"429 Too Many Requests": 1}


def test_a_retry_after_longer_than_the_deadline_gives_up_at_once() -> None:
    api, client, clock = make_api(deadline=5)
    client.script(status(429, Retry_After="10"))
    with pytest.raises(ApiError) as caught:
        api.get(MACHINE)
    assert caught.value.status == 429
    assert clock.sleeps == []


# -- when retrying stops ------------------------------------------------------------------------


def test_retries_stop_at_the_deadline_and_never_sleep_past_it() -> None:
    api, client, clock = make_api(deadline=30, cap=4.0)
    deadline = api.deadline
    client.always = lambda _sent: status(503, "etcdserver: leader changed")
    with pytest.raises(ApiError) as caught:
        api.get(MACHINE)
    assert clock() < deadline
    assert sum(clock.sleeps) > 20, "it kept trying for most of the time it had"
    assert caught.value.status == 503
    assert caught.value.attempts == api.request_count > 5
    assert caught.value.elapsed == pytest.approx(clock() - 1000.0)
    assert f"gave up after {caught.value.attempts} attempts in" in str(caught.value)
    assert caught.value.out_of_time, "the task's deadline, not the failure, ended the retries"


def test_without_a_deadline_retries_stop_after_the_budget() -> None:
    api, client, clock = make_api(budget=12.0)
    client.always = lambda _sent: status(502)
    with pytest.raises(ApiError) as caught:
        api.get(MACHINE)
    assert 6 < clock() - 1000.0 < 12
    assert not caught.value.out_of_time, "a minute of failures is a failure, whatever the deadline"


def test_a_failure_that_is_not_retried_is_not_out_of_time() -> None:
    api, client, _clock = make_api(deadline=30)
    client.script(status(403, "forbidden"))
    with pytest.raises(ApiError) as caught:
        api.get(MACHINE)
    assert caught.value.status == 403 and not caught.value.out_of_time


def test_a_server_never_reached_is_given_up_on_after_the_first_contact_budget() -> None:
    api, client, clock = make_api(deadline=300)
    client.always = lambda _sent: refused()
    with pytest.raises(ApiError) as caught:
        api.get(MACHINE)
    assert caught.value.status == 0
    assert caught.value.reason == "connection refused"
    assert clock() - 1000.0 < FIRST_CONTACT_BUDGET
    assert api.retries["connection refused"] == api.request_count - 1


def test_a_server_that_answered_once_is_waited_for_until_the_deadline() -> None:
    api, client, clock = make_api(deadline=60)
    client.script(ok(OBJ))
    api.get(MACHINE)
    client.always = lambda _sent: refused()
    with pytest.raises(ApiError):
        api.get(MACHINE)
    assert clock() - 1000.0 > 2 * FIRST_CONTACT_BUDGET


@pytest.mark.parametrize(
    "text",
    [
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate (_ssl.c:1000)",
        "hostname '10.0.0.1' doesn't match 'kube'",
    ],
)
def test_a_certificate_failure_is_not_retried(text) -> None:
    api, client, clock = make_api()
    client.script(ssl_error(text))
    with pytest.raises(ApiError) as caught:
        api.get(MACHINE)
    assert caught.value.status == 0
    assert text in caught.value.reason
    assert api.request_count == 1
    assert clock.sleeps == []


def test_a_client_error_is_not_retried() -> None:
    api, client, _clock = make_api()
    client.script(status(403, 'machines is forbidden: User "x" cannot get resource', "Forbidden"))
    with pytest.raises(ApiError) as caught:
        api.get(MACHINE)
    assert str(caught.value) == 'GET Machine ns/m1: 403 machines is forbidden: User "x" cannot get resource'
    assert api.request_count == 1


# -- paged lists --------------------------------------------------------------------------------


def page(names: list[str], version: str, token: str | None = None) -> Response:
    return ok({"metadata": {"resourceVersion": version, "continue": token}, "items": [{"metadata": {"name": n}} for n in names]})


def test_list_with_version_follows_continue_tokens() -> None:
    api, client, _clock = make_api()
    client.script(page(["a", "b"], "5", "t1"), page(["c"], "6", "t2"), page(["d"], "7"))
    items, version = api.list_with_version(PODS, label_selector="app=web")
    assert [i["metadata"]["name"] for i in items] == ["a", "b", "c", "d"]
    assert version == "5", "the list's version is the snapshot's, from the first page"
    assert [s.params.get("continue") for s in client.sent] == [None, "t1", "t2"]
    assert all(s.params["limit"] == 500 and s.params["labelSelector"] == "app=web" for s in client.sent)


def test_list_with_version_restarts_once_when_the_token_expires() -> None:
    api, client, _clock = make_api()
    client.script(page(["a"], "5", "t1"), status(410, "The provided continue parameter is too old", "Expired"), page(["a2"], "9", "t3"), page(["b2"], "9"))
    items, version = api.list_with_version(PODS)
    assert [i["metadata"]["name"] for i in items] == ["a2", "b2"]
    assert version == "9"
    assert [s.params.get("continue") for s in client.sent] == [None, "t1", None, "t3"]


def test_list_of_a_resource_not_served_is_empty() -> None:
    api, client, _clock = make_api()
    client.script(status(404))
    assert api.list_with_version(PODS) == ([], None)
    client.script(status(404))
    assert api.list(PODS) == []


def test_list_that_keeps_expiring_gives_up() -> None:
    api, client, _clock = make_api()
    client.script(*[answer for _round in range(3) for answer in (page(["a"], "5", "t"), status(410))])
    with pytest.raises(ApiError) as caught:
        api.list(PODS)
    assert caught.value.status == 410
    assert api.request_count == 6


def test_a_410_on_the_first_page_is_not_a_restart() -> None:
    api, client, _clock = make_api()
    client.script(status(410))
    with pytest.raises(ApiError):
        api.list(PODS)
    assert api.request_count == 1


# -- cancellation ---------------------------------------------------------------------------------


def test_after_cancel_no_request_is_sent() -> None:
    api, client, _clock = make_api()
    api.cancel()
    assert api.cancelled
    with pytest.raises(Cancelled, match="before GET Machine ns/m1"):
        api.get(MACHINE)
    assert client.sent == []
    assert api.request_count == 0


def test_cancel_wakes_a_retry_pause() -> None:
    client = FakeApiClient()
    called = threading.Event()

    def unavailable(_sent):
        called.set()
        return status(503)

    client.always = unavailable
    # Real clock, real pause: the first retry would wait 15 to 30 seconds.
    api = KubeApi(client, policy=RetryPolicy(base=30.0, cap=30.0, budget=120.0))
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            api.get(MACHINE)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=read)
    started = time.monotonic()
    worker.start()
    assert called.wait(5)
    api.cancel()
    worker.join(5)
    assert not worker.is_alive()
    assert time.monotonic() - started < 5
    assert len(outcome) == 1
    assert isinstance(outcome[0], Cancelled)
    assert api.request_count == 1


def test_sleep_raises_once_cancelled() -> None:
    api, _client, clock = make_api()
    api.sleep(2)
    assert clock() == 1002.0
    api.cancel()
    with pytest.raises(Cancelled):
        api.sleep(2)


# -- watches ------------------------------------------------------------------------------------------


def event(kind: str, name: str, version: str) -> dict:
    return {"type": kind, "object": {"metadata": {"name": name, "resourceVersion": version}}}


def test_a_watch_streams_events_split_anywhere() -> None:
    api, client, _clock = make_api()
    stream = b"".join(
        [
            b'{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}}\n\n',
            b'{"type": "MODIFIED", "object": {"metadata": {"name": "a", "resourceVersion": "3"}}}\n',
        ]
    )
    response = Response(200, chunks=[stream[:17], stream[17:90], stream[90:]])
    client.script(reset(), response)
    events = list(api.watch(PODS, resource_version="1", field_selector="metadata.name=a", timeout=30, bookmarks=True))
    assert events == [event("ADDED", "a", "2"), event("MODIFIED", "a", "3")]
    assert client.sent[-1].params == {
        "watch": "true",
        "resourceVersion": "1",
        "fieldSelector": "metadata.name=a",
        "timeoutSeconds": 30,
        "allowWatchBookmarks": "true",
    }
    assert client.sent[-1].timeout[1] > 30, "the read timeout outlasts the watch's own"
    assert response.released
    assert not response.closed, "a stream read to its end goes back to the pool"


def test_a_broken_watch_stream_is_an_api_error_with_status_0() -> None:
    api, client, _clock = make_api()
    response = Response(200, chunks=[b'{"type": "ADDED", "object": {"metadata": {"resourceVersion": "2"}}}\n{"ty'], broken=reset())
    client.script(response)
    events = api.watch(PODS)
    assert next(events)["type"] == "ADDED"
    with pytest.raises(ApiError) as caught:
        next(events)
    assert caught.value.status == 0
    assert caught.value.reason == "watch stream broken: connection reset (ProtocolError)"
    assert response.closed, "an unread stream never goes back to the pool"


def test_a_watch_left_early_closes_its_connection() -> None:
    api, client, _clock = make_api()
    response = Response(200, chunks=[b'{"type": "ADDED", "object": {}}\n{"type": "ADDED", "object": {}}\n'])
    client.script(response)
    events = api.watch(PODS)
    next(events)
    events.close()
    assert response.closed
    assert response.released


def test_opening_a_watch_is_retried_and_an_expired_version_is_410() -> None:
    api, client, _clock = make_api()
    client.script(status(503), refused(), status(410, "too old resource version", "Expired"))
    with pytest.raises(ApiError) as caught:
        list(api.watch(PODS, resource_version="1"))
    assert caught.value.status == 410
    assert api.request_count == 3


def test_opening_a_watch_does_not_retry_a_certificate_failure() -> None:
    api, client, clock = make_api(deadline=300)
    client.script(ok({}))
    api.get(PODS)  # the server answered before: a retry would go on until the deadline
    text = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate in certificate chain (_ssl.c:1000)"
    client.always = lambda _sent: ssl_error(text)
    with pytest.raises(ApiError) as caught:
        list(api.watch(PODS))
    assert caught.value.status == 0
    assert text in caught.value.reason
    assert api.request_count == 2
    assert clock.sleeps == []


def test_an_error_answer_to_a_watch_is_contact_with_the_server() -> None:
    api, client, clock = make_api(deadline=60)
    client.always = lambda _sent: status(503, Retry_After="1")
    with pytest.raises(ApiError) as caught:
        list(api.watch(PODS))
    assert caught.value.status == 503
    assert clock() - 1000.0 > 2 * FIRST_CONTACT_BUDGET, "a server that answers is waited for until the deadline"
    assert api.retries == {"503 Service Unavailable": api.request_count - 1}


def test_retries_of_concurrent_requests_are_all_counted() -> None:
    """Evictions run in parallel through one KubeApi: no retry may go uncounted."""

    class SlowCounter(Counter):
        # Widens the read-modify-write of ``retries[label] += 1``, so unguarded updates get lost.
        def __getitem__(self, key):
            value = super().__getitem__(key)
            time.sleep(0.05)
            return value

    api, client, _clock = make_api()
    api.retries = SlowCounter()
    threads = 4
    together = threading.Barrier(threads)
    answered: set[int] = set()
    lock = threading.Lock()

    def answer(_sent):
        with lock:
            first = threading.get_ident() not in answered
            answered.add(threading.get_ident())
        if first:
            together.wait(5)  # every thread fails at the same moment, then counts its retry
            return status(503)
        return ok(OBJ)

    client.always = answer
    workers = [threading.Thread(target=api.get, args=(MACHINE,)) for _thread in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert api.request_count == 2 * threads
    assert api.retries == {"503 Service Unavailable": threads}
