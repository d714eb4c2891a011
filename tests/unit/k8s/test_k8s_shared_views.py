"""The views a run's tasks share (``KubeApi.shared_view``): none until the run asks for them,
one per connection and key, made once for every fork, and stopped with the run's ``stop_views``."""

from __future__ import annotations

from fake_api_client import FakeApiClient, make_api, ok


class View:
    def __init__(self, api) -> None:
        self.api = api
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_a_run_that_does_not_share_views_gets_none() -> None:
    api, _client, _clock = make_api()
    assert api.shared_view("k", View) is None
    assert api.fork().shared_view("k", View) is None


def test_one_view_per_connection_and_key_shared_by_every_fork() -> None:
    api, _client, clock = make_api()
    task = api.fork(deadline=clock() + 30)
    api.share_views()
    first = task.shared_view("k", View)
    assert api.fork().shared_view("k", View) is first
    assert api.shared_view("other", View) is not first
    # The view's own fork has no deadline: it outlives the task that made it.
    assert first.api.deadline is None
    workload = FakeApiClient(clock)
    workload.always = lambda sent: ok({})
    other = task.other_cluster("c1", lambda: (workload, None), label="the workload cluster ns/c1")
    theirs = other.shared_view("k", View)
    assert theirs is not first and api.fork().other_cluster("c1", lambda: (workload, None), label="x").shared_view("k", View) is theirs


def test_stopping_the_views_stops_each_and_shares_none_after() -> None:
    api, _client, _clock = make_api()
    api.share_views()
    view = api.fork().shared_view("k", View)
    api.stop_views()
    assert view.stopped
    assert api.shared_view("k", View) is None
