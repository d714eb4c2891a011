"""machine_drain against the real API server, proven by watching the API.

A PodRecorder watches each test's namespace on its own connection and records
the order in which Pods got a deletionTimestamp and disappeared; the ordering,
PodDisruptionBudget and gate assertions are made on that record, not on what
the module says about itself. kwok plays the kubelet: a Pod disappears when its
grace period (2 s here) ends.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from conftest import REPO, machine_collection
from khelpers import PodRecorder, capi_path, deployment, pod_is_ready, ready_pods_on, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import TERMINATING_NAMESPACE_MESSAGE
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

GRACE = 2
DRAIN_NODE = REPO / "playbooks" / "drain_node.yml"
PDB_REFUSAL = "cannot evict pod as it would violate the pod's disruption budget."
CAPI_PRE_DRAIN = "pre-drain.delete.hook.machine.cluster.x-k8s.io"
EXCLUDE_ANNOTATION = {
    "openshift": "machine.openshift.io/exclude-node-draining",
    "v1beta1": "machine.cluster.x-k8s.io/exclude-node-draining",
    "v1beta2": "machine.cluster.x-k8s.io/exclude-node-draining",
}
CAPI_ONLY = pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"], indirect=True)


# ---------------------------------------------------------------------------
# Helpers


def pod_body(name: str, node: str, *, grace: int = GRACE, labels: dict | None = None, annotations: dict | None = None, owners: list | None = None) -> dict:
    metadata: dict = {"name": name, "labels": labels or {}, "annotations": annotations or {}}
    if owners:
        metadata["ownerReferences"] = owners
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace, "containers": [{"name": "app", "image": "app:1"}]},
    }


def make_pods(kube: KubeApi, namespace: str, node: str, names: dict[str, dict], wait_ready: bool = True) -> None:
    """Create bare Pods bound to ``node``: ``{name: {"labels": ..., ...}}``; wait until kwok runs them."""
    for name, extra in names.items():
        kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_body(name, node, **extra))
    if wait_ready:
        for name in names:
            wait_for(lambda name=name: pod_is_ready(kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}") or {}), what=f"Pod {name} Ready")


def get_pod(kube: KubeApi, namespace: str, name: str) -> dict | None:
    return kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def node_unschedulable(kube: KubeApi, node: str) -> bool:
    return bool(kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"))


def order_rule(name: str, order: int, **labels: str) -> dict:
    return {"name": name, "drain": {"behavior": "Drain", "order": order}, "pods": [{"selector": {"matchLabels": labels}}]}


def machine_path(flavour: str, namespace: str, name: str) -> str:
    return f"{machine_collection(flavour, namespace)}/{name}"


def delete_machine(kube: KubeApi, flavour: str, namespace: str, name: str) -> dict:
    """Mark a Machine for deletion (its finalizer keeps it in the API)."""
    kube.delete(machine_path(flavour, namespace, name))
    return wait_for(lambda: (m := kube.get(machine_path(flavour, namespace, name))) and m["metadata"].get("deletionTimestamp") and m, what="deletionTimestamp")


def conditions(machine: dict, flavour: str) -> tuple[dict, dict]:
    """(v1beta1-style conditions by type, v1beta2 conditions by type) of a Machine."""
    status = machine.get("status") or {}
    if flavour == "openshift":
        return {c["type"]: c for c in status.get("conditions") or []}, {}
    if flavour == "v1beta1":
        v1, v2 = status.get("conditions"), (status.get("v1beta2") or {}).get("conditions")
    else:
        v1, v2 = ((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions"), status.get("conditions")
    return {c["type"]: c for c in v1 or []}, {c["type"]: c for c in v2 or []}


def drain_start_time(machine: dict, flavour: str) -> str | None:
    if flavour == "openshift":
        return (machine["metadata"].get("annotations") or {}).get("lifecycle.machine.dev/node-drain-start-time")
    return ((machine.get("status") or {}).get("deletion") or {}).get("nodeDrainStartTime")


def machine_events(kube: KubeApi, namespace: str, name: str, reason: str) -> list[dict]:
    events = kube.list(f"/api/v1/namespaces/{namespace}/events")
    return [e for e in events if e["involvedObject"].get("name") == name and e.get("reason") == reason]


def evictions(audit_events, namespace: str) -> dict[str, list[int]]:
    """Pod name -> HTTP status of every (real, not dry-run) eviction the API server logged."""
    result: dict[str, list[int]] = {}
    for event in audit_events(namespace=namespace, resource="pods", subresource="eviction", verb="create"):
        if "dryRun=All" in event.get("requestURI", ""):
            continue
        result.setdefault(event["objectRef"]["name"], []).append((event.get("responseStatus") or {}).get("code"))
    return result


def in_background(run_module, *args, **kwargs) -> tuple[threading.Thread, dict]:
    """Run a module in a thread (a task still running); the result lands in the returned dict."""
    box: dict = {}

    def target():
        box["result"] = run_module(*args, **kwargs)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


@pytest.fixture
def recorder(kubeconfig: str, namespace: str):
    """A PodRecorder on the test's namespace, with its own connection."""
    watcher = PodRecorder(api_from_kubeconfig(kubeconfig), namespace).start()
    yield watcher
    watcher.stop()


# ---------------------------------------------------------------------------
# Ordering, DaemonSets, static Pods


def test_drains_batch_by_batch_and_keeps_daemonset_and_static_pods(*, kube, namespace, make_node, run_module, recorder, audit_events) -> None:
    pool = {"lm-pool": namespace}
    node = make_node(labels=pool)
    kube.create(
        f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"nodeSelector": pool, "terminationGracePeriodSeconds": GRACE, "containers": [{"name": "agent", "image": "agent:1"}]},
                },
            },
        },
    )
    agent = wait_for(
        lambda: next((p for p in kube.list(f"/api/v1/namespaces/{namespace}/pods", label_selector="app=agent") if pod_is_ready(p)), None),
        what="the DaemonSet Pod",
    )["metadata"]["name"]
    node_uid = kube.get(f"/api/v1/nodes/{node}")["metadata"]["uid"]
    static = {"annotations": {"kubernetes.io/config.mirror": "hash", "kubernetes.io/config.source": "file"}}
    static["owners"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}]
    # A DaemonSet Pod whose DaemonSet is gone. The garbage collector would delete it at
    # once; an owner apiVersion it cannot resolve keeps it away (the drain looks the
    # DaemonSet up by name, as Cluster API does).
    orphan = {"owners": [{"apiVersion": "apps/v1beta2", "kind": "DaemonSet", "name": "gone", "uid": str(uuid.uuid4()), "controller": True}]}
    make_pods(
        kube,
        namespace,
        node,
        {
            "first-0": {"labels": {"tier": "first"}},
            "web-0": {},
            "web-1": {},
            "orphan-0": orphan,
            "db-0": {"labels": {"tier": "db"}},
            "db-1": {"labels": {"tier": "db"}},
            "keep-0": {"labels": {"cluster.x-k8s.io/drain": "skip"}},
            "static-0": static,
        },
    )
    rules = [order_rule("a-first", -5, tier="first"), order_rule("z-last", 10, tier="db")]

    result = run_module("machine_drain", {"node": node, "rules": rules, "wait_sleep": 1, "wait_timeout": 120})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True and result["changed"] is True
    assert result["message"] == f"Node {node} drained"
    recorder.sync()
    key = f"{namespace}/{{}}".format
    orders = {key("first-0"): -5, key("web-0"): 0, key("web-1"): 0, key("orphan-0"): 0, key("db-0"): 10, key("db-1"): 10}
    assert recorder.pods_evicted_out_of_order(orders) == []
    assert sorted(result["evicted"]) == sorted(orders)
    assert set(orders) <= set(recorder.gone_at), "an evicted Pod is still on the Node"
    # One batch is evicted at once: every Pod of order 0 got its deletionTimestamp before any of them was gone.
    batch = [key("web-0"), key("web-1"), key("orphan-0")]
    assert max(recorder.deleting_at[k] for k in batch) < min(recorder.gone_at[k] for k in batch)
    for stays in (key(agent), key("static-0"), key("keep-0")):
        assert stays not in recorder.deleting_at, f"{stays} was evicted"
    assert node_unschedulable(kube, node)

    pods = {p["name"]: p for p in result["pods"]}
    assert (pods[agent]["behavior"], pods[agent]["reason"]) == ("Skip", "DaemonSet-managed Pod")
    assert (pods["static-0"]["behavior"], pods["static-0"]["reason"]) == ("Skip", "static Pod")
    assert (pods["keep-0"]["behavior"], pods["keep-0"]["reason"]) == ("Skip", "label cluster.x-k8s.io/drain=skip")
    assert pods["orphan-0"]["behavior"] == "Drain"
    assert "evicting orphaned DaemonSet-managed Pod" in pods["orphan-0"]["warnings"]
    assert (pods["first-0"]["order"], pods["first-0"]["reason"]) == (-5, "MachineDrainRule a-first")
    assert (pods["db-0"]["order"], pods["db-0"]["reason"]) == (10, "MachineDrainRule z-last")
    assert pods["web-0"]["warnings"] == ["evicting Pod that has no controller"]
    assert [(b["order"], sorted(b["pods"])) for b in result["batches"]] == [
        (-5, [key("first-0")]),
        (0, sorted(batch)),
        (10, [key("db-0"), key("db-1")]),
    ]
    assert result["passes"] >= 4  # three batches, then one that finds them gone
    # The API server's own log: each Pod evicted exactly once, nothing else asked for.
    assert evictions(audit_events, namespace) == {k.split("/")[1]: [201] for k in orders}

    again = run_module("machine_drain", {"node": node, "rules": rules})
    assert again["changed"] is False and again["completed"] is True and again["evicted"] == []


# ---------------------------------------------------------------------------
# PodDisruptionBudgets


def create_pdb(kube: KubeApi, namespace: str, name: str, *, selector: dict, min_available: int, healthy: int) -> None:
    kube.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": selector}},
        },
    )

    def observed():
        pdb = kube.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}")
        status = pdb.get("status") or {}
        return status.get("observedGeneration") == pdb["metadata"]["generation"] and status.get("currentHealthy") == healthy

    wait_for(observed, what=f"PodDisruptionBudget {name} observed by the disruption controller")


def test_check_mode_predicts_what_the_budget_allows(*, kube, namespace, make_node, run_module, audit_events) -> None:
    node = make_node(labels={"lm-pool": namespace})
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 3, {"lm-pool": namespace}, GRACE))
    wait_for(lambda: len([p for p in kube.list(f"/api/v1/namespaces/{namespace}/pods") if pod_is_ready(p)]) == 3, what="3 web Pods Ready")
    create_pdb(kube, namespace, "web", selector={"app": "web"}, min_available=2, healthy=3)
    refusal = "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently"

    # Dry-run evictions do not count against the budget; the plan still shows the one Pod it lets go now.
    plan = run_module("machine_drain", {"node": node}, check=True)

    assert not plan.get("failed"), plan.get("msg")
    predicted = sorted(p["eviction_error"] or "" for p in plan["pods"])
    assert predicted == ["", refusal, refusal]
    assert f"{PDB_REFUSAL} The disruption budget web needs 2 healthy pods and has 2 currently" in plan["message"]
    assert evictions(audit_events, namespace) == {}, "check mode sent a real eviction"

    # A real pass does what the plan said (the refusal's wording depends on how far the
    # disruption controller got in the meantime).
    first = run_module("machine_drain", {"node": node, "wait": False})
    assert not first.get("failed"), first.get("msg")
    assert len(first["evicted"]) == 1
    refused = [p["eviction_error"] for p in first["pods"] if p["present"] and p["eviction_error"]]
    assert len(refused) == 2 and all(error.startswith("Cannot evict pod as it would violate the pod's disruption budget.") for error in refused)


def test_deployment_behind_pdb_drains_completely(*, kube, namespace, make_node, run_module, recorder, audit_events) -> None:
    pool = {"lm-pool": namespace}
    node = make_node(labels=pool)
    spare = make_node(labels=pool)
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": True}})
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 3, pool, GRACE))

    def ready_web(on: str) -> list[str]:
        return ready_pods_on(kube, namespace, "app=web", on)

    originals = wait_for(lambda: len(ready_web(node)) == 3 and ready_web(node), what="3 web Pods Ready")
    create_pdb(kube, namespace, "web", selector={"app": "web"}, min_available=2, healthy=3)
    recorder.sync()
    before_drain = len(recorder.events)

    # One pass while no replacement can start anywhere: the budget lets one Pod go and
    # refuses the other two, which is reported, not an error. The pass read the budget
    # and asked only what its status allows: the two refusals are the server's text,
    # foretold from that status, and cost no eviction request (issue 39).
    first = run_module("machine_drain", {"node": node, "wait": False})
    assert not first.get("failed"), first.get("msg")
    assert first["completed"] is False and first["changed"] is True
    assert len(first["evicted"]) == 1
    refused = [p for p in first["pods"] if p["eviction_error"]]
    assert len(refused) == 2 and all(p["eviction_error"].startswith("Cannot evict pod as it would violate the pod's disruption budget.") for p in refused)
    assert f"{PDB_REFUSAL} The disruption budget web needs 2 healthy pods and has 2 currently" in first["message"]
    asked = evictions(audit_events, namespace)
    assert sorted(asked) == [first["evicted"][0].split("/")[1]] and all(codes == [201] for codes in asked.values()), asked

    # Passes continue while replacements become Ready on the spare Node.
    kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": None}})
    result = run_module("machine_drain", {"node": node, "wait_sleep": 1, "wait_timeout": 120})
    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True
    assert sorted(first["evicted"] + result["evicted"]) == sorted(f"{namespace}/{name}" for name in originals)
    recorder.sync()
    assert all(f"{namespace}/{name}" in recorder.gone_at for name in originals)
    # The budget held throughout: never fewer than 2 web Pods Ready.
    assert recorder.fewest_ready(lambda p: p["metadata"].get("labels", {}).get("app") == "web", after_seq=before_drain) >= 2
    wait_for(lambda: len(ready_web(spare)) == 3, what="3 web Pods Ready on the spare Node")
    # The drain asked again once the budget allowed; each Pod was evicted once.
    logged = evictions(audit_events, namespace)
    assert sorted(logged) == sorted(originals)
    assert all(codes.count(201) == 1 and set(codes) <= {201, 429} for codes in logged.values()), logged


def test_progress_interval_prints_where_the_drain_stands_and_goes_on_until_done(*, kube, namespace, make_node, run_playbook) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"stuck-0": {"labels": {"app": "stuck"}}})
    create_pdb(kube, namespace, "stuck", selector={"app": "stuck"}, min_available=1, healthy=1)
    # The budget goes after a few rounds (a round of 1 s plus the module's start takes 2 to 4 s on a
    # loaded 2-core machine); the same task then evicts the Pod and completes.
    release = threading.Timer(15, lambda: kube.delete(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/stuck"))
    release.start()
    try:
        proc = run_playbook(DRAIN_NODE, {"node": node, "drain_timeout": 120, "progress_interval": 1}, timeout=240)
    finally:
        release.cancel()
        release.join()

    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rounds = re.findall(r"^Drain the node, showing where it stands as it goes \(round (\d+)\):$", proc.stdout, re.MULTILINE)
    assert len(rounds) >= 3 and rounds == [str(n) for n in range(1, len(rounds) + 1)], proc.stdout[-3000:]
    assert f"    * Pod {namespace}/stuck-0: {PDB_REFUSAL}" in proc.stdout
    pod = get_pod(kube, namespace, "stuck-0")
    assert pod is None or pod["metadata"].get("deletionTimestamp")


def test_rounds_add_up_to_one_result_and_one_timeout(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"free-0": {}, "stuck-0": {"labels": {"app": "stuck"}}})
    create_pdb(kube, namespace, "stuck", selector={"app": "stuck"}, min_available=1, healthy=1)

    started = time.monotonic()
    # 8 s leave room for 3 rounds of 1 s even when each module start costs 1 to 2 s (a loaded machine).
    result = run_module("machine_drain", {"node": node, "wait_timeout": 8, "progress_interval": 1, "wait_sleep": 1})

    assert time.monotonic() - started < 60
    assert result.get("failed") is True
    assert result["msg"].startswith(f"Timed out after 8 s draining Node {node}. Drain not completed yet (started at "), result["msg"]
    assert result["rounds"] >= 3
    assert result["evicted"] == [f"{namespace}/free-0"], "the Pod evicted in the first round is in the task's result"
    assert result["changed"] is True
    assert not get_pod(kube, namespace, "stuck-0")["metadata"].get("deletionTimestamp")


def test_wait_timeout_fails_with_the_progress_message(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"stuck-0": {"labels": {"app": "stuck"}}})
    create_pdb(kube, namespace, "stuck", selector={"app": "stuck"}, min_available=1, healthy=1)

    result = run_module("machine_drain", {"node": node, "wait_timeout": 3, "wait_sleep": 1})

    assert result.get("failed") is True
    assert result["msg"].startswith(f"Timed out after 3 s draining Node {node}. Drain not completed yet (started at ")
    assert f"\n* Pod {namespace}/stuck-0: {PDB_REFUSAL}" in result["msg"]
    assert result["completed"] is False and result["passes"] >= 2
    assert [p["name"] for p in result["pods"]] == ["stuck-0"]
    assert result["evicted"] == []
    assert not get_pod(kube, namespace, "stuck-0")["metadata"].get("deletionTimestamp")


# ---------------------------------------------------------------------------
# WaitCompleted


def test_wait_completed_pods_block_and_are_never_evicted(*, kube, namespace, make_node, run_module, recorder) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"batch-0": {"labels": {"cluster.x-k8s.io/drain": "wait-completed"}}, "web-0": {}, "late-0": {"labels": {"tier": "late"}}})
    args = {"node": node, "rules": [order_rule("late", 5, tier="late")], "wait_sleep": 1}

    first = run_module("machine_drain", {**args, "wait": False})
    assert first["completed"] is False
    assert first["evicted"] == [f"{namespace}/web-0"]
    assert f"\n* Pod {namespace}/batch-0: waiting for completion" in first["message"]
    assert first["message"].endswith(f"After above Pods have been removed from the Node, the following Pods will be evicted: {namespace}/late-0")
    batch = next(p for p in first["pods"] if p["name"] == "batch-0")
    assert (batch["behavior"], batch["order"], batch["reason"]) == ("WaitCompleted", 0, "label cluster.x-k8s.io/drain=wait-completed")

    thread, box = in_background(run_module, "machine_drain", {**args, "wait_timeout": 120})
    wait_for(lambda: f"{namespace}/web-0" in recorder.gone_at, what="web-0 gone")
    time.sleep(4)  # several passes' worth
    recorder.sync()
    assert thread.is_alive(), box.get("result")
    assert f"{namespace}/batch-0" not in recorder.deleting_at, "a WaitCompleted Pod was evicted"
    assert f"{namespace}/late-0" not in recorder.deleting_at, "order 5 started while a WaitCompleted Pod of order 0 was there"

    kube.delete(f"/api/v1/namespaces/{namespace}/pods/batch-0")  # the Pod finishes and goes away
    thread.join(timeout=120)
    result = box["result"]
    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True
    assert result["evicted"] == [f"{namespace}/late-0"]
    recorder.sync()
    orders = {f"{namespace}/web-0": 0, f"{namespace}/batch-0": 0, f"{namespace}/late-0": 5}
    assert recorder.pods_evicted_out_of_order(orders) == []


# ---------------------------------------------------------------------------
# Unreachable Node


@pytest.fixture
def unreachable_node(kube: KubeApi):
    """A Node no kubelet (kwok) manages, whose Ready condition is Unknown, as when its kubelet stops reporting."""
    name = f"lm-unreachable-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
    condition.update(lastHeartbeatTime=stamp, lastTransitionTime=stamp)
    kube.patch(f"/api/v1/nodes/{name}", {"status": {"conditions": [condition]}}, subresource_status=True)
    yield name
    for pod in kube.list("/api/v1/pods", field_selector=f"spec.nodeName={name}"):
        meta = pod["metadata"]
        kube.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", query={"gracePeriodSeconds": 0})
    kube.delete(f"/api/v1/nodes/{name}")


def test_unreachable_node_skips_pods_whose_deletion_never_ends(*, kube, namespace, unreachable_node, run_module) -> None:
    node = unreachable_node
    make_pods(kube, namespace, node, {"old-0": {"grace": 30}, "fresh-0": {"grace": 30}}, wait_ready=False)
    kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/old-0", query={"gracePeriodSeconds": 1})
    time.sleep(3)  # its deletionTimestamp is now more than 1 s in the past; no kubelet will ever remove it

    result = run_module("machine_drain", {"node": node, "wait_sleep": 1, "wait_timeout": 60})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True
    pods = {p["name"]: p for p in result["pods"]}
    assert pods["old-0"]["behavior"] == "Skip"
    assert pods["old-0"]["reason"] == "deletionTimestamp more than 1s ago on an unreachable Node"
    assert result["evicted"] == [f"{namespace}/fresh-0"]
    fresh = get_pod(kube, namespace, "fresh-0")
    assert fresh is not None, "nothing but a kubelet removes a Pod here"
    assert fresh["metadata"]["deletionGracePeriodSeconds"] == 1, "an unreachable Node's Pods are evicted with a 1 s grace period"


# ---------------------------------------------------------------------------
# Terminating namespace


@pytest.fixture
def stuck_namespace(kube: KubeApi):
    """A namespace whose Pods stay while it is being deleted: a ValidatingAdmissionPolicy
    denies deleting Pods in it (the namespace controller's work) until the test ends."""
    name = f"t-stuck-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    base = "/apis/admissionregistration.k8s.io/v1"
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"]}]
    kube.create(
        f"{base}/validatingadmissionpolicies",
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": rules},
                "validations": [{"expression": "false", "message": "Pods of this namespace stay (test policy)"}],
            },
        },
    )
    kube.create(
        f"{base}/validatingadmissionpolicybindings",
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}},
            },
        },
    )
    yield name
    # Without the policy the namespace controller finishes the deletion.
    kube.delete(f"{base}/validatingadmissionpolicybindings/{name}")
    kube.delete(f"{base}/validatingadmissionpolicies/{name}")


def test_terminating_namespace_refusal_has_the_upstream_text(*, kube, stuck_namespace, make_node, run_module) -> None:
    namespace = stuck_namespace
    node = make_node()
    make_pods(kube, namespace, node, {"left-0": {}})
    pod_path = f"/api/v1/namespaces/{namespace}/pods/left-0"

    def refused(attempt: Callable[[], object], cause: str | None = None) -> bool:
        try:
            attempt()
        except ApiError as exc:
            return cause is None or cause in [c.get("reason") for c in exc.causes]
        return False

    wait_for(lambda: refused(lambda: kube.delete(pod_path, dry_run=True)), timeout=30, what="the admission policy to take effect")
    kube.delete(f"/api/v1/namespaces/{namespace}")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "left-0", "namespace": namespace}}
    wait_for(
        lambda: refused(lambda: kube.create(f"{pod_path}/eviction", eviction, dry_run=True), "NamespaceTerminating"),
        timeout=30,
        what="evictions to be refused in the terminating namespace",
    )

    result = run_module("machine_drain", {"node": node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is False and result["evicted"] == []
    pod = next(p for p in result["pods"] if p["name"] == "left-0")
    assert pod["eviction_error"] == TERMINATING_NAMESPACE_MESSAGE
    line = next(line for line in result["message"].splitlines() if f"{namespace}/left-0" in line)
    assert line.startswith("* Pod ") and line.endswith(TERMINATING_NAMESPACE_MESSAGE)
    assert get_pod(kube, namespace, "left-0")["metadata"].get("deletionTimestamp") is None


# ---------------------------------------------------------------------------
# Machines: conditions, Events, start time


def test_machine_conditions_events_and_start_time(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"a-0": {}, "z-0": {"labels": {"tier": "last"}}})
    delete_machine(kube, flavour, namespace, machine)
    args = {"machine": machine, "namespace": namespace, "rules": [order_rule("last", 5, tier="last")], "wait_sleep": 1}

    first = run_module("machine_drain", {**args, "wait": False})
    assert not first.get("failed"), first.get("msg")
    assert first["machine"]["deleting"] is True and first["node"] == node
    current = kube.get(machine_path(flavour, namespace, machine))
    started = drain_start_time(current, flavour)
    assert started and first["started_at"] == started
    progress = first["message"]
    assert progress == (
        f"Drain not completed yet (started at {started}):\n"
        f"* Pod {namespace}/a-0: deletionTimestamp set, but still not removed from the Node\n"
        f"After above Pods have been removed from the Node, the following Pods will be evicted: {namespace}/z-0"
    )
    v1, v2 = conditions(current, flavour)
    assert current["status"]["phase"] == "Deleting"
    if flavour == "openshift":
        assert (v1["Drained"]["status"], v1["Drained"]["reason"]) == ("False", "DrainError")
        assert v1["Drained"]["message"] == f"could not drain machine: {progress}"
        assert v1["Drainable"]["status"] == "True"
    else:
        drain = v1["DrainingSucceeded"]
        assert (drain["status"], drain["reason"], drain["severity"], drain["message"]) == ("False", "Draining", "Info", progress)
        assert v1["PreDrainDeleteHookSucceeded"]["status"] == "True"
        assert (v2["Deleting"]["status"], v2["Deleting"]["reason"], v2["Deleting"]["message"]) == ("True", "DrainingNode", progress)

    time.sleep(1.1)
    second = run_module("machine_drain", {**args, "wait": False})
    assert drain_start_time(kube.get(machine_path(flavour, namespace, machine)), flavour) == started, "the start time moved"
    assert second["started_at"] == started

    final = run_module("machine_drain", {**args, "wait_timeout": 120})
    assert not final.get("failed"), final.get("msg")
    assert final["completed"] is True and final["changed"] is True
    current = kube.get(machine_path(flavour, namespace, machine))
    v1, v2 = conditions(current, flavour)
    if flavour == "openshift":
        assert (v1["Drained"]["status"], v1["Drained"].get("message")) == ("True", "Drain finished successfully")
    else:
        assert v1["DrainingSucceeded"]["status"] == "True"
        assert "reason" not in v1["DrainingSucceeded"]
    events = machine_events(kube, namespace, machine, "SuccessfulDrainNode")
    assert [(e["type"], e["message"]) for e in events] == [("Normal", f'success draining Machine\'s node "{node}"')]
    assert not machine_events(kube, namespace, machine, "FailedDrainNode")

    again = run_module("machine_drain", args)
    assert again["changed"] is False and again["completed"] is True
    assert len(machine_events(kube, namespace, machine, "SuccessfulDrainNode")) == 1


def test_machine_not_being_deleted_is_drained_without_conditions(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"web-0": {}})
    before = kube.get(machine_path(flavour, namespace, machine))

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace, "wait_sleep": 1})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True and result["machine"]["deleting"] is False
    assert result["evicted"] == [f"{namespace}/web-0"]
    after = kube.get(machine_path(flavour, namespace, machine))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "a Machine that is not being deleted was written"
    assert not machine_events(kube, namespace, machine, "SuccessfulDrainNode")


# ---------------------------------------------------------------------------
# The preDrain gate


def remove_pre_drain_hook(kube: KubeApi, flavour: str, namespace: str, machine: str, name: str) -> None:
    if flavour == "openshift":
        kube.patch(machine_path(flavour, namespace, machine), {"spec": {"lifecycleHooks": {"preDrain": None}}})
    else:
        kube.patch(machine_path(flavour, namespace, machine), {"metadata": {"annotations": {f"{CAPI_PRE_DRAIN}/{name}": None}}})


def test_pre_drain_hook_holds_every_eviction_until_removed(*, flavour, kube, namespace, machine_node, run_module, recorder) -> None:
    machine, node = machine_node(hooks={"preDrain": [("quorum-guard", "etcd-operator")]})
    make_pods(kube, namespace, node, {"web-0": {}})
    delete_machine(kube, flavour, namespace, machine)
    args = {"machine": machine, "namespace": namespace, "wait_sleep": 1}
    version = kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"]

    # Check mode at the gate: the plan for when it opens, the hooks holding it, nothing written.
    preview = run_module("machine_drain", args, check=True)
    assert preview["completed"] is False and preview["unschedulable"] is False
    assert [h["name"] for h in preview["blocked_by"]] == ["quorum-guard"]
    assert [(p["name"], p["behavior"]) for p in preview["pods"]] == [("web-0", "Drain")]
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"] == version

    held = run_module("machine_drain", {**args, "wait": False})
    assert not held.get("failed"), held.get("msg")
    assert held["completed"] is False and held["passes"] == 0
    expected_hook = {"name": "quorum-guard", "owner": "etcd-operator"}
    if flavour != "openshift":
        expected_hook["annotation"] = f"{CAPI_PRE_DRAIN}/quorum-guard"
    assert held["blocked_by"] == [expected_hook]
    assert not node_unschedulable(kube, node)
    v1, v2 = conditions(kube.get(machine_path(flavour, namespace, machine)), flavour)
    if flavour == "openshift":
        assert (v1["Drainable"]["status"], v1["Drainable"]["reason"]) == ("False", "HookPresent")
        assert v1["Drainable"]["message"] == "Drain operation currently blocked by: [{Name:quorum-guard Owner:etcd-operator}]"
    else:
        assert (v1["PreDrainDeleteHookSucceeded"]["status"], v1["PreDrainDeleteHookSucceeded"]["reason"]) == ("False", "WaitingExternalHook")
        assert v2["Deleting"]["reason"] == "WaitingForPreDrainHook"
        assert v2["Deleting"]["message"] == f"Waiting for pre-drain hooks to succeed (hooks: {CAPI_PRE_DRAIN}/quorum-guard)"

    timed_out = run_module("machine_drain", {**args, "wait_timeout": 2})
    assert timed_out.get("failed") is True
    assert "quorum-guard (owner etcd-operator)" in timed_out["msg"]
    assert timed_out["blocked_by"] == [expected_hook]

    thread, box = in_background(run_module, "machine_drain", {**args, "wait_timeout": 120})
    time.sleep(3)
    assert thread.is_alive(), box.get("result")
    assert not node_unschedulable(kube, node), "cordoned while a preDrain hook exists"
    removed_at = time.monotonic()
    remove_pre_drain_hook(kube, flavour, namespace, machine, "quorum-guard")
    thread.join(timeout=120)
    result = box["result"]
    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True and result["evicted"] == [f"{namespace}/web-0"]
    recorder.sync()
    assert recorder.deleting_time[f"{namespace}/web-0"] > removed_at, "a Pod was evicted before the preDrain hook was removed"


def test_cordon_is_held_by_a_pre_drain_hook_too(*, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node(hooks={"preDrain": [("quorum-guard", "etcd-operator")]})
    result = run_module("machine_drain", {"machine": machine, "namespace": namespace, "state": "cordoned", "wait": False})
    assert result["completed"] is False and result["changed"] is False
    assert [h["name"] for h in result["blocked_by"]] == ["quorum-guard"]
    assert not node_unschedulable(kube, node)


# ---------------------------------------------------------------------------
# Skips: exclude annotation, the Machine's drain timeout, Node gone, Cluster API skip cases


def test_exclude_annotation_skips_the_drain(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node(annotations={EXCLUDE_ANNOTATION[flavour]: ""})
    make_pods(kube, namespace, node, {"web-0": {}})
    delete_machine(kube, flavour, namespace, machine)

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True and result["pods"] == [] and result["evicted"] == []
    assert EXCLUDE_ANNOTATION[flavour] in result["skipped_reason"]
    assert not node_unschedulable(kube, node)
    assert not get_pod(kube, namespace, "web-0")["metadata"].get("deletionTimestamp")
    current = kube.get(machine_path(flavour, namespace, machine))
    v1, _v2 = conditions(current, flavour)
    assert drain_start_time(current, flavour) is None
    if flavour == "openshift":
        assert (v1["Drained"]["status"], v1["Drained"]["message"]) == ("True", "Node drain skipped")
    else:
        assert v1["PreDrainDeleteHookSucceeded"]["status"] == "True"
        assert "DrainingSucceeded" not in v1


@CAPI_ONLY
def test_machine_drain_timeout_ends_the_drain(*, flavour, kube, namespace, machine_node, run_module) -> None:
    spec = {"nodeDrainTimeout": "3s"} if flavour == "v1beta1" else {"deletion": {"nodeDrainTimeoutSeconds": 3}}
    machine, node = machine_node(spec=spec)
    make_pods(kube, namespace, node, {"stuck-0": {"labels": {"app": "stuck"}}})
    create_pdb(kube, namespace, "stuck", selector={"app": "stuck"}, min_available=1, healthy=1)
    delete_machine(kube, flavour, namespace, machine)

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace, "wait_sleep": 1, "wait_timeout": 60})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True
    assert "node drain timeout" in result["skipped_reason"] and "(3 s)" in result["skipped_reason"]
    # The budget never allows the eviction: the drain waits for it to (a watch on the budget), not on
    # a fixed retry, until the Machine's drain timeout ends the drain.
    assert result["passes"] >= 1
    assert not get_pod(kube, namespace, "stuck-0")["metadata"].get("deletionTimestamp")
    current = kube.get(machine_path(flavour, namespace, machine))
    assert drain_start_time(current, flavour) == result["started_at"]
    v1, _v2 = conditions(current, flavour)
    assert PDB_REFUSAL in v1["DrainingSucceeded"]["message"]

    again = run_module("machine_drain", {"machine": machine, "namespace": namespace})
    assert again["completed"] is True and again["passes"] == 0 and "node drain timeout" in again["skipped_reason"]


def test_node_gone_means_nothing_to_drain(*, flavour, kube, namespace, make_machine, capi_cluster, run_module) -> None:
    capi_cluster(namespace)
    node = f"gone-{uuid.uuid4().hex[:6]}"
    machine = make_machine(namespace, node=node)["metadata"]["name"]
    delete_machine(kube, flavour, namespace, machine)

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] is True and result["skipped_reason"] == f"Node {node} does not exist"
    v1, _v2 = conditions(kube.get(machine_path(flavour, namespace, machine)), flavour)
    assert v1["DrainingSucceeded" if flavour != "openshift" else "Drained"]["status"] == "True"


@CAPI_ONLY
def test_cluster_being_deleted_skips_every_node_step(*, flavour, kube, namespace, make_node, make_machine, capi_cluster, run_module) -> None:
    capi_cluster(namespace, deleting=True)
    node = make_node()
    machine = make_machine(namespace, node=node, hooks={"preDrain": [("quorum-guard", "etcd-operator")]})["metadata"]["name"]
    make_pods(kube, namespace, node, {"web-0": {}})
    delete_machine(kube, flavour, namespace, machine)

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace})

    assert result["completed"] is True
    assert result["skipped_reason"] == f"Cluster {namespace}/lm-test is being deleted"
    assert not node_unschedulable(kube, node)
    assert not get_pod(kube, namespace, "web-0")["metadata"].get("deletionTimestamp")


# ---------------------------------------------------------------------------
# Rules


def test_invalid_inline_rule_fails_naming_it_and_changes_nothing(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"web-0": {}})
    bad = {"name": "bad-rule", "drain": {"behavior": "Drain"}, "pods": [{"selector": {"matchExpressions": [{"key": "app", "operator": "Maybe"}]}}]}

    result = run_module("machine_drain", {"node": node, "rules": [order_rule("fine", 1, app="x"), bad]})

    assert result.get("failed") is True
    assert result["msg"].startswith("Invalid MachineDrainRule bad-rule: ")
    assert "'Maybe' is not a valid label selector operator" in result["msg"]
    assert not node_unschedulable(kube, node)


@CAPI_ONLY
def test_cluster_machine_drain_rules_order_the_drain(*, flavour, kube, namespace, machine_node, run_module, recorder) -> None:
    machine, node = machine_node(labels={"role": "storage-host"})
    kube.create(
        capi_path(flavour, "machinedrainrules", namespace),
        {
            "apiVersion": f"cluster.x-k8s.io/{flavour}",
            "kind": "MachineDrainRule",
            "metadata": {"name": "storage-last"},
            "spec": {
                "drain": {"behavior": "Drain", "order": 100},
                "machines": [{"selector": {"matchLabels": {"role": "storage-host"}}}],
                "pods": [{"selector": {"matchLabels": {"app": "osd"}}}],
            },
        },
    )
    make_pods(kube, namespace, node, {"osd-0": {"labels": {"app": "osd"}}, "web-0": {}, "mon-0": {"labels": {"app": "mon"}}})
    delete_machine(kube, flavour, namespace, machine)
    # An inline rule adds to the cluster's rules (and would replace one of the same name).
    mon_stays = {"name": "mon-stays", "drain": {"behavior": "Skip"}, "pods": [{"selector": {"matchLabels": {"app": "mon"}}}]}
    args = {"machine": machine, "namespace": namespace, "rules": [mon_stays]}

    plan = run_module("machine_drain", args, check=True)
    assert [(b["order"], b["pods"]) for b in plan["batches"]] == [(0, [f"{namespace}/web-0"]), (100, [f"{namespace}/osd-0"])]
    reasons = {p["name"]: p["reason"] for p in plan["pods"]}
    assert reasons == {"osd-0": "MachineDrainRule storage-last", "web-0": "default", "mon-0": "MachineDrainRule mon-stays"}

    result = run_module("machine_drain", {**args, "wait_sleep": 1})
    assert result["completed"] is True
    recorder.sync()
    assert recorder.pods_evicted_out_of_order({f"{namespace}/web-0": 0, f"{namespace}/osd-0": 100}) == []
    assert f"{namespace}/mon-0" not in recorder.deleting_at

    no_cluster_rules = run_module("machine_drain", {**args, "use_cluster_rules": False}, check=True)
    assert all(p["reason"] != "MachineDrainRule storage-last" for p in no_cluster_rules["pods"])


# ---------------------------------------------------------------------------
# Check mode


def test_check_mode_returns_the_plan_and_changes_nothing(*, flavour, kube, namespace, machine_node, run_module, audit_events) -> None:
    machine, node = machine_node()
    make_pods(
        kube,
        namespace,
        node,
        {"first-0": {"labels": {"tier": "first"}}, "web-0": {}, "web-1": {}, "keep-0": {"labels": {"cluster.x-k8s.io/drain": "skip"}}},
    )
    delete_machine(kube, flavour, namespace, machine)
    rules = [order_rule("first", -1, tier="first")]
    pod_versions = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in kube.list(f"/api/v1/namespaces/{namespace}/pods")}
    machine_version = kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"]
    node_version = kube.get(f"/api/v1/nodes/{node}")["metadata"]["resourceVersion"]

    plan = run_module("machine_drain", {"machine": machine, "namespace": namespace, "rules": rules}, check=True, diff=True)

    assert not plan.get("failed"), plan.get("msg")
    assert plan["changed"] is True and plan["completed"] is False
    assert plan["evicted"] == [] and plan["passes"] == 1
    pods = {p["name"]: (p["behavior"], p["order"], p["reason"], p["warnings"]) for p in plan["pods"]}
    assert pods == {
        "first-0": ("Drain", -1, "MachineDrainRule first", ["evicting Pod that has no controller"]),
        "web-0": ("Drain", 0, "default", ["evicting Pod that has no controller"]),
        "web-1": ("Drain", 0, "default", ["evicting Pod that has no controller"]),
        "keep-0": ("Skip", 0, "label cluster.x-k8s.io/drain=skip", []),
    }
    assert [(b["order"], b["pods"]) for b in plan["batches"]] == [(-1, [f"{namespace}/first-0"]), (0, [f"{namespace}/web-0", f"{namespace}/web-1"])]
    assert plan["diff"]["before"]["unschedulable"] is False and plan["diff"]["after"]["unschedulable"] is True
    assert plan["unschedulable"] is True

    assert {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in kube.list(f"/api/v1/namespaces/{namespace}/pods")} == pod_versions
    assert kube.get(machine_path(flavour, namespace, machine))["metadata"]["resourceVersion"] == machine_version
    assert kube.get(f"/api/v1/nodes/{node}")["metadata"]["resourceVersion"] == node_version
    assert not machine_events(kube, namespace, machine, "SuccessfulDrainNode") and not machine_events(kube, namespace, machine, "FailedDrainNode")
    assert evictions(audit_events, namespace) == {}, "check mode sent a real eviction"


# ---------------------------------------------------------------------------
# Cordon and uncordon


def test_cordon_and_uncordon(*, kube, make_node, run_module) -> None:
    node = make_node()

    predicted = run_module("machine_drain", {"node": node, "state": "cordoned"}, check=True, diff=True)
    assert predicted["changed"] is True and predicted["diff"]["after"]["unschedulable"] is True
    assert not node_unschedulable(kube, node)

    cordoned = run_module("machine_drain", {"node": node, "state": "cordoned"})
    assert cordoned["changed"] is True and cordoned["unschedulable"] is True and node_unschedulable(kube, node)
    assert run_module("machine_drain", {"node": node, "state": "cordoned"})["changed"] is False

    uncordoned = run_module("machine_drain", {"node": node, "state": "uncordoned"}, diff=True)
    assert uncordoned["changed"] is True and uncordoned["unschedulable"] is False
    assert (uncordoned["diff"]["before"]["unschedulable"], uncordoned["diff"]["after"]["unschedulable"]) == (True, False)
    assert "unschedulable" not in kube.get(f"/api/v1/nodes/{node}")["spec"]
    assert run_module("machine_drain", {"node": node, "state": "uncordoned"})["changed"] is False

    missing = run_module("machine_drain", {"node": "no-such-node", "state": "uncordoned"})
    assert missing.get("failed") is True and missing["msg"] == "Cannot uncordon Node no-such-node: it does not exist"


# ---------------------------------------------------------------------------
# Failures while deleting: DrainingFailed and FailedDrainNode


@CAPI_ONLY
def test_invalid_cluster_rule_fails_the_drain_with_draining_failed(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"web-0": {}})
    selector = {"matchExpressions": [{"key": "app", "operator": "Maybe", "values": ["x"]}]}
    kube.create(
        capi_path(flavour, "machinedrainrules", namespace),
        {
            "apiVersion": f"cluster.x-k8s.io/{flavour}",
            "kind": "MachineDrainRule",
            "metadata": {"name": "broken"},
            "spec": {"drain": {"behavior": "Skip"}, "pods": [{"selector": selector}]},
        },
    )
    delete_machine(kube, flavour, namespace, machine)

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace})

    assert result.get("failed") is True
    assert result["msg"].startswith(f"Invalid MachineDrainRule {namespace}/broken: spec.pods[0].selector: ")
    assert not node_unschedulable(kube, node) and not get_pod(kube, namespace, "web-0")["metadata"].get("deletionTimestamp")
    v1, v2 = conditions(kube.get(machine_path(flavour, namespace, machine)), flavour)
    failed = v1["DrainingSucceeded"]
    assert (failed["status"], failed["reason"], failed["severity"], failed["message"]) == ("False", "DrainingFailed", "Warning", result["msg"])
    assert (v2["Deleting"]["reason"], v2["Deleting"]["message"]) == ("DrainingNode", "Error draining Node, please check controller logs for errors")
    events = machine_events(kube, namespace, machine, "FailedDrainNode")
    assert [(e["type"], e["message"]) for e in events] == [("Warning", f'error draining Machine\'s node "{node}": {result["msg"]}')]


# ---------------------------------------------------------------------------
# The dangerous options


def test_grace_period_override_and_disable_eviction(*, kube, namespace, make_node, run_module, recorder) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"slow-0": {"grace": 30}})
    first = run_module("machine_drain", {"node": node, "grace_period": 1, "wait_sleep": 1, "wait_timeout": 60})
    assert first["completed"] is True and first["evicted"] == [f"{namespace}/slow-0"]
    recorder.sync()
    assert recorder.grace[f"{namespace}/slow-0"] == 1, "the Pod's own 30 s grace period was used"

    # Deletion does not ask the budget: the only Pod a budget protects goes.
    make_pods(kube, namespace, node, {"stuck-0": {"labels": {"app": "stuck"}}})
    create_pdb(kube, namespace, "stuck", selector={"app": "stuck"}, min_available=1, healthy=1)
    refused = run_module("machine_drain", {"node": node, "wait": False})
    assert refused["completed"] is False and PDB_REFUSAL in refused["message"]
    deleted = run_module("machine_drain", {"node": node, "disable_eviction": True, "wait_sleep": 1, "wait_timeout": 60})
    assert deleted["completed"] is True and deleted["evicted"] == [f"{namespace}/stuck-0"]
    assert get_pod(kube, namespace, "stuck-0") is None
