"""The view of a Machine every reader of Machines gets (``_machine/view.py``, pure)."""

from __future__ import annotations

from fake_machines import capi, openshift

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.view import describe

DRAIN_KEY = "pre-drain.delete.hook.machine.cluster.x-k8s.io/migrate"


def test_describe_an_openshift_machine() -> None:
    drained = {"type": "Drained", "status": "True", "reason": "Drained"}
    view = describe(openshift({"preTerminate": [("flush", "logs")]}, [drained], deleting=True))
    assert view == {
        "name": "m-1",
        "namespace": "openshift-machine-api",
        "api_version": "machine.openshift.io/v1beta1",
        "flavour": "openshift",
        "exists": True,
        "phase": "Running",
        "deleting": True,
        "deletion_timestamp": "2026-01-01T00:00:00Z",
        "finalizers": ["machine.machine.openshift.io"],
        "node_name": "worker-1",
        "cluster_name": None,
        "hooks": {"preDrain": [], "preTerminate": [{"name": "flush", "owner": "logs"}], "preCreate": []},
        "gates": {"drainable": True, "drained": True, "terminable": False, "creatable": True},
        "conditions": [drained],
        "infrastructure_ref": None,
        "bootstrap_ref": None,
        "labels": {"role": "worker"},
        "annotations": {},
    }


def test_describe_a_cluster_api_machine() -> None:
    view = describe(capi({DRAIN_KEY: "team-a"}))
    assert view["flavour"] == "clusterapi"
    assert (view["phase"], view["deleting"], view["node_name"], view["finalizers"], view["labels"]) == (None, False, None, [], {})
    assert view["cluster_name"] == "prod"
    assert view["hooks"] == {"preDrain": [{"name": "migrate", "owner": "team-a", "annotation": DRAIN_KEY}], "preTerminate": []}
    assert view["gates"] == {"drainable": False, "drained": False, "terminable": True, "creatable": True}
    assert view["infrastructure_ref"] == {"kind": "DockerMachine", "name": "m-2-infra", "namespace": "ns", "apiGroup": "infrastructure.cluster.x-k8s.io"}
    assert view["bootstrap_ref"] == {"kind": "KubeadmConfig", "name": "m-2-boot", "namespace": "ns", "apiGroup": "bootstrap.cluster.x-k8s.io"}


def test_describe_a_machine_that_is_gone() -> None:
    assert describe(None, openshift()) == {"name": "m-1", "namespace": "openshift-machine-api", "api_version": "machine.openshift.io/v1beta1", "exists": False}
