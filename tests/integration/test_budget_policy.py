"""Budget verdicts from the eviction API's own rules, against the real API server (docs/behaviour.md 3.3,
docs/stalls.md): a Pod that is Running and not Ready meets its budget's unhealthyPodEvictionPolicy. Under
IfHealthyBudget (the default) a budget short of the healthy Pods it needs holds it - reported with that reason,
and as "never" when the budget needs every Pod it expects; under AlwaysAllow it is drained, and never called
"never". Check mode's preflight predicts both answers.

A Pod is made Running and not Ready as a kubelet would make it: its readiness gate's condition False. kwok, the
bed's kubelet, sets every readiness gate True when it starts a Pod and never computes Ready again (its pod-ready
stage matches Pending Pods only), so the test writes what a kubelet derives from the gate through the status
subresource: the gate False and Ready False."""

from __future__ import annotations

import pytest
from khelpers import pod_is_ready, wait_for
from test_machine_drain import GRACE, evictions, pod_body

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

GATE = "lifecycle.machine.dev/serving"
NEVER = "can never clear as things stand"


def pods_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods{'/' + name if name else ''}"


def budget_path(namespace: str) -> str:
    return f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/db"


def db_pod(kube: KubeApi, namespace: str, name: str, node: str) -> None:
    body = pod_body(name, node, grace=GRACE, labels={"app": "db"})
    body["spec"]["readinessGates"] = [{"conditionType": GATE}]
    kube.create(pods_path(namespace), body)
    wait_for(lambda: pod_is_ready(kube.get(pods_path(namespace, name)) or {}), what=f"Pod {name} Ready")


def make_unready(kube: KubeApi, namespace: str, name: str) -> None:
    """The readiness gate's condition False, and Ready False as the kubelet derives it from the gate (kwok does not)."""
    pod = kube.get(pods_path(namespace, name))
    conditions = [c for c in pod["status"]["conditions"] if c["type"] not in (GATE, "Ready")]
    conditions += [{"type": GATE, "status": "False"}, {"type": "Ready", "status": "False", "reason": "ReadinessGatesNotReady"}]
    kube.patch(pods_path(namespace, name), {"status": {"conditions": conditions}}, subresource_status=True)
    assert kube.get(pods_path(namespace, name))["status"]["phase"] == "Running"


def counted(kube: KubeApi, namespace: str, healthy: int) -> None:
    def observed() -> bool:
        pdb = kube.get(budget_path(namespace))
        status = pdb.get("status") or {}
        return status.get("observedGeneration") == pdb["metadata"]["generation"] and status.get("currentHealthy") == healthy

    wait_for(observed, what="the budget counted by the disruption controller")


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_an_unready_pod_if_healthy_budget_holds_is_reported_so_and_always_allow_lets_it_be_drained(
    *, flavour, kube, namespace, machine_node, make_node, run_module, audit_events
) -> None:
    machine, node = machine_node()
    elsewhere = make_node()
    db_pod(kube, namespace, "db-0", node)
    for name in ("db-1", "db-2"):
        db_pod(kube, namespace, name, elsewhere)
    make_unready(kube, namespace, "db-0")
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "db"}}},
    }
    kube.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body)
    counted(kube, namespace, healthy=2)
    key, pod = f"{namespace}/{machine}", f"{namespace}/db-0"
    machines = [{"name": machine, "namespace": namespace}]

    # IfHealthyBudget (unset): 2 healthy of the 3 it needs, so the eviction API holds the unready Pod - for good,
    # since the budget needs every Pod it expects, this one among them.
    plan = run_module("machine_delete", {"machines": machines}, check=True)
    [answer] = plan["preflight"]["batch"]["unready_pods"]
    assert (answer["pod"], answer["policy"], answer["answer"]) == (pod, "IfHealthyBudget", "refused"), answer
    assert key in plan["preflight"]["can_never_finish"], plan["preflight"]
    held = run_module("machine_drain", {"node": node, "wait": False})
    assert held["completed"] is False and held["evicted"] == [], held
    [blocker] = held["blockers"]
    assert (blocker["kind"], blocker["object"], blocker["verdict"]) == ("budget refusal", f"Pod {pod}", NEVER)
    assert "under unhealthyPodEvictionPolicy IfHealthyBudget a Pod that is not Ready goes only while the budget has the 3 healthy Pods" in blocker["reason"]
    assert (blocker["evidence"]["unhealthy_pod_eviction_policy"], blocker["evidence"]["pod_ready"]) == ("IfHealthyBudget", False)
    assert evictions(audit_events, namespace) == {"db-0": [429]}  # the server's own answer, not a prediction

    # AlwaysAllow: the eviction API lets the unready Pod go whatever the budget allows.
    kube.patch(budget_path(namespace), {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})
    counted(kube, namespace, healthy=2)
    plan = run_module("machine_delete", {"machines": machines}, check=True)
    [answer] = plan["preflight"]["batch"]["unready_pods"]
    assert (answer["policy"], answer["answer"]) == ("AlwaysAllow", "evicted") and key in plan["preflight"]["would_finish"], plan["preflight"]
    drained = run_module("machine_drain", {"node": node, "wait": True, "wait_timeout": 60, "wait_sleep": 1})
    assert drained.get("failed") is not True and drained["completed"] is True, drained
    assert drained["evicted"] == [pod] and not [b for b in drained.get("blockers") or [] if b["verdict"] == NEVER]
    # The Ready Pods elsewhere are untouched; the budget still holds them.
    assert all(pod_is_ready(kube.get(pods_path(namespace, name))) for name in ("db-1", "db-2"))
