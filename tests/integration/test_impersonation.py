"""kubernetes.core's impersonation options reach the API server: a
ServiceAccount without rights is refused, one bound to the collection's shipped
ClusterRole (extensions/awx/rbac.yml) succeeds, groups count, and the API
server's audit log records the impersonated user."""

from __future__ import annotations

import pytest
import yaml
from conftest import machine_collection
from rbachelpers import RBAC, SA_NAMESPACE, SA_USER, apply

NOBODY = f"system:serviceaccount:{SA_NAMESPACE}:nobody"


@pytest.fixture(scope="module")
def shipped_rbac(kube) -> None:
    """extensions/awx/rbac.yml as shipped, a ServiceAccount bound to nothing, and
    the ClusterRole bound to a group."""
    for item in yaml.safe_load(RBAC.read_text())["items"]:
        apply(kube, item)
    apply(kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": SA_NAMESPACE}})
    apply(
        kube,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "lifecycle-machine-operators"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "lifecycle-machine"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "lm-operators"}],
        },
    )


def test_impersonated_user_without_rights_is_refused_and_changes_nothing(*, flavour, namespace, make_machine, run_module, kube, shipped_rbac) -> None:
    machine = make_machine(namespace)
    version = machine["metadata"]["resourceVersion"]
    name = machine["metadata"]["name"]
    read = run_module("machine_info", {"machine": name, "namespace": namespace, "impersonate_user": NOBODY})
    assert read.get("failed") and "403" in read["msg"], read
    hook = {"machine": name, "namespace": namespace, "point": "preDrain", "name": "guard", "owner": "lm-tests", "impersonate_user": NOBODY}
    written = run_module("machine_hook", hook)
    assert written.get("failed") and "403" in written["msg"], written
    assert kube.get(f"{machine_collection(flavour, namespace)}/{name}")["metadata"]["resourceVersion"] == version


def test_the_shipped_role_is_enough_and_the_audit_log_names_the_impersonated_user(
    *, flavour, namespace, make_machine, run_module, audit_events, shipped_rbac
) -> None:
    name = make_machine(namespace)["metadata"]["name"]
    hook = {"machine": name, "namespace": namespace, "point": "preTerminate", "name": "guard", "owner": "lm-tests", "impersonate_user": SA_USER}
    added = run_module("machine_hook", hook)
    assert not added.get("failed"), added.get("msg")
    assert added["changed"] is True
    # The AWX way: K8S_AUTH_* variables instead of task options.
    read = run_module("machine_info", {"machine": name, "namespace": namespace}, env_extra={"K8S_AUTH_IMPERSONATE_USER": SA_USER})
    assert not read.get("failed"), read.get("msg")
    assert [h["name"] for h in read["machines"][0]["hooks"]["preTerminate"]] == ["guard"]
    acted = [
        e
        for e in audit_events(namespace=namespace, resource="machines")
        if (e.get("impersonatedUser") or {}).get("username") == SA_USER and e.get("objectRef", {}).get("name") == name
    ]
    assert {e["verb"] for e in acted} >= {"get", "patch"}, "the audit log does not show the impersonated user's requests"
    assert all(e["user"]["username"] == "admin" for e in acted), "impersonation, not the ServiceAccount's own token"


def test_impersonated_groups_count(flavour, namespace, make_machine, run_module, shipped_rbac) -> None:
    name = make_machine(namespace)["metadata"]["name"]
    params = {"machine": name, "namespace": namespace, "impersonate_user": "lm-operator"}
    assert run_module("machine_info", params).get("failed"), "a user in no bound group must be refused"
    read = run_module("machine_info", {**params, "impersonate_groups": ["lm-operators", "system:authenticated"]})
    assert not read.get("failed"), read.get("msg")
    assert read["machines"][0]["name"] == name
