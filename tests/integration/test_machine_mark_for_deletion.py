"""machine_mark_for_deletion against the real API server."""

from __future__ import annotations

from conftest import machine_collection

FINALIZERS = {"openshift": "machine.machine.openshift.io", "v1beta1": "machine.cluster.x-k8s.io", "v1beta2": "machine.cluster.x-k8s.io"}


def test_marks_once_with_the_finalizer(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    path = f"{machine_collection(flavour, namespace)}/{machine}"
    # A Machine created without the flavour's finalizer (as a user might) keeps another one.
    kube.patch(path, {"metadata": {"finalizers": ["example.com/keep"]}})
    args = {"machine": machine, "namespace": namespace}

    predicted = run_module("machine_mark_for_deletion", args, check=True, diff=True)
    assert predicted["changed"] is True
    stored = kube.get(path)
    assert not stored["metadata"].get("deletionTimestamp")
    assert stored["metadata"]["finalizers"] == ["example.com/keep"]

    marked = run_module("machine_mark_for_deletion", args, diff=True)
    assert marked["changed"] is True
    assert marked["machines"][0]["action"] == "marked"
    assert marked["machines"][0]["finalizer_added"] is True
    stored = kube.get(path)
    assert stored["metadata"]["deletionTimestamp"]
    assert stored["metadata"]["finalizers"] == ["example.com/keep", FINALIZERS[flavour]]
    assert marked["diff"]["after"][f"{namespace}/{machine}"]["deleting"] is True

    again = run_module("machine_mark_for_deletion", args)
    assert again["changed"] is False
    assert again["machines"][0]["action"] == "already_deleting"

    kube.patch(path, {"metadata": {"finalizers": None}})
    gone = run_module("machine_mark_for_deletion", args)
    assert gone["changed"] is False
    assert gone["machines"][0]["action"] == "absent"
