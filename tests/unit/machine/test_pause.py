"""Hands off a paused Cluster API Machine (_machine/pause.py): Cluster API v1.14.2's own rules - its Cluster's
spec.paused, its cluster.x-k8s.io/paused annotation whatever the value - and the override on the record."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import (
    OVERRIDE_EVENT,
    OVERRIDE_REASON_MAX,
    capi_pause,
    override_errors,
    override_event,
)


def machine(version: str = "v1beta2", annotations: dict | None = None, conditions: list | None = None) -> dict:
    status = {"conditions": conditions} if version == "v1beta2" else {"v1beta2": {"conditions": conditions or []}}
    return {
        "apiVersion": f"cluster.x-k8s.io/{version}",
        "kind": "Machine",
        "metadata": {"name": "w-1", "namespace": "shop", "annotations": annotations or {}},
        "spec": {"clusterName": "c1"},
        "status": status,
    }


def cluster(paused: bool | None) -> dict:
    spec = {} if paused is None else {"paused": paused}
    return {"metadata": {"name": "c1", "namespace": "shop"}, "spec": spec}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_a_paused_cluster_holds_its_machine_with_upstreams_words(version) -> None:
    m = machine(version)
    held = capi_pause(m, flavour_for(m), cluster(True))
    assert held is not None and held.overridable and not held.refuse
    assert held.cause == "Cluster spec.paused is set to true"
    blocker = held.blocker
    assert (blocker.phase, blocker.kind, blocker.object, blocker.verdict) == ("paused", "paused", "Cluster shop/c1", "needs someone to act")
    assert "set Cluster shop/c1's spec.paused to false" in blocker.reason and "override_pause" in blocker.reason
    assert held.message.startswith("Machine shop/w-1 is paused (Cluster spec.paused is set to true): ") and "nothing was changed" in held.message


@pytest.mark.parametrize("value", ["", "true", "false"])
def test_the_annotation_pauses_whatever_its_value(value) -> None:
    m = machine(annotations={"cluster.x-k8s.io/paused": value})
    held = capi_pause(m, flavour_for(m), cluster(False))
    assert held is not None and held.cause == "Machine has the cluster.x-k8s.io/paused annotation"
    assert held.blocker.object == "Machine shop/w-1" and "remove the annotation cluster.x-k8s.io/paused" in held.blocker.reason


def test_both_causes_are_named_as_cluster_api_joins_them() -> None:
    m = machine(annotations={"cluster.x-k8s.io/paused": ""})
    held = capi_pause(m, flavour_for(m), cluster(True))
    assert held.cause == "Cluster spec.paused is set to true, Machine has the cluster.x-k8s.io/paused annotation"
    assert held.blocker.evidence["paused_by"] == ["Cluster shop/c1", "Machine shop/w-1"]


@pytest.mark.parametrize("paused", [False, None])
def test_an_unpaused_machine_is_not_held(paused) -> None:
    m = machine(annotations={"cluster.x-k8s.io/paused-not": ""})
    assert capi_pause(m, flavour_for(m), cluster(paused)) is None
    assert capi_pause(m, flavour_for(m), None) is None  # no Cluster read (or none): only the annotation counts


def test_since_is_when_the_controller_recorded_the_pause() -> None:
    paused = [{"type": "Paused", "status": "True", "reason": "Paused", "lastTransitionTime": "2026-11-27T08:00:00Z"}]
    for version in ("v1beta1", "v1beta2"):
        m = machine(version, annotations={"cluster.x-k8s.io/paused": ""}, conditions=paused)
        assert capi_pause(m, flavour_for(m), None).blocker.since == "2026-11-27T08:00:00Z"
    m = machine(annotations={"cluster.x-k8s.io/paused": ""}, conditions=[{**paused[0], "status": "False"}])
    assert capi_pause(m, flavour_for(m), None).blocker.since is None


def test_an_openshift_machine_is_never_paused_by_cluster_api_rules() -> None:
    m = {"apiVersion": "machine.openshift.io/v1beta1", "metadata": {"name": "w", "namespace": "ns", "annotations": {"cluster.x-k8s.io/paused": ""}}}
    assert capi_pause(m, flavour_for(m), cluster(True)) is None


@pytest.mark.parametrize(
    ("value", "refused"),
    [(None, False), ("", False), ("CHG-1: teardown, approved by J. Doe", False), ("   ", True), ("x" * (OVERRIDE_REASON_MAX + 1), True)],
)
def test_the_override_must_say_who_asked(value, refused) -> None:
    assert bool(override_errors(value)) == refused


def test_the_override_event_names_the_pause_the_user_and_the_reason() -> None:
    m = machine(annotations={"cluster.x-k8s.io/paused": ""})
    held = capi_pause(m, flavour_for(m), cluster(True))
    kind, reason, message = override_event(held, "CHG-1: teardown", "system:serviceaccount:lm:awx")
    assert (kind, reason) == ("Warning", OVERRIDE_EVENT)
    assert message == (
        "Acting on the Machine although it is paused (Cluster spec.paused is set to true, Machine has the cluster.x-k8s.io/paused annotation),"
        " as asked by system:serviceaccount:lm:awx with override_pause: CHG-1: teardown"
    )
    assert "as asked with override_pause: CHG-1" in override_event(held, "CHG-1", None)[2]
