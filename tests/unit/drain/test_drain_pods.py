"""Unit tests for what the drain reads of a Pod (_drain/pods.py)."""

from __future__ import annotations

from pod_objects import pod

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.pods import claim_names, controller_of, is_running, pod_key


def test_pod_key():
    assert pod_key(pod("web", ns="apps")) == "apps/web"


def test_controller_is_the_owner_marked_controller():
    assert controller_of(pod("web", owner="ReplicaSet", owner_name="web-1"))["name"] == "web-1"
    assert controller_of(pod("web", owner="ReplicaSet", controller=False)) is None
    assert controller_of(pod("web", owner=None)) is None


def test_finished_pods_do_not_run_and_unknown_phases_do():
    assert [is_running(pod("p", phase=phase)) for phase in ("Running", "Pending", "", "Succeeded", "Failed")] == [True, True, True, False, False]


def test_claim_names_are_those_of_persistent_volume_claims():
    volumes = [{"name": "a", "emptyDir": {}}, {"name": "b", "persistentVolumeClaim": {"claimName": "data"}}]
    assert claim_names(pod("p", volumes=volumes)) == ["data"]
