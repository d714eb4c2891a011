"""The local control plane is real: upstream API server, controllers, scheduler
and kwok nodes behave as a cluster does for everything the collection relies on."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from khelpers import deployment, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
import cluster as cluster_tool


def _pods(kube: KubeApi, namespace: str, app: str) -> list[dict]:
    return kube.list(f"/api/v1/namespaces/{namespace}/pods", label_selector=f"app={app}")


def _ready(pod: dict) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _evict(kube: KubeApi, pod: dict) -> None:
    meta = pod["metadata"]
    kube.create(
        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": meta["name"], "namespace": meta["namespace"]}},
    )


def test_kubectl_reports_the_real_server_version(kubeconfig: str) -> None:
    kubectl = Path(cluster_tool.build_tools()) / "kubectl"
    out = subprocess.run([str(kubectl), "--kubeconfig", kubeconfig, "version", "-o", "json"], check=True, capture_output=True, text=True).stdout
    server = json.loads(out)["serverVersion"]
    expected = cluster_tool.kubernetes_version()
    assert server["gitVersion"] == expected
    assert server["major"] == expected[1:].split(".")[0]


def test_rbac_is_enforced(kube: KubeApi, namespace: str) -> None:
    """A ServiceAccount without bindings is refused: tests can rely on real RBAC."""
    kube.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "nobody"}})
    review = kube.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{namespace}:nobody",
                "resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction", "namespace": namespace},
            },
        },
    )
    assert review["status"]["allowed"] is False


def test_eviction_pdb_grace_period_and_rescheduling(kube: KubeApi, namespace: str, make_node) -> None:
    grace = 4
    pool = f"pool-{namespace}"
    nodes = [make_node(labels={"lm-pool": pool}) for _index in range(3)]
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 3, {"lm-pool": pool}, grace))
    kube.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    wait_for(lambda: len([p for p in _pods(kube, namespace, "web") if _ready(p)]) == 3, timeout=60, what="3 Ready pods")
    for pod in _pods(kube, namespace, "web"):
        assert pod["spec"]["nodeName"] in nodes

    def disruptions_allowed() -> bool:
        pdb = kube.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/web") or {}
        return (pdb.get("status") or {}).get("disruptionsAllowed") == 1

    wait_for(disruptions_allowed, timeout=60, what="the disruption controller to observe the budget")

    originals = {p["metadata"]["name"] for p in _pods(kube, namespace, "web")}
    first, second = _pods(kube, namespace, "web")[:2]
    drained_node = first["spec"]["nodeName"]
    # Every Node of the pool is cordoned while the two evictions are tried, so the
    # ReplicaSet's replacement stays Pending: kwok would otherwise make it Ready
    # within milliseconds and the budget would rightly allow the second eviction.
    for node in nodes:
        kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})

    evicted_at = time.time()
    _evict(kube, first)
    with pytest.raises(ApiError) as refused:
        _evict(kube, second)
    assert refused.value.status == 429
    assert "disruption budget" in refused.value.message
    for node in nodes:
        if node != drained_node:
            kube.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": False}})

    # Still there, terminating, before its grace period has run out.
    pod = kube.get(f"/api/v1/namespaces/{namespace}/pods/{first['metadata']['name']}")
    assert pod is not None
    assert pod["metadata"]["deletionTimestamp"]
    assert pod["metadata"]["deletionGracePeriodSeconds"] == grace
    time.sleep(max(0.0, evicted_at + grace - 1.5 - time.time()))
    assert kube.get(f"/api/v1/namespaces/{namespace}/pods/{first['metadata']['name']}") is not None, "pod vanished before its grace period ended"

    wait_for(lambda: kube.get(f"/api/v1/namespaces/{namespace}/pods/{first['metadata']['name']}") is None, timeout=30, what="the evicted pod to go")
    # deletionTimestamp (eviction time + grace) has whole-second resolution, and kwok
    # removes the Pod at that instant: up to a second less than grace after the call.
    assert time.time() - evicted_at >= grace - 1

    def replacement_ready() -> list[dict]:
        pods = [p for p in _pods(kube, namespace, "web") if _ready(p)]
        return pods if len(pods) == 3 else []

    pods = wait_for(replacement_ready, timeout=60, what="the ReplicaSet's replacement pod to be Ready")
    replacement = [p for p in pods if p["metadata"]["name"] not in originals]
    assert len(replacement) == 1
    assert all(p["spec"]["nodeName"] != drained_node for p in replacement), "replacement landed on the cordoned node"
