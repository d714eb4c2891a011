"""Differential conformance with the real machine controllers (docs/behaviour.md,
"Side by side with the real controllers").

Each scenario builds two identical Machines, Nodes and Pods in the same control
planes; the real controller deletes one, the collection's ``machine_delete``
module its twin, at the same time; conformance.py compares what each did. A
scenario declares the keys on which the two differ on purpose, with the reason;
any other difference fails, and so does a declared one that went away.

Run by ``make conformance``; ``make test`` runs the two tests marked
``real_controllers_subset``.
"""

from __future__ import annotations

import time

import conformance
import controllers
import pytest
import realctl
from conformance import Scenario, Side
from khelpers import pod_is_ready, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]

DRAIN_LABEL = "cluster.x-k8s.io/drain"
UNDELETABLE = "conformance.lifecycle.machine.dev/undeletable"


def once(side: Side, what: str) -> bool:
    """True the first time ``what`` is asked for ``side``."""
    if what in side.acted:
        return False
    side.acted.add(what)
    return True


def message_has(side: Side, text: str) -> bool:
    return any(text in message for _reason, message in side.deleting)


def delete_pods(workload: KubeApi, side: Side, *names: str) -> None:
    for name in names:
        workload.request("DELETE", f"/api/v1/namespaces/{side.pod_namespace}/pods/{name}", query={"gracePeriodSeconds": 0})


# ---------------------------------------------------------------------------
# Cluster API scenarios


def order_rule(name: str, order: int, tier: str) -> dict:
    return {"name": name, "drain": {"behavior": "Drain", "order": order}, "pods": [{"selector": {"matchLabels": {"tier": tier}}}]}


ORDERED = Scenario(
    "order",
    pods={"first-0": {"labels": {"tier": "first"}}, "web-0": {}, "web-1": {}, "last-0": {"labels": {"tier": "last"}}},
    rules=[order_rule("first", -5, "first"), order_rule("last", 10, "last")],
    groups={"first-0": "order -5", "web-0": "order 0", "web-1": "order 0", "last-0": "order 10"},
)


def _complete_waited_pods(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    if message_has(side, "waiting for completion") and once(side, "complete"):
        delete_pods(workload, side, "job-label", "job-rule")


SKIP_AND_WAIT = Scenario(
    "skip-wait",
    pods={
        "keep-label": {"labels": {DRAIN_LABEL: "skip"}},
        "keep-rule": {"labels": {"tier": "keep"}},
        "job-label": {"labels": {DRAIN_LABEL: "wait-completed"}},
        "job-rule": {"labels": {"tier": "job"}},
        "web-0": {},
    },
    rules=[
        {"name": "keep", "drain": {"behavior": "Skip"}, "pods": [{"selector": {"matchLabels": {"tier": "keep"}}}]},
        {"name": "job", "drain": {"behavior": "WaitCompleted"}, "pods": [{"selector": {"matchLabels": {"tier": "job"}}}]},
    ],
    act=_complete_waited_pods,
)


def _daemonset(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    template = {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": side.node}, "containers": [{"name": "a", "image": "a:1"}]},
    }
    body = {"metadata": {"name": "agent"}, "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template}}
    workload.create(f"/apis/apps/v1/namespaces/{side.pod_namespace}/daemonsets", {"apiVersion": "apps/v1", "kind": "DaemonSet", **body})
    wait_for(
        lambda: any(pod_is_ready(p) for p in workload.list(f"/api/v1/namespaces/{side.pod_namespace}/pods", label_selector="app=agent")),
        what=f"the DaemonSet Pod on {side.node}",
    )


DAEMONSET_AND_STATIC = Scenario(
    "ds-static",
    pods={"static-0": {"annotations": {"kubernetes.io/config.mirror": "hash", "kubernetes.io/config.source": "file"}, "owners": "node"}, "web-0": {}},
    setup=_daemonset,
)


def _budget(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"}}
    body["spec"] = {"minAvailable": 2, "selector": {"matchLabels": {"group": "db"}}}
    workload.create(f"/apis/policy/v1/namespaces/{side.pod_namespace}/poddisruptionbudgets", body)
    wait_for(
        lambda: (
            ((workload.get(f"/apis/policy/v1/namespaces/{side.pod_namespace}/poddisruptionbudgets/db") or {}).get("status") or {}).get("currentHealthy") == 2
        ),
        what="the budget's status",
    )


def _lift_budget(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    """Once the budget has refused an eviction, and the drain has said so, delete it."""
    refused = any((e.get("responseStatus") or {}).get("code") == 429 for e in conformance.evictions(side.audit, side))
    if refused and "refused" not in side.acted:
        side.acted.add("refused")
        side.seen_at = time.monotonic()
    if refused and time.monotonic() - side.seen_at > 3 and once(side, "lift"):
        workload.delete(f"/apis/policy/v1/namespaces/{side.pod_namespace}/poddisruptionbudgets/db")


NEXT_PASS_TIMING = (
    "when the collection looks again (2 s after a refusal) the Pods evicted before may still be terminating;"
    " the controller looks 20 s later, when they are gone"
)

BUDGET = Scenario(
    "pdb",
    pods={"db-0": {"labels": {"group": "db"}}, "db-1": {"labels": {"group": "db"}}, "web-0": {}},
    setup=_budget,
    act=_lift_budget,
    expected={"refused (429)": "the collection stops asking a budget after its first refusal in a pass and reports its other Pods with it"},
    tolerated={"Deleting": NEXT_PASS_TIMING, "conditions": NEXT_PASS_TIMING},
)

UNREACHABLE = Scenario("unreachable", pods={"old-0": {"deleted": 30}, "fresh-0": {}}, unreachable=True)

EXCLUDED = Scenario("exclude", pods={"web-0": {}}, annotations={"machine.cluster.x-k8s.io/exclude-node-draining": ""})


def _attach_volume(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    attached = {"status": {"volumesAttached": [{"name": f"kubernetes.io/csi/fake^{side.node}", "devicePath": ""}]}}
    workload.patch(f"/api/v1/nodes/{side.node}", attached, subresource_status=True)


def _detach_volume(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    if any(reason == "WaitingForVolumeDetach" for reason, _message in side.deleting) and once(side, "detach"):
        workload.patch(f"/api/v1/nodes/{side.node}", {"status": {"volumesAttached": []}}, subresource_status=True)


VOLUMES = Scenario("volumes", pods={"web-0": {}}, setup=_attach_volume, act=_detach_volume)


def _undeletable_node(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    """A ValidatingAdmissionPolicy that refuses to delete the Nodes carrying a label, and that label."""
    policies = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    if workload.get(f"{policies}/conformance-undeletable-nodes") is None:
        rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["nodes"]}]
        workload.create(
            policies,
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "conformance-undeletable-nodes"},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": rules},
                    "validations": [{"expression": f"!('{UNDELETABLE}' in oldObject.metadata.labels)", "message": "this Node cannot be deleted"}],
                },
            },
        )
        workload.create(
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": "conformance-undeletable-nodes"},
                "spec": {"policyName": "conformance-undeletable-nodes", "validationActions": ["Deny"]},
            },
        )
        time.sleep(2)  # the policy takes effect once the API server's informer has it
    workload.patch(f"/api/v1/nodes/{side.node}", {"metadata": {"labels": {UNDELETABLE: "true"}}})


NODE_DELETION_TIMEOUT = Scenario(
    "node-timeout",
    pods={"web-0": {}},
    setup=_undeletable_node,
    node_deletion_timeout=1,
    expected={"Deleting": "the collection records the failed Node deletion under DeletingNode before it looks at the timeout"},
)


CAPI_SCENARIOS = [ORDERED, SKIP_AND_WAIT, DAEMONSET_AND_STATIC, BUDGET, UNREACHABLE, VOLUMES, NODE_DELETION_TIMEOUT]


def test_cluster_api_side_by_side(capi_plane: dict) -> None:
    started = time.monotonic()
    conformance.run_capi(capi_plane, CAPI_SCENARIOS)
    print(f"Cluster API, {len(CAPI_SCENARIOS)} scenarios side by side: {time.monotonic() - started:.1f} s")


@pytest.mark.real_controllers_subset
def test_cluster_api_exclude_node_draining_side_by_side(capi_plane: dict) -> None:
    started = time.monotonic()
    conformance.run_capi(capi_plane, [EXCLUDED])
    print(f"Cluster API, exclude-node-draining side by side: {time.monotonic() - started:.1f} s")


# ---------------------------------------------------------------------------
# OpenShift scenarios


@pytest.fixture
def mapi_real_namespace_plane(request: pytest.FixtureRequest):
    """A control plane with the real OpenShift machine controller limited to the
    real Machines' namespace (it has no watch filter), stopped after the test."""
    realctl.binaries(request, "mapi")
    state_dir = realctl.new_state_dir("mapi")
    try:
        yield controllers.up_mapi(state_dir, conformance.MAPI_REAL_NAMESPACE, build=False, quiet=True)
    finally:
        controllers.down(state_dir)


def has_condition(side: Side, condition_type: str, status: str) -> bool:
    return any(entry[0] == condition_type and entry[1] == status for entry in side.conditions)


def _open_gates(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """Both sides wait at each gate for a few seconds, then the hook goes."""
    path = f"{conformance.mapi_machines(side.namespace)}/{side.machine}"
    if time.monotonic() - side.started > 10 and once(side, "preDrain"):
        kube.patch(path, {"spec": {"lifecycleHooks": {"preDrain": None}}})
    if has_condition(side, "Drained", "True") and "drained" not in side.acted:
        side.acted.add("drained")
        side.seen_at = time.monotonic()  # when the drain was seen finished
    if "drained" in side.acted and time.monotonic() - side.seen_at > 4 and once(side, "preTerminate"):
        kube.patch(path, {"spec": {"lifecycleHooks": {"preTerminate": None}}})


# What differs on purpose in every OpenShift scenario (docs/behaviour.md, "Side by side with the real controllers").
MAPI_EVENTS = (
    "the collection records Cluster API's Events (SuccessfulDrainNode, NodeVolumesDetached) on OpenShift Machines too;"
    " the OpenShift controller records DrainBlocked, DrainProceeds, DrainSucceeded and Deleted"
)
MAPI_DRAINED = (
    "the collection shows each drain pass in Drained (False, DrainError, the progress message);"
    " the OpenShift controller waits inside kubectl's drain for up to 20 s and writes Drained False only when that fails"
)
MAPI_EXPECTED = {"Events": MAPI_EVENTS, "conditions": MAPI_DRAINED}

MAPI_HOOKS = Scenario(
    "hooks",
    pods={"web-0": {}},
    hooks={"preDrain": [{"name": "drain-gate", "owner": realctl.HOOK_OWNER}], "preTerminate": [{"name": "terminate-gate", "owner": realctl.HOOK_OWNER}]},
    act=_open_gates,
    expected=MAPI_EXPECTED,
)

MAPI_DAEMONSET = Scenario(
    "ds",
    pods={"web-0": {}, "static-0": {"annotations": {"kubernetes.io/config.mirror": "hash"}, "owners": "node"}},
    setup=_daemonset,
    expected=MAPI_EXPECTED,
)

MAPI_BUDGET = Scenario(
    "pdb",
    pods={"db-0": {"labels": {"group": "db"}}, "db-1": {"labels": {"group": "db"}}, "web-0": {}},
    setup=_budget,
    act=_lift_budget,
    expected={**MAPI_EXPECTED, "refused (429)": BUDGET.expected["refused (429)"]},
)


def test_openshift_side_by_side(mapi_real_namespace_plane: dict) -> None:
    started = time.monotonic()
    conformance.run_mapi(mapi_real_namespace_plane, [MAPI_HOOKS, MAPI_BUDGET])
    print(f"OpenShift, hooks and budget side by side: {time.monotonic() - started:.1f} s")


@pytest.mark.real_controllers_subset
def test_openshift_daemonset_and_static_pod_side_by_side(mapi_real_namespace_plane: dict) -> None:
    started = time.monotonic()
    conformance.run_mapi(mapi_real_namespace_plane, [MAPI_DAEMONSET])
    print(f"OpenShift, DaemonSet and static Pod side by side: {time.monotonic() - started:.1f} s")
