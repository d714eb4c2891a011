"""The transport's connections to other clusters (a Cluster API workload cluster):
made once per run and shared, the task's deadline and cancellation, errors that
name the cluster, and one credential renewal after a 401."""

from __future__ import annotations

import pytest
from fake_api_client import FakeApiClient, make_api, ok, refused, status

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, unanswered_cluster

LABEL = "the workload cluster ns/c1"


def _other(api, client, renew=None, key="c1"):
    made = []

    def make():
        made.append(key)
        return client, renew

    return api.other_cluster(key, make, label=LABEL), made


def test_one_connection_per_cluster_is_made_and_shared_by_every_fork() -> None:
    api, _management, clock = make_api()
    workload = FakeApiClient(clock)
    workload.always = lambda sent: ok({"metadata": {"name": "n"}})
    first, made = _other(api, workload)
    second, made_again = _other(api.fork(), workload)
    first.get("/api/v1/nodes/n")
    second.get("/api/v1/nodes/n")
    assert made == ["c1"] and made_again == []
    assert len(workload.sent) == 2
    # The requests count as the run's.
    assert api.total_requests == 2


def test_the_connection_follows_the_tasks_deadline_and_names_the_cluster() -> None:
    api, _management, clock = make_api()
    task = api.fork(deadline=clock() + 30)
    workload = FakeApiClient(clock)
    workload.always = lambda sent: refused()
    other, _made = _other(task, workload)
    other._answered = True  # a cluster that answered before: retried until the task's deadline
    assert other.deadline == task.deadline
    with pytest.raises(ApiError) as raised:
        other.get("/api/v1/nodes/n")
    error = raised.value
    assert error.cluster == LABEL
    assert "GET Node n in the workload cluster ns/c1: connection refused" in error.describe()
    assert error.out_of_time
    assert clock() <= task.deadline + 1
    assert unanswered_cluster(error) == {"unreachable": LABEL}


def test_cancelling_the_run_cancels_the_other_clusters_requests() -> None:
    api, _management, clock = make_api()
    workload = FakeApiClient(clock)
    workload.always = lambda sent: ok({})
    other, _made = _other(api, workload)
    api.cancel()
    assert other.cancelled


def test_a_401_renews_the_credentials_once_and_sends_again() -> None:
    api, _management, clock = make_api()
    old, new = FakeApiClient(clock), FakeApiClient(clock)
    old.always = lambda sent: status(401, "Unauthorized")
    new.always = lambda sent: ok({"metadata": {"name": "n"}})
    renewals = []

    def renew():
        renewals.append(1)
        return new

    other, _made = _other(api, old, renew)
    assert other.get("/api/v1/nodes/n") == {"metadata": {"name": "n"}}
    assert other.fork().get("/api/v1/nodes/n") == {"metadata": {"name": "n"}}
    assert len(renewals) == 1
    assert len(old.sent) == 1 and len(new.sent) == 2


def test_a_second_401_is_the_answer() -> None:
    api, _management, clock = make_api()
    old, new = FakeApiClient(clock), FakeApiClient(clock)
    old.always = new.always = lambda sent: status(401, "Unauthorized")
    other, _made = _other(api, old, lambda: new)
    with pytest.raises(ApiError) as raised:
        other.get("/api/v1/nodes/n")
    assert raised.value.status == 401
    assert len(old.sent) == 1 and len(new.sent) == 1


def test_a_renewal_that_finds_nothing_new_leaves_the_401() -> None:
    api, _management, clock = make_api()
    old = FakeApiClient(clock)
    old.always = lambda sent: status(401, "Unauthorized")
    other, _made = _other(api, old, lambda: None)
    with pytest.raises(ApiError) as raised:
        other.get("/api/v1/nodes/n")
    assert raised.value.status == 401
    assert len(old.sent) == 1


def test_the_task_connection_has_no_renewal_and_no_label() -> None:
    api, management, _clock = make_api()
    management.always = lambda sent: status(401, "Unauthorized")
    with pytest.raises(ApiError) as raised:
        api.get("/api/v1/nodes/n")
    assert raised.value.status == 401 and raised.value.cluster == ""
    assert unanswered_cluster(raised.value) == {}
