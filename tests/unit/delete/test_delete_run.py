"""machine_delete's run of one Machine: a step cut short by the end of the call's
slice goes on in the next call; one whose whole budget is spent fails (the steps
themselves replaced by stand-ins: this is the run's flow, not the steps)."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._delete import run as delete_run
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import DRAIN, FAILED, IN_PROGRESS, DeleteRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import COLLECTION, Actor

MACHINE = {"name": "a", "namespace": "ns", "api_version": None}
API_ERROR = "Failed to drain Node a: GET Node a: 503 etcdserver: request timed out (gave up after 3 attempts in 1.2 s)"


def deletion(monkeypatch, *, slice_seconds: float, drain_timeout: int = 600) -> delete_run.MachineDeletion:
    monkeypatch.setattr(delete_run.MachineDeletion, "mark", lambda self: True)
    monkeypatch.setattr(delete_run.MachineDeletion, "actor", lambda self: Actor(COLLECTION, "no controller"))

    class DrainThatRanOutOfTime:
        def __init__(self, _api, _request, **_decided):
            pass

        def run(self):
            raise MachineError(API_ERROR, message=API_ERROR, timed_out=True, changed=True)

    monkeypatch.setattr(delete_run, "DrainRun", DrainThatRanOutOfTime)
    request = DeleteRequest(machines=(MACHINE,), drain_timeout=drain_timeout, progress_interval=int(slice_seconds))
    fake = FakeKube()
    return delete_run.MachineDeletion(fake, request, MACHINE, clock={}, slice_end=fake.monotonic() + slice_seconds)


def test_a_drain_cut_short_by_the_slice_goes_on_in_the_next_call(monkeypatch) -> None:
    outcome = deletion(monkeypatch, slice_seconds=20).run()
    assert (outcome.status, outcome.step, outcome.message) == (IN_PROGRESS, DRAIN, API_ERROR)
    assert outcome.changed


@pytest.mark.parametrize("drain_timeout", [5, 15])
def test_a_drain_whose_budget_is_spent_fails(monkeypatch, drain_timeout: int) -> None:
    outcome = deletion(monkeypatch, slice_seconds=20, drain_timeout=drain_timeout).run()
    assert (outcome.status, outcome.message) == (FAILED, API_ERROR)
