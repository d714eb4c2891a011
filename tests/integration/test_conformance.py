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

import datetime
import time

import conformance
import controllers
import pytest
import realctl
from conformance import Scenario, Side
from khelpers import fake_node, pod_is_ready, wait_for

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
    " the OpenShift drain controller waits inside kubectl's drain for up to 20 s and never writes Drained False"
    " (it sets it when an attempt fails, then returns before its status patch)"
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


# ---------------------------------------------------------------------------
# Cluster API v1.14.2's deletion decisions (docs/behaviour.md, "Cluster API v1.14.2's
# deletion decisions"): one scenario per rule, named after it.

PRE_DRAIN_HOOK = "pre-drain.delete.hook.machine.cluster.x-k8s.io/conformance"
PRE_TERMINATE_HOOK = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/conformance"
HOLD = "conformance.lifecycle.machine.dev/hold"
POKE = "conformance.lifecycle.machine.dev/poke"
FAKE_MACHINES = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines/{name}"
CAPI_MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{name}"


def machine_path(side: Side) -> str:
    return CAPI_MACHINES.format(namespace=side.namespace, name=side.machine)


def infra_path(side: Side) -> str:
    return FAKE_MACHINES.format(namespace=side.namespace, name=side.machine)


def has_reason(side: Side, reason: str) -> bool:
    return any(seen == reason for seen, _message in side.deleting)


def late_pod(workload: KubeApi, side: Side, name: str = "late-0") -> None:
    """A Pod bound to the (cordoned) Node after the drain, as a hook controller's log-flush Pod would be."""
    workload.create(f"/api/v1/namespaces/{side.pod_namespace}/pods", conformance.pod_body(name, side.pod_namespace, side.node, {}))


def since(side: Side, what: str) -> float | None:
    """Seconds since ``what`` was first noted for ``side`` (``note``), or None."""
    stamp = side.notes.get(what)
    return None if stamp is None else time.monotonic() - stamp


def note(side: Side, what: str) -> None:
    side.notes.setdefault(what, time.monotonic())


def _pod_after_pre_terminate_wait(kube: KubeApi, workload: KubeApi, side: Side) -> None:
    """At the preTerminate gate: a Pod lands on the Node, the Machine is touched (a
    reconcile for the controller), and 30 s later the hook goes."""
    if has_reason(side, "WaitingForPreTerminateHook") and once(side, "late"):
        late_pod(workload, side)
        note(side, "late")
    waited = since(side, "late")
    if waited is not None and waited > 5 and once(side, "poke"):
        kube.patch(machine_path(side), {"metadata": {"annotations": {POKE: "1"}}})
    if waited is not None and waited > 30 and once(side, "release"):
        kube.patch(machine_path(side), {"metadata": {"annotations": {PRE_TERMINATE_HOOK: None}}})


PRE_TERMINATE_WAIT_ENDS_DRAIN = Scenario(
    "pre-terminate-wait-ends-drain",
    pods={"web-0": {}},
    annotations={PRE_TERMINATE_HOOK: "conformance"},
    act=_pod_after_pre_terminate_wait,
)


def _wait_for_node_ref(kube: KubeApi, side: Side) -> None:
    wait_for(lambda: ((kube.get(machine_path(side)) or {}).get("status") or {}).get("nodeRef"), timeout=60, what=f"the nodeRef of {side.machine}")


def _delete_infra(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """The InfraMachine is gone before the Machine is deleted (deleted by hand, or by its provider)."""
    _wait_for_node_ref(kube, side)
    kube.delete(infra_path(side))
    wait_for(lambda: kube.get(infra_path(side)) is None, timeout=30, what=f"FakeMachine {side.machine} gone")


INFRA_GONE_NO_DRAIN = Scenario("infra-gone-no-drain", pods={"web-0": {}}, before_delete=_delete_infra)


def _start_infra_deletion(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """The InfraMachine is being deleted (held by a finalizer) when the Machine is deleted."""
    _wait_for_node_ref(kube, side)
    kube.patch(infra_path(side), {"metadata": {"finalizers": [HOLD]}})
    kube.delete(infra_path(side))


def _finish_infra_deletion(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    if time.monotonic() - side.started > 20 and once(side, "infra"):
        kube.patch(infra_path(side), {"metadata": {"finalizers": None}})


INFRA_DELETING_NO_DRAIN = Scenario(
    "infra-deleting-no-drain",
    pods={"web-0": {}},
    before_delete=_start_infra_deletion,
    act=_finish_infra_deletion,
)

# No controller ever set a nodeRef (the InfraMachine was never reported provisioned), but the
# InfraMachine's spec.providerID is the Node's: v1.14 finds the Node by it, drains and deletes it.
# Both sides also show InfrastructureReady (and Ready) False Deleting from the first write of the
# deletion: the InfraMachine has no Ready condition and never reported provisioned (row 32).
NODE_FOUND_BY_PROVIDER_ID = Scenario("node-by-provider-id", pods={"web-0": {}}, provisioned=False)


def _lift_pre_drain_hook(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """Bounds the scenario should a side wait at the pre-drain hook."""
    if time.monotonic() - side.started > 30 and once(side, "lift"):
        kube.patch(machine_path(side), {"metadata": {"annotations": {PRE_DRAIN_HOOK: None}}})


# No nodeRef and no Node with the InfraMachine's providerID: v1.14 skips every Node step,
# the pre-drain hooks among them (they gate the drain of a Node it cannot find).
NO_NODE_NO_PRE_DRAIN_WAIT = Scenario(
    "no-node-no-pre-drain-wait",
    pods={"web-0": {}},
    annotations={PRE_DRAIN_HOOK: "conformance"},
    provisioned=False,
    node_matches_infra=False,
    act=_lift_pre_drain_hook,
)


def _two_budgets(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    for name in ("two-a", "two-b"):
        body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}}
        # minAvailable 0 allows every disruption (maxUnavailable would need the Pod's controller).
        body["spec"] = {"minAvailable": 0, "selector": {"matchLabels": {"group": "two"}}}
        workload.create(f"/apis/policy/v1/namespaces/{side.pod_namespace}/poddisruptionbudgets", body)


def _answered(events: list[dict], code: int) -> list[dict]:
    return [e for e in events if (e.get("responseStatus") or {}).get("code") == code]


def _drop_one_budget(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    """45 s after the first eviction answered 500 (two budgets select the Pod), one budget goes."""
    if "500" not in side.notes and _answered(conformance.evictions(side.audit, side), 500):
        note(side, "500")
    waited = since(side, "500")
    if waited is not None and waited > 45 and once(side, "drop"):
        workload.delete(f"/apis/policy/v1/namespaces/{side.pod_namespace}/poddisruptionbudgets/two-b")


def _stamp(event: dict) -> float:
    return datetime.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()


def most_within(stamps: list[float], window: float) -> int:
    """The most of ``stamps`` that fall within one ``window`` of seconds."""
    stamps = sorted(stamps)
    return max((sum(1 for other in stamps[i:] if other - start < window) for i, start in enumerate(stamps)), default=0)


def _eviction_pace(events: list[dict]) -> dict:
    failed = _answered(events, 500)
    return {
        "answered 500": sorted({e["objectRef"]["name"] for e in failed}),
        # The controller asks again 20 s after a failed eviction (its drain requeue); with one
        # budget dropped 45 s after the first 500 that is three 500s, at most one per 19 s.
        "most 500s within 19 s": most_within([_stamp(e) for e in failed], 19.0),
    }


EVICTION_ERROR_RETRIED_AFTER_20S = Scenario(
    "eviction-error-20s",
    pods={"two-0": {"labels": {"group": "two"}}},
    setup=_two_budgets,
    act=_drop_one_budget,
    measure=_eviction_pace,
)


def _volume_and_late_pod(_kube: KubeApi, workload: KubeApi, side: Side) -> None:
    """While the volumes are waited for, a Pod lands on the Node; the volume detaches once
    that Pod is gone, or 45 s later."""
    if has_reason(side, "WaitingForVolumeDetach") and once(side, "late"):
        late_pod(workload, side)
        note(side, "late")
    waited = since(side, "late")
    if waited is None:
        return
    gone = workload.get(f"/api/v1/namespaces/{side.pod_namespace}/pods/late-0") is None
    if (gone or waited > 45) and once(side, "detach"):
        workload.patch(f"/api/v1/nodes/{side.node}", {"status": {"volumesAttached": []}}, subresource_status=True)


# The drain runs again on every look until the preTerminate wait starts: a Pod that lands on
# the Node while the volumes are waited for is evicted by v1.14.
DRAIN_ONCE = (
    "the collection's drain ends once, before the volume wait begins (docs/behaviour.md, row 19 of the decisions);"
    " the controller drains again on each look until the preTerminate wait starts, and evicts the late Pod"
)
DRAIN_REPEATED_UNTIL_PRE_TERMINATE = Scenario(
    "drain-repeated-in-volume-wait",
    pods={"web-0": {}},
    setup=_attach_volume,
    act=_volume_and_late_pod,
    expected={"evicted": DRAIN_ONCE, "Deleting": DRAIN_ONCE, "conditions": DRAIN_ONCE},
)


def _blocking_budget_and_drain_timeout(kube: KubeApi, workload: KubeApi, side: Side) -> None:
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"}}
    body["spec"] = {"minAvailable": 1, "selector": {"matchLabels": {"group": "db"}}}
    workload.create(f"/apis/policy/v1/namespaces/{side.pod_namespace}/poddisruptionbudgets", body)
    wait_for(
        lambda: (
            ((workload.get(f"/apis/policy/v1/namespaces/{side.pod_namespace}/poddisruptionbudgets/db") or {}).get("status") or {}).get("currentHealthy") == 1
        ),
        what="the budget's status",
    )
    kube.patch(machine_path(side), {"spec": {"deletion": {"nodeDrainTimeoutSeconds": 15}}})


NODE_DRAIN_TIMEOUT = Scenario(
    "drain-timeout",
    pods={"db-0": {"labels": {"group": "db"}}},
    setup=_blocking_budget_and_drain_timeout,
)


def _stuck_volume_and_timeout(kube: KubeApi, workload: KubeApi, side: Side) -> None:
    _attach_volume(kube, workload, side)
    kube.patch(machine_path(side), {"spec": {"deletion": {"nodeVolumeDetachTimeoutSeconds": 10}}})


NODE_VOLUME_DETACH_TIMEOUT = Scenario("volume-timeout", pods={"web-0": {}}, setup=_stuck_volume_and_timeout)


def _delete_node(kube: KubeApi, workload: KubeApi, side: Side) -> None:
    """The Node is gone (deleted by hand, say) before the Machine is deleted; its Pods stay in the API a while."""
    _wait_for_node_ref(kube, side)
    workload.delete(f"/api/v1/nodes/{side.node}")
    wait_for(lambda: workload.get(f"/api/v1/nodes/{side.node}") is None, timeout=30, what=f"Node {side.node} gone")


# The nodeRef names a Node that no longer exists: the drain is finished (nothing to drain), the
# volume wait skipped, and the Node's deletion succeeds.
NODE_GONE_NOTHING_TO_DRAIN = Scenario("node-gone", pods={"web-0": {}}, before_delete=_delete_node)

# The exclude annotation skips the volume wait, however long a volume stays attached.
EXCLUDE_VOLUME_WAIT = Scenario(
    "exclude-volume-wait",
    pods={"web-0": {}},
    annotations={"machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach": ""},
    setup=_attach_volume,
)


def _lift_pre_drain_hook_soon(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    if has_reason(side, "WaitingForPreDrainHook") and once(side, "gate"):
        note(side, "gate")
    waited = since(side, "gate")
    if waited is not None and waited > 10 and once(side, "lift"):
        kube.patch(machine_path(side), {"metadata": {"annotations": {PRE_DRAIN_HOOK: None}}})


# A preDrain hook holds the Machine for 10 s: the wait's start is recorded in status.deletion.
PRE_DRAIN_WAIT_RECORDED = Scenario("pre-drain-wait", pods={"web-0": {}}, annotations={PRE_DRAIN_HOOK: "conformance"}, act=_lift_pre_drain_hook_soon)


def _through_every_gate(kube: KubeApi, workload: KubeApi, side: Side) -> None:
    """Each gate holds the Machine a while: the preDrain hook goes 10 s after the wait shows, the
    volume 5 s after its wait shows, the preTerminate hook 10 s after its wait shows."""
    for reason, wait, step in (
        ("WaitingForPreDrainHook", 10, lambda: kube.patch(machine_path(side), {"metadata": {"annotations": {PRE_DRAIN_HOOK: None}}})),
        ("WaitingForVolumeDetach", 5, lambda: workload.patch(f"/api/v1/nodes/{side.node}", {"status": {"volumesAttached": []}}, subresource_status=True)),
        ("WaitingForPreTerminateHook", 10, lambda: kube.patch(machine_path(side), {"metadata": {"annotations": {PRE_TERMINATE_HOOK: None}}})),
    ):
        if has_reason(side, reason):
            note(side, reason)
        waited = since(side, reason)
        if waited is not None and waited > wait and once(side, reason):
            step()


# Row 29: the v1beta2 Ready condition of a Machine being deleted, in every stage that holds it: False,
# NotReady, with the line "* Deleting: Machine deletion in progress, stage: <Deleting's reason>".
READY_WHILE_DELETING = Scenario(
    "ready-while-deleting",
    pods={"web-0": {}},
    annotations={PRE_DRAIN_HOOK: "conformance", PRE_TERMINATE_HOOK: "conformance"},
    setup=_attach_volume,
    act=_through_every_gate,
    ready_v1beta2=True,
)


def _hold_and_delete(kube: KubeApi, path: str) -> None:
    """Delete ``path``, held by a finalizer of the test's so that it stays "being deleted"."""
    current = kube.get(path)
    finalizers = list(current["metadata"].get("finalizers") or [])
    if conformance.HOLD_FINALIZER not in finalizers:
        meta = {"resourceVersion": current["metadata"]["resourceVersion"], "finalizers": [*finalizers, conformance.HOLD_FINALIZER]}
        kube.patch(path, {"metadata": meta})
    kube.delete(path)


def _delete_cluster(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """The side's Cluster is deleted as its Machine is (the Cluster controller then deletes the real Machine itself)."""
    _hold_and_delete(kube, f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{side.namespace}/clusters/{side.cluster}")


def _pre_terminate_hook_goes(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """The preTerminate hook goes 10 s after the wait at it shows; a preDrain hook, should a side wait at it, after 30 s."""
    _lift_pre_drain_hook(kube, _workload, side)
    if has_reason(side, "WaitingForPreTerminateHook"):
        note(side, "gate")
    waited = since(side, "gate")
    if waited is not None and waited > 10 and once(side, "release"):
        kube.patch(machine_path(side), {"metadata": {"annotations": {PRE_TERMINATE_HOOK: None}}})


# Row 1: the Machine's Cluster is being deleted: no Node step (no preDrain wait, no drain, no volume
# wait, the Node kept), but the preTerminate gate, the infrastructure and the bootstrap still.
CLUSTER_DELETING = Scenario(
    "cluster-deleting",
    pods={"web-0": {}},
    annotations={PRE_DRAIN_HOOK: "conformance", PRE_TERMINATE_HOOK: "conformance"},
    own_cluster=True,
    at_delete=_delete_cluster,
    act=_pre_terminate_hook_goes,
)


def _delete_control_plane_machine(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """The Cluster's only control-plane Machine is deleted (and gone) before the Machine is."""
    path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{side.namespace}/machines/{side.cluster}-control-plane-0"
    kube.delete(path)
    wait_for(lambda: kube.get(path) is None, timeout=60, what=f"Machine {side.cluster}-control-plane-0 gone")


# Row 6: no control-plane Machine of the Cluster is left that is not being deleted: no Node step.
NO_CONTROL_PLANE_MACHINE = Scenario(
    "no-control-plane-machine",
    pods={"web-0": {}},
    annotations={PRE_DRAIN_HOOK: "conformance"},
    own_cluster=True,
    before_delete=_delete_control_plane_machine,
    act=_lift_pre_drain_hook,
)


def _delete_control_plane(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    """The object of the Cluster's spec.controlPlaneRef is being deleted (its finalizer holds it)."""
    kube.delete(f"/apis/{conformance.FAKE_CONTROL_PLANE_GROUP}/v1beta1/namespaces/{side.namespace}/fakecontrolplanes/{side.cluster}-cp")


# Row 4: the control-plane object (spec.controlPlaneRef) is being deleted: no Node step.
CONTROL_PLANE_DELETING = Scenario(
    "control-plane-deleting",
    pods={"web-0": {}},
    annotations={PRE_DRAIN_HOOK: "conformance"},
    own_cluster=True,
    control_plane="object",
    before_delete=_delete_control_plane,
    act=_lift_pre_drain_hook,
)

# Row 5: the control plane is externally managed (status.externalManagedControlPlane) and the Cluster
# has no control-plane Machine: the Node steps apply all the same (the preDrain wait, the drain, the Node).
EXTERNAL_CONTROL_PLANE = Scenario(
    "external-control-plane",
    pods={"web-0": {}},
    annotations={PRE_DRAIN_HOOK: "conformance"},
    own_cluster=True,
    control_plane="external",
    act=_lift_pre_drain_hook_soon,
)

V1_14_SCENARIOS = [
    PRE_TERMINATE_WAIT_ENDS_DRAIN,
    INFRA_GONE_NO_DRAIN,
    INFRA_DELETING_NO_DRAIN,
    NODE_FOUND_BY_PROVIDER_ID,
    NO_NODE_NO_PRE_DRAIN_WAIT,
    EVICTION_ERROR_RETRIED_AFTER_20S,
    DRAIN_REPEATED_UNTIL_PRE_TERMINATE,
    NODE_DRAIN_TIMEOUT,
    NODE_VOLUME_DETACH_TIMEOUT,
    NODE_GONE_NOTHING_TO_DRAIN,
    EXCLUDE_VOLUME_WAIT,
    PRE_DRAIN_WAIT_RECORDED,
    READY_WHILE_DELETING,
    CLUSTER_DELETING,
    NO_CONTROL_PLANE_MACHINE,
    CONTROL_PLANE_DELETING,
    EXTERNAL_CONTROL_PLANE,
]
# The times v1.14 records in status.deletion, compared by name: waitForNodeVolumeDetachStartTime
# whenever the volume wait runs, also with nothing attached or the Node gone (docs/behaviour.md, row 21a).
for _scenario in V1_14_SCENARIOS:
    _scenario.deletion_status = True


def test_cluster_api_v1_14_deletion_decisions_side_by_side(capi_plane: dict) -> None:
    started = time.monotonic()
    conformance.run_capi(capi_plane, V1_14_SCENARIOS)
    print(f"Cluster API, {len(V1_14_SCENARIOS)} v1.14 deletion decisions side by side: {time.monotonic() - started:.1f} s")


# OpenShift: a Machine whose Node nodelink never linked (no Node carries its providerID): the drain
# controller records the drain as skipped (Drained True, the Event DrainSkipped), the instance goes,
# and there is no Node to delete.
MAPI_NO_NODE = Scenario("no-node", pods={"web-0": {}}, node_matches_infra=False)


def test_openshift_no_node_ref_side_by_side(mapi_real_namespace_plane: dict) -> None:
    started = time.monotonic()
    conformance.run_mapi(mapi_real_namespace_plane, [MAPI_NO_NODE])
    print(f"OpenShift, a Machine without a nodeRef side by side: {time.monotonic() - started:.1f} s")


# OpenShift row O3: control-plane Nodes are drained one at a time. Both sides' Nodes are control-plane
# Nodes and a third control-plane Node is left cordoned; 45 s after the deletions start (each side has
# looked at least twice by then, every 20 s) it is uncordoned. Neither side may cordon its own Node
# before, and both record the controller's DrainProceeds and DrainRequeued Events. After that one side
# goes first and the other waits again until that side's Node is gone: the two Nodes are never drained
# side by side (the sides share one cluster, as two Machines of one OpenShift cluster do).
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
CORDONED_CONTROL_PLANE = "control-plane-cordoned-node"
UNCORDON_AFTER = 45
control_plane_seen: dict[str, float] = {}


def _cordoned_control_plane_node(kube: KubeApi, _workload: KubeApi, _side: Side) -> None:
    if kube.get(f"/api/v1/nodes/{CORDONED_CONTROL_PLANE}") is None:
        node = fake_node(CORDONED_CONTROL_PLANE, {CONTROL_PLANE_LABEL: ""})
        node["spec"]["unschedulable"] = True
        kube.create("/api/v1/nodes", node)


def _uncordon_later(kube: KubeApi, _workload: KubeApi, side: Side) -> None:
    if side.cordoned and "cordoned" not in side.notes:
        note(side, "cordoned")
    if time.monotonic() - side.started > UNCORDON_AFTER and "uncordoned" not in control_plane_seen:
        kube.patch(f"/api/v1/nodes/{CORDONED_CONTROL_PLANE}", {"spec": {"unschedulable": None}})
        control_plane_seen["uncordoned"] = time.monotonic()
    control_plane_sides.setdefault(side.scenario, {})[side.role] = side
    # Both Nodes cordoned at once (read together): drained side by side.
    if side.cordoned and len(control_plane_sides[side.scenario]) == 2:
        nodes = [kube.get(f"/api/v1/nodes/{each.node}") for each in control_plane_sides[side.scenario].values()]
        if all(node and (node.get("spec") or {}).get("unschedulable") and not node["metadata"].get("deletionTimestamp") for node in nodes):
            control_plane_seen["both cordoned"] = time.monotonic()


control_plane_sides: dict[str, dict[str, Side]] = {}


def _control_plane_gate(side: Side, events: list[tuple[str, str, str]]) -> dict:
    uncordoned = control_plane_seen.get("uncordoned", float("inf"))
    return {
        "control-plane gate Events": sorted(event for event in events if event[1] in ("DrainProceeds", "DrainRequeued")),
        "own Node cordoned while the other control-plane Node was": side.notes.get("cordoned", float("inf")) < uncordoned,
        "both control-plane Nodes cordoned at once": "both cordoned" in control_plane_seen,
    }


MAPI_CONTROL_PLANE = Scenario(
    "control-plane-cordoned",
    pods={"web-0": {}},
    node_labels={CONTROL_PLANE_LABEL: ""},
    setup=_cordoned_control_plane_node,
    act=_uncordon_later,
    observe=_control_plane_gate,
    expected=MAPI_EXPECTED,
)


def test_openshift_control_plane_nodes_one_at_a_time_side_by_side(mapi_real_namespace_plane: dict) -> None:
    started = time.monotonic()
    control_plane_seen.clear()
    control_plane_sides.clear()
    reports = conformance.run_mapi(mapi_real_namespace_plane, [MAPI_CONTROL_PLANE])
    if reports:
        assert "uncordoned" in control_plane_seen, "the cordoned control-plane Node was never uncordoned"
        report = reports[0]
        assert "control-plane gate Events [same]: [('Normal', 'DrainProceeds', 'Node drain proceeds'), ('Normal', 'DrainRequeued'" in report, report
        assert "own Node cordoned while the other control-plane Node was [same]: False" in report, report
        assert "both control-plane Nodes cordoned at once [same]: False" in report, report
    print(f"OpenShift, control-plane Nodes one at a time side by side: {time.monotonic() - started:.1f} s")
