"""The cluster deletion signal's pure logic: who holds a finalizer, which names
may be hung on Alive, the messages, and the guarded finalizer patches."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import (
    add_finalizer_patch,
    alive_summary,
    describe_finalizers,
    diff_view,
    finalizer_errors,
    finalizer_holder,
    released,
    remove_finalizer_patch,
    timeout_message,
)


def alive(*finalizers: str, deleting: str | None = None, resource_version: str = "42") -> dict:
    meta: dict = {
        "name": "cluster",
        "namespace": "openshift-config",
        "uid": "u-1",
        "resourceVersion": resource_version,
        "creationTimestamp": "2025-01-01T00:00:00Z",
    }
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if deleting:
        meta["deletionTimestamp"] = deleting
    return {"apiVersion": "lifecycle.machine.dev/v1alpha1", "kind": "Alive", "metadata": meta, "spec": {}}


@pytest.mark.parametrize(
    ("finalizer", "holder", "component", "purpose"),
    [
        # <component>.<domain>/<purpose>: the component is the first label.
        ("ingress.operator.openshift.io/lb-cleanup", "ingress.operator.openshift.io", "ingress", "lb-cleanup"),
        ("cloud-credential.openshift.io/cleanup", "cloud-credential.openshift.io", "cloud-credential", "cleanup"),
        # <domain>/<purpose>: the domain is the holder, no component can be told.
        ("example.com/buckets", "example.com", None, "buckets"),
        ("kubernetes.io/pv-protection", "kubernetes.io", None, "pv-protection"),
        # Kubernetes' own unqualified finalizers.
        ("foregroundDeletion", "kubernetes garbage collector", None, "foregroundDeletion"),
        ("orphan", "kubernetes garbage collector", None, "orphan"),
        ("kubernetes", "kubernetes namespace controller", None, "kubernetes"),
        # Anything else unqualified: the name does not tell.
        ("my-cleanup", None, None, "my-cleanup"),
    ],
)
def test_finalizer_holder(finalizer, holder, component, purpose) -> None:
    assert finalizer_holder(finalizer) == {"name": finalizer, "holder": holder, "component": component, "purpose": purpose}


@pytest.mark.parametrize(
    "finalizer",
    ["example.com/buckets", "image-registry.operator.openshift.io/storage_cleanup", "a.b/c.d-e_f", "x.io/" + "a" * 63],
)
def test_valid_finalizers(finalizer) -> None:
    assert finalizer_errors(finalizer) == []


@pytest.mark.parametrize(
    ("finalizer", "fragment"),
    [
        ("cleanup", "must be domain-qualified"),
        ("/cleanup", "must be a DNS subdomain"),
        ("Example.com/cleanup", "must be a DNS subdomain"),
        ("-bad.example.com/cleanup", "must be a DNS subdomain"),
        ("example.com/", "name part ''"),
        ("example.com/-x", "must be at most 63 characters"),
        ("example.com/" + "a" * 64, "must be at most 63 characters"),
        ("example.com/a/b", "name part 'a/b'"),
    ],
)
def test_invalid_finalizers(finalizer, fragment) -> None:
    errors = finalizer_errors(finalizer)
    assert errors
    assert any(fragment in error for error in errors), errors


def test_summary_of_missing_alive() -> None:
    summary = alive_summary(None, name="cluster", namespace="openshift-config", api_version="lifecycle.machine.dev/v1alpha1")
    assert summary["exists"] is False
    assert summary["deleting"] is False
    assert summary["finalizers"] == []
    assert diff_view(summary) == {}


def test_summary_of_alive_being_deleted() -> None:
    obj = alive("a.example.com/x", "orphan", deleting="2025-05-07T10:15:00Z")
    summary = alive_summary(obj, name="cluster", namespace="openshift-config", api_version="lifecycle.machine.dev/v1alpha1")
    assert summary["exists"] is True
    assert summary["deleting"] is True
    assert summary["deletion_timestamp"] == "2025-05-07T10:15:00Z"
    assert summary["uid"] == "u-1"
    assert [f["holder"] for f in summary["finalizers"]] == ["a.example.com", "kubernetes garbage collector"]
    assert diff_view(summary) == {
        "name": "cluster",
        "namespace": "openshift-config",
        "deletion_timestamp": "2025-05-07T10:15:00Z",
        "finalizers": ["a.example.com/x", "orphan"],
    }


def test_describe_and_timeout_messages_name_every_holder() -> None:
    finalizers = [finalizer_holder("ingress.operator.openshift.io/lb"), finalizer_holder("legacy")]
    assert describe_finalizers(finalizers) == "ingress.operator.openshift.io/lb (holder: ingress.operator.openshift.io), legacy (holder unknown)"
    failing = timeout_message("openshift-config/cluster", 600, finalizers, proceed=False)
    assert failing.startswith(
        "Alive openshift-config/cluster was not deleted within 600s: 2 finalizers were not released: "
        "ingress.operator.openshift.io/lb (holder: ingress.operator.openshift.io), legacy (holder unknown)."
    )
    assert "on_timeout=proceed" in failing
    proceeding = timeout_message("openshift-config/cluster", 5, finalizers[:1], proceed=True)
    assert "1 finalizer was not released" in proceeding
    assert "Proceeding anyway" in proceeding


def test_released_keeps_original_order() -> None:
    before = [finalizer_holder(n) for n in ("a.io/1", "b.io/2", "c.io/3")]
    after = [finalizer_holder("b.io/2")]
    assert released(before, after) == ["a.io/1", "c.io/3"]
    assert released(before, before) == []


def test_add_finalizer_is_guarded_by_resource_version() -> None:
    assert add_finalizer_patch(alive(resource_version="7"), "a.io/x") == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["a.io/x"]},
    ]
    assert add_finalizer_patch(alive("b.io/y", resource_version="8"), "a.io/x") == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "8"},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "a.io/x"},
    ]
    assert add_finalizer_patch(alive("b.io/y", "a.io/x"), "a.io/x") is None


def test_remove_finalizer_tests_each_entry_it_removes() -> None:
    assert remove_finalizer_patch(alive("b.io/y"), "a.io/x") is None
    assert remove_finalizer_patch(alive(), "a.io/x") is None
    # Only our entries, last first so indexes stay valid; other components' entries are never touched.
    assert remove_finalizer_patch(alive("a.io/x", "b.io/y", "a.io/x"), "a.io/x") == [
        {"op": "test", "path": "/metadata/finalizers/2", "value": "a.io/x"},
        {"op": "remove", "path": "/metadata/finalizers/2"},
        {"op": "test", "path": "/metadata/finalizers/0", "value": "a.io/x"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]
