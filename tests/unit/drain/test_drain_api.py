"""Unit tests for the pure parts of the drain's API side (_drain/api.py): how a
refused eviction is reported, and an eviction whose answer was lost."""

from __future__ import annotations

import pytest
from pod_objects import PDB

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.api import _failure, evict_pods
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import TERMINATING_NAMESPACE_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

# ---------------------------------------------------------------------------
# Refused evictions


def test_pdb_refusal_keeps_the_causes() -> None:
    cause = {"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}
    body = {"message": PDB, "details": {"causes": [cause]}}
    assert _failure(ApiError(429, "Too Many Requests", body)) == (
        f"{PDB} The disruption budget web needs 2 healthy pods and has 2 currently",
        False,
        "DisruptionBudget",
    )


def test_429_without_details_is_the_message_alone() -> None:
    assert _failure(ApiError(429, "Too Many Requests", {"message": PDB})) == (PDB, False, "DisruptionBudget")


def test_404_means_gone() -> None:
    assert _failure(ApiError(404, "Not Found", {"message": 'pods "a" not found'})) == (None, True, None)


def test_uid_precondition_conflict_means_the_classified_pod_is_gone() -> None:
    body = {"message": "Precondition failed: UID in precondition: 1, UID in object meta: 2"}
    assert _failure(ApiError(409, "Conflict", body)) == (None, True, None)


def test_other_conflicts_are_failures() -> None:
    assert _failure(ApiError(409, "Conflict", {"message": "the object has been modified"})) == ("the object has been modified", False, None)


def test_terminating_namespace_gets_the_upstream_text() -> None:
    message = "unable to create new content in namespace ns because it is being terminated"
    body = {"message": message, "details": {"causes": [{"reason": "NamespaceTerminating"}]}}
    assert _failure(ApiError(403, "Forbidden", body)) == (TERMINATING_NAMESPACE_MESSAGE, False, None)


def test_forbidden_for_other_reasons_keeps_the_server_message() -> None:
    assert _failure(ApiError(403, "Forbidden", {"message": "denied"})) == ("denied", False, None)


class _LostAnswer:
    """A transport whose every eviction took effect on the server, its answer lost:
    the transport asks ``verify`` what the Pod shows, as the real one does."""

    def __init__(self, pod_now: dict | None) -> None:
        self.pod_now = pod_now
        self.verified = 0

    def create(self, path, body, *, verify=None, **_options):
        self.verified += 1
        landed = verify()
        assert landed is not None, "the eviction landed: the transport must not send it again"
        return landed

    def get(self, path):
        return self.pod_now


POD = {"metadata": {"namespace": "ns", "name": "web-1", "uid": "u-1"}, "spec": {}, "status": {}}


@pytest.mark.parametrize(
    "pod_now",
    [
        None,  # deleted at once (no grace period left)
        {"metadata": {"namespace": "ns", "name": "web-1", "uid": "u-1", "deletionTimestamp": "2026-11-25T00:00:00Z"}},
        {"metadata": {"namespace": "ns", "name": "web-1", "uid": "u-2"}},  # a new Pod took the name
    ],
    ids=["gone", "terminating", "replaced"],
)
def test_an_eviction_whose_answer_was_lost_but_that_took_effect_is_reported_as_evicted(pod_now) -> None:
    api = _LostAnswer(pod_now)
    outcome = evict_pods(api, [POD], grace_period=None)
    assert api.verified == 1
    assert (outcome.evicted, outcome.gone, outcome.failures) == (["ns/web-1"], [], {})
