"""Waiting on the API (``_k8s/watch.py``): ``watch_until`` over a scripted
watch (resuming, re-listing, deadlines), ``wait_for_object`` and
``wait_until_gone`` over the in-memory FakeKube."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import (
    DONE,
    MAX_WATCH_SECONDS,
    REOPEN_PAUSE,
    RESYNC,
    TIMEOUT,
    wait_for_object,
    wait_until_gone,
    watch_until,
)

# The transport's waits are given whatever path the test chooses: those requests are the test's, not a feature's.
pytestmark = pytest.mark.any_request

PODS = "/api/v1/namespaces/ns/pods"
POD = f"{PODS}/web-0"
BROKEN = ApiError(0, "watch stream broken: connection reset (ProtocolError)", None, "GET", PODS)


def event(kind: str, version: str, name: str = "web-0", **fields) -> dict:
    return {"type": kind, "object": {"metadata": {"name": name, "resourceVersion": version}, **fields}}


class ScriptedWatches:
    """What ``watch_until`` needs of the transport, with one scripted stream per
    watch opened: events, then optionally an error raised mid-stream. A stream
    that ends by itself took its ``timeout`` on the clock (the server ended it)."""

    def __init__(self, *streams: list) -> None:
        self.streams = list(streams)
        self.clock = 0.0
        self.opened: list[dict] = []
        self.sleeps: list[float] = []
        self.closed = 0

    def monotonic(self) -> float:
        return self.clock

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock += seconds

    def watch(self, path: str, **options) -> Iterator[dict]:
        self.opened.append({"path": path, **options})
        stream = self.streams.pop(0) if self.streams else []
        return self._stream(stream, options["timeout"])

    def _stream(self, stream: list, timeout: int) -> Iterator[dict]:
        try:
            for item in stream:
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, float):
                    self.clock += item  # time passing between events
                    continue
                yield item
            self.clock += timeout
        finally:
            self.closed += 1

    @property
    def versions(self) -> list[str | None]:
        return [options["resource_version"] for options in self.opened]


def until(name: str, kind: str = "MODIFIED"):
    seen: list[dict] = []

    def on_event(item: dict) -> bool:
        seen.append(item)
        return item["type"] == kind and item["object"]["metadata"]["name"] == name

    return on_event, seen


# -- watch_until ---------------------------------------------------------------------------


def test_done_when_on_event_says_so() -> None:
    api = ScriptedWatches([event("ADDED", "4", "other"), {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "5"}}}, event("MODIFIED", "6")])
    on_event, seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=100, resource_version="3", field_selector="a=b", label_selector="c=d") == DONE
    assert [item["type"] for item in seen] == ["ADDED", "MODIFIED"], "bookmarks only move the version on"
    assert api.opened == [
        {"path": PODS, "resource_version": "3", "field_selector": "a=b", "label_selector": "c=d", "timeout": 100, "bookmarks": True},
    ]
    assert api.closed == 1


def test_a_broken_stream_resumes_from_the_last_version_seen() -> None:
    api = ScriptedWatches([event("ADDED", "4", "other"), event("MODIFIED", "5", "other"), BROKEN], [event("MODIFIED", "6")])
    on_event, seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=100, resource_version="3") == DONE
    assert api.versions == ["3", "5"]
    assert api.sleeps == [REOPEN_PAUSE]
    assert len(seen) == 3, "no event is seen twice"


def test_a_stream_the_server_ended_is_reopened_from_the_last_version() -> None:
    api = ScriptedWatches([event("ADDED", "4", "other")], [], [event("MODIFIED", "9")])
    on_event, _seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=1000, resource_version="3") == DONE
    assert api.versions == ["3", "4", "4"]
    assert api.sleeps == []


@pytest.mark.parametrize("expiry", [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}, ApiError(410, "Gone")])
def test_an_expired_version_relists_and_watches_from_the_new_one(expiry) -> None:
    api = ScriptedWatches([event("ADDED", "4", "other"), expiry], [event("MODIFIED", "11")])
    relisted: list[int] = []

    def relist() -> tuple[bool, str | None]:
        relisted.append(1)
        return False, "10"

    on_event, _seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=100, resource_version="3", relist=relist) == DONE
    assert relisted == [1]
    assert api.versions == ["3", "10"]


def test_a_relist_that_finds_it_done_ends_the_wait() -> None:
    api = ScriptedWatches([{"type": "ERROR", "object": {"code": 410}}])
    on_event, _seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=100, resource_version="3", relist=lambda: (True, None)) == DONE
    assert len(api.opened) == 1


def test_without_a_version_the_state_is_read_first() -> None:
    api = ScriptedWatches([event("MODIFIED", "8")])
    on_event, _seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=100, resource_version=None, relist=lambda: (False, "7")) == DONE
    assert api.versions == ["7"]


def test_an_expired_version_without_relist_is_resync() -> None:
    api = ScriptedWatches([event("ADDED", "4", "other"), {"type": "ERROR", "object": {"code": 410}}])
    on_event, _seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=100, resource_version="3") == RESYNC
    assert watch_until(ScriptedWatches(), PODS, on_event=on_event, deadline=100, resource_version=None) == RESYNC


def test_timeout_at_the_deadline() -> None:
    api = ScriptedWatches()
    on_event, _seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=700, resource_version="3") == TIMEOUT
    # Each watch asks the server to end it by the deadline, and never runs longer than MAX_WATCH_SECONDS.
    assert [options["timeout"] for options in api.opened] == [MAX_WATCH_SECONDS, MAX_WATCH_SECONDS, 700 - 2 * MAX_WATCH_SECONDS]
    assert api.clock == 700


def test_timeout_while_events_keep_coming() -> None:
    api = ScriptedWatches([event("ADDED", "4", "a"), 60.0, event("ADDED", "5", "b"), event("ADDED", "6", "c")])
    on_event, seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=50, resource_version="3") == TIMEOUT
    assert len(seen) == 2, "an event that arrives after the deadline is still looked at, then the wait ends"


def test_a_deadline_already_passed_opens_no_watch() -> None:
    api = ScriptedWatches()
    api.clock = 10.0
    on_event, _seen = until("web-0")
    assert watch_until(api, PODS, on_event=on_event, deadline=10, resource_version="3") == TIMEOUT
    assert api.opened == []


def test_other_errors_end_the_wait() -> None:
    api = ScriptedWatches([ApiError(403, "Forbidden", {"message": "pods is forbidden"})])
    on_event, _seen = until("web-0")
    with pytest.raises(ApiError) as caught:
        watch_until(api, PODS, on_event=on_event, deadline=100, resource_version="3")
    assert caught.value.status == 403
    assert api.closed == 1


# -- wait_for_object / wait_until_gone --------------------------------------------------------


def pod(phase: str = "Running", **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "ns", **meta}, "status": {"phase": phase}}


def running_out(obj: dict | None) -> bool:
    return obj is not None and obj["status"]["phase"] == "Succeeded"


def test_wait_for_object_already_so_reads_once() -> None:
    kube = FakeKube()
    kube.put(POD, pod("Succeeded"))
    found, satisfied = wait_for_object(kube, POD, running_out, deadline=kube.clock + 60)
    assert satisfied
    assert found["status"]["phase"] == "Succeeded"
    assert kube.requests == [("GET", POD)]


def test_wait_for_object_sees_the_change_on_the_watch() -> None:
    kube = FakeKube()
    kube.put(POD, pod())

    def on_request(method: str, path: str) -> None:
        if path == f"{PODS}?watch":
            kube.request("PATCH", POD, body={"status": {"phase": "Succeeded"}})

    kube.on_request = on_request
    found, satisfied = wait_for_object(kube, POD, running_out, deadline=kube.clock + 60, adapt=lambda obj: {**obj, "seen": True})
    assert satisfied
    assert found["status"]["phase"] == "Succeeded"
    assert found["seen"]


def test_wait_for_object_from_the_object_given_reads_nothing() -> None:
    kube = FakeKube()
    current = kube.put(POD, pod())
    kube.request("PATCH", POD, body={"status": {"phase": "Succeeded"}})
    kube.requests.clear()
    found, satisfied = wait_for_object(kube, POD, running_out, deadline=kube.clock + 60, current=current)
    assert satisfied, "the watch from the given object's version replays the change"
    assert found["status"]["phase"] == "Succeeded"
    assert kube.requests == [("GET", f"{PODS}?watch")]


def test_wait_for_object_times_out_with_the_object_as_last_seen() -> None:
    kube = FakeKube()
    kube.put(POD, pod())
    start = kube.clock
    found, satisfied = wait_for_object(kube, POD, running_out, deadline=start + 120)
    assert not satisfied
    assert found["status"]["phase"] == "Running"
    assert kube.clock >= start + 120


def test_wait_for_a_missing_object_watches_from_now_for_its_creation() -> None:
    kube = FakeKube()
    kube.put(f"{PODS}/old", pod())
    kube.finish(f"{PODS}/old")  # history a watch from 0 would replay

    def on_request(method: str, path: str) -> None:
        if path == f"{PODS}?watch" and POD not in kube.objects:
            kube.put(POD, pod("Succeeded"))

    kube.on_request = on_request
    found, satisfied = wait_for_object(kube, POD, running_out, deadline=kube.clock + 60)
    assert satisfied
    assert found["metadata"]["name"] == "web-0"
    assert kube.requests[:2] == [("GET", POD), ("GET", PODS)], "the collection's version, to watch from now"


def test_wait_until_gone() -> None:
    kube = FakeKube()
    kube.put(POD, pod(finalizers=["example.com/hold"]))
    kube.request("DELETE", POD)

    def on_request(method: str, path: str) -> None:
        if path == f"{PODS}?watch" and POD in kube.objects:
            kube.finish(POD)

    kube.on_request = on_request
    assert wait_until_gone(kube, POD, deadline=kube.clock + 60) == (None, True)


def test_wait_until_gone_of_a_gone_object_is_at_once() -> None:
    kube = FakeKube()
    assert wait_until_gone(kube, POD, deadline=kube.clock + 60) == (None, True)
    assert kube.requests == [("GET", POD)]


def test_wait_until_gone_times_out_on_an_object_that_stays() -> None:
    kube = FakeKube()
    kube.put(POD, pod())
    found, gone = wait_until_gone(kube, POD, deadline=kube.clock + 30)
    assert not gone
    assert found["metadata"]["name"] == "web-0"
