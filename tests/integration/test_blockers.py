"""What holds a Machine's deletion, against the real API server (docs/stalls.md):
one test per blocker kind and per verdict it can get, each asserting the whole
blocker (phase, kind, object, since, evidence, verdict) as the result carries
it, and the progress line of the grave ones.

test_stalls.py holds the budgets that can never allow (both rules), the Pod two
budgets select, and a Pod kept past its grace by a finalizer; this file the
rest. Two kinds are proven by unit tests only: ``unreachable node`` (a Pod past
its grace on an unreachable Node is skipped by the drain once its deletion is
1 s old, so the blocker holds for at most that second) and ``another
control-plane Node cordoned`` (test_control_plane.py proves the gate itself).

The last tests run beside the real Cluster API manager (``capi_plane``, in
make test's real-controller subset) and OpenShift's machine controller
(``mapi_plane``): the collection follows the controller's deletion and reports
what holds it - the hook, since the wait start Cluster API writes in the
Machine's ``status.deletion`` (OpenShift records none), then the controller and
the Pod its drain report names.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
import uuid
from pathlib import Path

import pytest
import realctl
import test_live_controller
import test_machine_drain
import test_machine_terminate
from conftest import run_module_with
from khelpers import wait_for
from test_machine_drain import CAPI_ONLY, create_pdb, delete_machine, machine_path, make_pods, pod_body
from test_machine_terminate import args
from test_stalls import budget

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

EXTENDED_FLAVOURS = ("v1beta1",)  # variants make test leaves out (conftest.py: pytest_collection_modifyitems)

CLEARS = "clears by itself"
NEEDS_ACTION = "needs someone to act"
NEVER = "can never clear as things stand"

# Fixtures of the drain's and the termination's own tests, used here by name.
stuck_namespace = test_machine_drain.stuck_namespace
doomed = test_machine_terminate.doomed
volumes = test_machine_terminate.volumes
undeletable_label = test_machine_terminate.undeletable_label

HOOK_KEY = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}
HOOK_WAIT_FIELD = {"preDrain": "waitForPreDrainHookStartTime", "preTerminate": "waitForPreTerminateHookStartTime"}


def only(blockers: list[dict], kind: str) -> dict:
    found = [b for b in blockers if b["kind"] == kind]
    assert len(found) == 1, blockers
    return found[0]


def deletion_status(machine: dict) -> dict:
    return (machine.get("status") or {}).get("deletion") or {}


# ---------------------------------------------------------------------------
# The drain


@pytest.fixture
def silent_node(kube: KubeApi):
    """A Ready Node no kubelet (kwok) manages: a Pod deleted on it stays terminating
    past its grace, as when a kubelet never confirms. Its Pods go with it, at once."""
    name = f"lm-silent-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": stamp}
    kube.patch(f"/api/v1/nodes/{name}", {"status": {"conditions": [{**ready, "lastTransitionTime": stamp}]}}, subresource_status=True)
    yield name
    for pod in kube.list("/api/v1/pods", field_selector=f"spec.nodeName={name}"):
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        kube.patch(path, {"metadata": {"finalizers": None}})
        kube.request("DELETE", path, query={"gracePeriodSeconds": 0})
    kube.delete(f"/api/v1/nodes/{name}")


def test_a_budget_that_can_allow_again_clears_by_itself(*, kube, namespace, make_node, silent_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"web-0": {"labels": {"app": "web"}}, "web-1": {"labels": {"app": "web"}}})
    # A third Pod of the budget that is not healthy (no kubelet runs it): 2 of 3 healthy, 2 needed, none allowed.
    kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_body("web-2", silent_node, labels={"app": "web"}))
    create_pdb(kube, namespace, "web", selector={"app": "web"}, min_available=2, healthy=2)

    result = run_module("machine_drain", {"node": node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    assert result["evicted"] == [], result["evicted"]
    blocker = next(b for b in result["blockers"] if b["kind"] == "budget refusal")
    assert (blocker["phase"], blocker["verdict"], blocker["since"]) == ("drain", CLEARS, None), blocker
    assert blocker["object"] in (f"Pod {namespace}/web-0", f"Pod {namespace}/web-1")
    evidence = blocker["evidence"]
    assert evidence["budget"] == f"{namespace}/web" and evidence["min_available"] == 2
    assert (evidence["needed_healthy"], evidence["healthy"], evidence["expected_pods"], evidence["disruptions_allowed"]) == (2, 2, 3, 0)
    assert blocker["reason"] == f"budget {namespace}/web allows another eviction once enough of its Pods are healthy again"
    assert all(b["verdict"] == CLEARS for b in result["blockers"]), result["blockers"]


def test_a_budget_still_counting_an_eviction_that_never_deleted_its_pod_clears_at_the_disruption_controllers_timeout(
    *, kube, namespace, make_node, run_module
) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"web-0": {"labels": {"app": "web"}}, "web-1": {"labels": {"app": "web"}}})
    create_pdb(kube, namespace, "web", selector={"app": "web"}, min_available=1, healthy=2)
    # As a run killed between the budget's grant and the Pod's deletion leaves it: web-0 counted as being evicted.
    granted = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
    pdb_path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/web"
    kube.patch(pdb_path, {"status": {"disruptedPods": {"web-0": granted.strftime("%Y-%m-%dT%H:%M:%SZ")}}}, subresource_status=True)
    wait_for(lambda: kube.get(pdb_path)["status"].get("disruptionsAllowed") == 0, what="the budget to allow nothing while it counts web-0 evicted")

    result = run_module("machine_drain", {"node": node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    refused = [b for b in result["blockers"] if b["kind"] == "budget refusal"]
    assert refused and all(b["verdict"] == CLEARS for b in refused), result["blockers"]
    blocker = refused[0]
    since = granted.strftime("%Y-%m-%dT%H:%M:%SZ")
    until = (granted + _dt.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (blocker["phase"], blocker["since"]) == ("drain", since), blocker
    assert blocker["evidence"]["unfinished_evictions"] == {"web-0": since}
    assert blocker["evidence"]["counted_again_at"] == until
    assert f"still counts Pod {namespace}/web-0 as being evicted" in blocker["reason"] and until in blocker["reason"]


def test_an_eviction_the_api_server_refuses_otherwise_needs_someone(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"guarded-0": {}})
    name = f"lm-no-eviction-{uuid.uuid4().hex[:6]}"
    base = "/apis/admissionregistration.k8s.io/v1"
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}]
    policy = {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules}, "validations": [{"expression": "false", "message": "no evictions here"}]}
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    kube.create(f"{base}/validatingadmissionpolicies", {"metadata": {"name": name}, "spec": policy})
    kube.create(
        f"{base}/validatingadmissionpolicybindings",
        {"metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {"namespaceSelector": selector}}},
    )
    try:
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded-0", "namespace": namespace}}

        def refused() -> bool:
            try:
                kube.create(f"/api/v1/namespaces/{namespace}/pods/guarded-0/eviction", eviction, dry_run=True)
            except ApiError:
                return True
            return False

        wait_for(refused, timeout=30, what="the admission policy to take effect")

        result = run_module("machine_drain", {"node": node, "wait": False})

        assert not result.get("failed"), result.get("msg")
        blocker = only(result["blockers"], "eviction error")
        assert (blocker["phase"], blocker["object"], blocker["verdict"], blocker["since"]) == ("drain", f"Pod {namespace}/guarded-0", NEEDS_ACTION, None)
        assert "no evictions here" in blocker["evidence"]["answer"] and blocker["reason"].startswith("the API server refuses its eviction: ")
    finally:
        kube.delete(f"{base}/validatingadmissionpolicybindings/{name}")
        kube.delete(f"{base}/validatingadmissionpolicies/{name}")


@pytest.mark.parametrize(("grace", "kind"), [(300, "pod terminating"), (1, "pod terminating past its grace")])
def test_a_terminating_pod_clears_by_itself_within_and_past_its_grace(*, kube, namespace, silent_node, run_module, grace, kind) -> None:
    kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_body("slow-0", silent_node, grace=grace))
    kube.delete(f"/api/v1/namespaces/{namespace}/pods/slow-0")
    due = kube.get(f"/api/v1/namespaces/{namespace}/pods/slow-0")["metadata"]["deletionTimestamp"]
    if grace == 1:
        time.sleep(2.5)  # its grace is over; no kubelet confirms it gone

    result = run_module("machine_drain", {"node": silent_node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    [blocker] = result["blockers"]
    assert (blocker["phase"], blocker["kind"], blocker["object"], blocker["verdict"]) == ("drain", kind, f"Pod {namespace}/slow-0", CLEARS), blocker
    if grace == 1:
        assert blocker["since"] == due and blocker["evidence"]["past_grace_seconds"] >= 1
        assert blocker["reason"].startswith("its kubelet has not confirmed it gone")
    else:
        assert blocker["since"] is None and 200 < blocker["evidence"]["grace_left_seconds"] <= 300
        assert blocker["reason"] == "it is within its grace period"


def test_a_pod_on_an_unreachable_node_clears_by_itself_when_the_drain_lets_it_go(*, kube, namespace, silent_node, run_module) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    unknown = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
    conditions = [{**unknown, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]
    kube.patch(f"/api/v1/nodes/{silent_node}", {"status": {"conditions": conditions}}, subresource_status=True)
    kube.create(f"/api/v1/namespaces/{namespace}/pods", pod_body("db-0", silent_node, grace=300))
    kube.delete(f"/api/v1/namespaces/{namespace}/pods/db-0")
    due = kube.get(f"/api/v1/namespaces/{namespace}/pods/db-0")["metadata"]["deletionTimestamp"]

    result = run_module("machine_drain", {"node": silent_node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    [blocker] = result["blockers"]
    assert (blocker["phase"], blocker["kind"], blocker["object"], blocker["since"], blocker["verdict"]) == (
        "drain",
        "unreachable node",
        f"Pod {namespace}/db-0",
        None,
        CLEARS,
    ), blocker
    assert 200 < blocker["evidence"]["grace_left_seconds"] <= 300 and blocker["evidence"]["let_go_at"] > due, blocker
    assert "out_of_service" in blocker["reason"], blocker["reason"]


def test_a_pod_of_a_terminating_namespace_clears_by_itself(*, kube, stuck_namespace, make_node, run_module) -> None:
    namespace = stuck_namespace
    node = make_node()
    make_pods(kube, namespace, node, {"left-0": {}})
    kube.delete(f"/api/v1/namespaces/{namespace}")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "left-0", "namespace": namespace}}

    def refused() -> bool:
        try:
            kube.create(f"/api/v1/namespaces/{namespace}/pods/left-0/eviction", eviction, dry_run=True)
        except ApiError:
            return True
        return False

    wait_for(refused, timeout=30, what="evictions to be refused in the terminating namespace")

    result = run_module("machine_drain", {"node": node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    blocker = only(result["blockers"], "namespace terminating")
    assert (blocker["phase"], blocker["object"], blocker["verdict"], blocker["since"]) == ("drain", f"Pod {namespace}/left-0", CLEARS, None), blocker
    assert blocker["reason"] == "its namespace is being deleted; the namespace controller deletes the Pod"


def test_a_pod_waited_for_to_complete_clears_by_itself(*, kube, namespace, make_node, run_module) -> None:
    node = make_node()
    make_pods(kube, namespace, node, {"batch-0": {"labels": {"cluster.x-k8s.io/drain": "wait-completed"}}})

    result = run_module("machine_drain", {"node": node, "wait": False})

    assert not result.get("failed"), result.get("msg")
    [blocker] = result["blockers"]
    assert (blocker["phase"], blocker["kind"], blocker["object"], blocker["verdict"]) == ("drain", "wait-for-completion", f"Pod {namespace}/batch-0", CLEARS)
    assert blocker["since"] is None and blocker["evidence"] == {"phase": "Running"}, blocker


@pytest.mark.parametrize("flavour", ["openshift"], indirect=True)
@pytest.mark.parametrize("other_machine_deleting", [False, True])
def test_another_cordoned_control_plane_node_holds_an_openshift_drain(
    *, flavour, kube, namespace, machine_node, make_node, make_machine, run_module, other_machine_deleting
) -> None:
    control_plane = {"node-role.kubernetes.io/control-plane": ""}
    machine, node = machine_node()
    kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": control_plane}})
    other = make_node(labels=control_plane)
    other_machine = make_machine(namespace, node=other)["metadata"]["name"]
    kube.patch(
        f"/api/v1/nodes/{other}",
        {"spec": {"unschedulable": True}, "metadata": {"annotations": {"machine.openshift.io/machine": f"{namespace}/{other_machine}"}}},
    )
    if other_machine_deleting:
        delete_machine(kube, flavour, namespace, other_machine)
    delete_machine(kube, flavour, namespace, machine)
    try:
        result = run_module("machine_drain", {"machine": machine, "namespace": namespace, "wait": False})

        assert not result.get("failed"), result.get("msg")
        [blocker] = result["blockers"]
        assert (blocker["phase"], blocker["kind"], blocker["object"]) == ("drain", "another control-plane Node cordoned", f"Node {other}"), blocker
        assert blocker["evidence"] == {"node": other, "machine": f"{namespace}/{other_machine}", "machine_deleting": other_machine_deleting}
        assert blocker["verdict"] == (CLEARS if other_machine_deleting else NEEDS_ACTION) and blocker["since"] is None
        assert not kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"), "held: not cordoned"
    finally:
        kube.patch(f"/api/v1/nodes/{other}", {"spec": {"unschedulable": None}})


# ---------------------------------------------------------------------------
# The gates, and what the progress lines say of the grave blockers


def test_a_pre_drain_hook_needs_its_owner_since_the_wait_the_machine_records(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, _node = machine_node(hooks={"preDrain": [("etcd-quorum", "etcd-guard")]})
    delete_machine(kube, flavour, namespace, machine)

    result = run_module("machine_drain", {"machine": machine, "namespace": namespace, "wait": False})

    assert not result.get("failed"), result.get("msg")
    [blocker] = result["blockers"]
    current = kube.get(machine_path(flavour, namespace, machine))
    key = f"{HOOK_KEY['preDrain']}/etcd-quorum"
    if flavour == "openshift":
        assert (blocker["object"], blocker["since"]) == ("etcd-quorum", None), blocker  # OpenShift records no wait start
        assert blocker["evidence"] == {"owner": "etcd-guard", "name": "etcd-quorum"}
    else:
        started = deletion_status(current).get(HOOK_WAIT_FIELD["preDrain"])
        assert started and (blocker["object"], blocker["since"]) == (key, started), (blocker, current.get("status"))
        assert blocker["evidence"] == {"owner": "etcd-guard", "name": "etcd-quorum", "annotation": key}
    assert (blocker["phase"], blocker["kind"], blocker["verdict"]) == ("preDrain hook", "hook", NEEDS_ACTION)
    assert blocker["reason"] == "its owner etcd-guard removes it once its work before the preDrain gate is done"


@CAPI_ONLY
def test_the_progress_lines_name_the_grave_blockers_with_their_since(*, flavour, kube, namespace, machine_node, make_node, make_machine, run_module) -> None:
    hooked, _node = machine_node(hooks={"preDrain": [("etcd-quorum", "etcd-guard")]})
    stuck_node = make_node()
    stuck = make_machine(namespace, node=stuck_node)["metadata"]["name"]
    make_pods(kube, namespace, stuck_node, {"db-0": {"labels": {"app": "db"}}})
    budget(kube, namespace, "db", {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}})

    machines = [{"name": name, "namespace": namespace} for name in (hooked, stuck)]
    result = run_module("machine_delete", {"machines": machines, "machine_controller": "absent", "drain_timeout": 4})

    by_name = {m["name"]: m for m in result["machines"]}
    started = deletion_status(kube.get(machine_path(flavour, namespace, hooked))).get(HOOK_WAIT_FIELD["preDrain"])
    key = f"{HOOK_KEY['preDrain']}/etcd-quorum"
    assert started and [b["since"] for b in by_name[hooked]["blockers"]] == [started], by_name[hooked]
    hook_line = f"    ! {NEEDS_ACTION}: hook {key} since {started}: its owner etcd-guard removes it once its work before the preDrain gate is done"
    never_line = f"    ! {NEVER}: budget refusal Pod {namespace}/db-0: budget {namespace}/db: its maxUnavailable is 0: it allows no eviction at all"
    progress = result["progress"]
    assert hook_line in progress and never_line in progress, "\n".join(progress)
    stuck_blocker = only(by_name[stuck]["blockers"], "budget refusal")
    assert (stuck_blocker["verdict"], stuck_blocker["evidence"]["max_unavailable"], stuck_blocker["evidence"]["budget"]) == (NEVER, 0, f"{namespace}/db")


def test_a_pre_terminate_hook_needs_its_owner_since_the_wait_the_machine_records(*, flavour, doomed, run_module, kube) -> None:
    machine = doomed(hooks={"preTerminate": [("flush-logs", "log-shipper")]})

    result = run_module("machine_terminate", args(machine))

    assert not result.get("failed"), result.get("msg")
    [blocker] = result["blockers"]
    assert (blocker["phase"], blocker["kind"], blocker["verdict"]) == ("preTerminate hook", "hook", NEEDS_ACTION), blocker
    assert blocker["evidence"]["owner"] == "log-shipper"
    if flavour == "openshift":
        assert (blocker["object"], blocker["since"]) == ("flush-logs", None)
    else:
        started = deletion_status(kube.get(machine["path"])).get(HOOK_WAIT_FIELD["preTerminate"])
        assert started and (blocker["object"], blocker["since"]) == (f"{HOOK_KEY['preTerminate']}/flush-logs", started), blocker


# ---------------------------------------------------------------------------
# The termination


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_an_unfinished_drain_needs_someone_to_drain(*, flavour, doomed, run_module) -> None:
    machine = doomed(drained=False)

    result = run_module("machine_terminate", args(machine))

    assert result.get("failed") is True, result
    [blocker] = result["blockers"]
    assert (blocker["phase"], blocker["kind"], blocker["object"], blocker["verdict"]) == ("drain", "drain unfinished", f"Node {machine['node']}", NEEDS_ACTION)
    assert blocker["since"] is None, "nothing records a drain that never started"
    assert "run lifecycle.machine.machine_drain" in blocker["reason"]


@pytest.mark.parametrize("flavour", ["openshift", "v1beta2"], indirect=True)
def test_an_attached_volume_clears_by_itself_since_the_recorded_wait(*, flavour, doomed, volumes, run_module, kube) -> None:
    make_pv, attach = volumes
    machine = doomed()
    pv, _unique = make_pv(machine["namespace"], "data")
    attach(machine["node"], pv)

    result = run_module("machine_terminate", args(machine))

    assert not result.get("failed"), result.get("msg")
    [blocker] = result["blockers"]
    started = test_machine_terminate.volume_start(kube, flavour, machine["path"])
    assert (blocker["phase"], blocker["kind"], blocker["verdict"]) == ("volumes", "volume attachment", CLEARS), blocker
    assert (blocker["object"], blocker["since"]) == (f"PersistentVolumeClaim {machine['namespace']}/data", started) and started


@CAPI_ONLY
@pytest.mark.every_generation  # the references to these objects differ between the generations
@pytest.mark.parametrize("which", ["infrastructure", "bootstrap"])
def test_an_infrastructure_or_bootstrap_object_kept_by_its_finalizer_clears_by_itself(*, flavour, doomed, run_module, kube, which) -> None:
    machine = doomed(**{f"{which}_finalizers": ("provider.example.com/cleanup",)})

    result = run_module("machine_terminate", args(machine))

    assert not result.get("failed"), result.get("msg")
    [blocker] = result["blockers"]
    assert (blocker["phase"], blocker["kind"], blocker["verdict"]) == ("infrastructure", "infrastructure finalizer", CLEARS), blocker
    kind = "FakeMachine" if which == "infrastructure" else "FakeBootstrapConfig"
    assert blocker["object"] == f"{kind} {machine['namespace']}/{machine['name']}"
    deleted = kube.get(machine[which])["metadata"]["deletionTimestamp"]
    assert blocker["evidence"] == {"finalizers": ["provider.example.com/cleanup"]} and blocker["since"] == deleted


@pytest.mark.parametrize("flavour", ["openshift"], indirect=True)
def test_an_openshift_instance_needs_the_provider_tasks(*, flavour, doomed, run_module) -> None:
    machine = doomed()

    result = run_module("machine_terminate", args(machine))

    assert not result.get("failed"), result.get("msg")
    assert result["awaiting_instance_termination"] is True
    [blocker] = result["blockers"]
    label = f"Machine {machine['namespace']}/{machine['name']}"
    assert (blocker["phase"], blocker["kind"], blocker["verdict"]) == ("infrastructure", "instance", NEEDS_ACTION), blocker
    assert blocker["object"].startswith(label) and "instance_terminated=true" in blocker["reason"]


@pytest.mark.parametrize("flavour", ["openshift", "v1beta1"], indirect=True)
def test_a_released_machine_kept_by_another_finalizer_needs_someone(*, flavour, doomed, run_module, kube) -> None:
    machine = doomed(extra_finalizers=("example.com/keep",))
    try:
        result = run_module("machine_terminate", args(machine, instance_terminated=True))

        assert not result.get("failed"), result.get("msg")
        assert (result["released"], result["gone"]) == (True, False), result
        [blocker] = result["blockers"]
        assert (blocker["phase"], blocker["kind"], blocker["verdict"]) == ("infrastructure", "finalizer", NEEDS_ACTION), blocker
        assert blocker["object"].startswith(f"Machine {machine['namespace']}/{machine['name']}")
        assert blocker["evidence"] == {"finalizers": ["example.com/keep"]}
    finally:
        test_machine_terminate.release_finalizer(kube, machine["path"], "example.com/keep")


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_a_node_whose_deletion_fails_needs_someone(*, flavour, doomed, undeletable_label, run_module, kube) -> None:
    machine = doomed(node_labels={undeletable_label: "true"}, spec={"deletion": {"nodeDeletionTimeoutSeconds": 3600}})
    test_machine_terminate.wait_until_denied(kube, machine["node"])
    try:
        result = run_module("machine_terminate", args(machine))

        assert result.get("failed") is True, result
        blocker = only(result["blockers"], "node deletion error")
        assert (blocker["phase"], blocker["object"], blocker["verdict"]) == ("node", f"Node {machine['node']}", NEEDS_ACTION), blocker
        assert "this Node may not be deleted" in blocker["evidence"]["error"]
        assert blocker["reason"].endswith("it is tried again until the Machine's node-deletion timeout has passed")
    finally:
        kube.patch(f"/api/v1/nodes/{machine['node']}", {"metadata": {"labels": {undeletable_label: None}}})


# ---------------------------------------------------------------------------
# A live controller, as the collection follows it


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
@pytest.mark.parametrize(("minutes_ago", "kind", "verdict"), [(0, "controller", CLEARS), (20, "controller not progressing", NEEDS_ACTION)])
def test_a_live_controller_clears_by_itself_until_its_report_stops_changing(
    *, flavour, kube, namespace, machine_node, run_module, minutes_ago, kind, verdict
) -> None:
    machine, _node = machine_node()
    path = machine_path(flavour, namespace, machine)
    delete_machine(kube, flavour, namespace, machine)
    # A controller of its own (a field manager that is not the collection) reports the drain after the deletion.
    written = (_dt.datetime.now(_dt.UTC) - _dt.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    message = f"Drain not completed yet (started at {written}):\n* Pod apps/app-0: deletionTimestamp set, but still not removed from the Node"
    deleting = {"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": message, "lastTransitionTime": written}
    time.sleep(1.1)  # the write is recorded (to the second) after the deletion
    kube.request(
        "PATCH",
        f"{path}/status",
        query={"fieldManager": "fake-machine-controller"},
        body={"status": {"conditions": [deleting]}},
        content_type="application/merge-patch+json",
    )

    result = run_module("machine_delete", {"machines": [{"name": machine, "namespace": namespace}], "drain_timeout": 3})

    [entry] = result["machines"]
    assert entry["carried_out_by"] == "controller", entry
    blocker, pod = entry["blockers"]
    who = "controller fake-machine-controller"
    assert (blocker["phase"], blocker["kind"], blocker["object"], blocker["verdict"]) == ("controller", kind, who, verdict), blocker
    assert blocker["since"] == written
    assert blocker["evidence"] == {"reason": "DrainingNode", "details": ["* Pod apps/app-0: deletionTimestamp set, but still not removed from the Node"]}
    assert (pod["phase"], pod["kind"], pod["object"], pod["verdict"]) == ("drain", "pod terminating", "Pod apps/app-0", CLEARS), pod
    if minutes_ago:
        assert blocker["reason"].startswith("it has stood at the same stage for 20 min: DrainingNode: Drain not completed yet")
        line = f"    ! {NEEDS_ACTION}: controller not progressing controller fake-machine-controller since {written}: it has stood at the same stage for 20 min"
        assert any(text.startswith(line) for text in result["progress"]), "\n".join(result["progress"])


# ---------------------------------------------------------------------------
# Beside the real Cluster API controller


@pytest.mark.real_controllers
@pytest.mark.real_controllers_subset
@pytest.mark.slow
def test_blockers_while_the_real_cluster_api_controller_deletes_the_machine(capi_plane: dict) -> None:
    state_dir = Path(capi_plane["state_dir"])
    management_kubeconfig = state_dir / "kubeconfig"
    workload_kubeconfig = Path(capi_plane["workload_kubeconfig"])
    kube = api_from_kubeconfig(str(management_kubeconfig))
    workload = api_from_kubeconfig(str(workload_kubeconfig))
    namespace, cluster, worker, apps = "blockers-capi", "real", "worker-0", "apps"
    path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{worker}"
    realctl.capi_worker_with_hooks(
        kube, workload, workload_kubeconfig, namespace=namespace, cluster=cluster, worker=worker, hooks={"preDrain": "drain-gate"}, pod_namespace=apps
    )
    # The Pod on the worker is behind a budget that allows no eviction at all.
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "app", "namespace": apps}}
    budget["spec"] = {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "app-0"}}}
    realctl.create(workload, budget)
    params = {"machines": [{"name": worker, "namespace": namespace}], "drain_timeout": 600, "progress_interval": 0}

    def delete_for(seconds: int) -> dict:
        result = run_module_with(str(management_kubeconfig), "machine_delete", {**params, "drain_timeout": seconds})
        [entry] = result["machines"]
        assert entry["carried_out_by"] == "controller", json.dumps(result, indent=1)
        return result

    # Held at the preDrain gate by the controller: the hook, since the wait start Cluster API wrote.
    result = delete_for(8)
    machine = kube.get(path)
    started = deletion_status(machine).get("waitForPreDrainHookStartTime")
    assert started, machine.get("status")
    [blocker] = result["machines"][0]["blockers"]
    key = f"{HOOK_KEY['preDrain']}/drain-gate"
    assert (blocker["phase"], blocker["kind"], blocker["object"], blocker["since"], blocker["verdict"]) == ("preDrain hook", "hook", key, started, NEEDS_ACTION)
    assert blocker["evidence"] == {"owner": realctl.HOOK_OWNER, "name": "drain-gate", "annotation": key}
    assert f"    ! {NEEDS_ACTION}: hook {key} since {started}: its owner {realctl.HOOK_OWNER} removes it" in "\n".join(result["progress"])

    # The controller drains and the budget refuses: the controller, since its drain began, and the Pod it names.
    realctl.remove_hook(management_kubeconfig, namespace, worker, "preDrain", "drain-gate")
    wait_for(lambda: "disruption budget" in realctl.v1beta2_condition(kube.get(path), "Deleting").get("message", ""), timeout=60, what="the refusal reported")
    result = delete_for(5)
    drain_started = deletion_status(kube.get(path)).get("nodeDrainStartTime")
    following, refusal = result["machines"][0]["blockers"]
    assert (following["phase"], following["kind"], following["since"], following["verdict"]) == ("controller", "controller", drain_started, CLEARS), following
    assert following["object"].startswith("controller ") and following["evidence"]["reason"] == "DrainingNode"
    # The refusing budget, read on the workload side, is judged as the collection's own drain judges it.
    assert (refusal["phase"], refusal["kind"], refusal["object"], refusal["verdict"]) == ("drain", "budget refusal", f"Pod {apps}/app-0", NEVER), refusal
    assert refusal["reason"] == f"budget {apps}/app: its maxUnavailable is 0: it allows no eviction at all"
    evidence = refusal["evidence"]
    assert evidence["reported_by"] == following["object"]
    assert evidence["report"].startswith("cannot evict pod as it would violate the pod's disruption budget.")
    counted = workload.get(f"/apis/policy/v1/namespaces/{apps}/poddisruptionbudgets/app")["status"]
    assert (evidence["pod"], evidence["budget"], evidence["max_unavailable"], evidence["disruptions_allowed"]) == (f"{apps}/app-0", f"{apps}/app", 0, 0)
    assert (evidence["needed_healthy"], evidence["healthy"], evidence["expected_pods"]) == (
        counted["desiredHealthy"],
        counted["currentHealthy"],
        counted["expectedPods"],
    ), counted
    never_line = f"    ! {NEVER}: budget refusal Pod {apps}/app-0: budget {apps}/app: its maxUnavailable is 0: it allows no eviction at all"
    assert never_line in result["progress"], "\n".join(result["progress"])

    # on_stall: fail stops following at once (within its look every 20 s), naming the budget; the Machine stays with its controller.
    started = time.monotonic()
    result = run_module_with(str(management_kubeconfig), "machine_delete", {**params, "on_stall": "fail"})
    [entry] = result["machines"]
    assert entry["status"] == "failed" and entry["message"].startswith("Stopped following the deletion: its controller"), entry
    assert f"Pod {apps}/app-0: budget {apps}/app: its maxUnavailable is 0" in entry["message"], entry["message"]
    assert time.monotonic() - started < 60, "on_stall: fail does not wait for the drain's budget (600 s)"
    assert kube.get(path)["metadata"].get("deletionTimestamp"), "the Machine stays marked, with its controller"
    assert workload.get(f"/api/v1/namespaces/{apps}/pods/app-0") is not None, "the budget holds the Pod"


# ---------------------------------------------------------------------------
# Beside the real OpenShift machine controller


@pytest.mark.real_controllers
@pytest.mark.slow
def test_blockers_while_the_real_openshift_controller_deletes_the_machine(mapi_plane: dict) -> None:
    kubeconfig = Path(mapi_plane["state_dir"]) / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    namespace, worker = "blockers-mapi", "worker-0"
    hooks = {"preDrain": [{"name": "drain-gate", "owner": realctl.HOOK_OWNER}]}
    machines = test_live_controller._running_openshift_machine(kube, namespace, worker, hooks)
    params = {"machines": [{"name": worker, "namespace": namespace}], "drain_timeout": 6}

    result = run_module_with(str(kubeconfig), "machine_delete", params)

    [entry] = result["machines"]
    assert entry["carried_out_by"] == "controller", json.dumps(result, indent=1)
    assert realctl.v1beta2_condition(kube.get(f"{machines}/{worker}"), "Drainable").get("status") == "False"
    [blocker] = entry["blockers"]
    # OpenShift records no start of the hook's wait: since is null, never guessed.
    assert (blocker["phase"], blocker["kind"], blocker["object"], blocker["since"], blocker["verdict"]) == (
        "preDrain hook",
        "hook",
        "drain-gate",
        None,
        NEEDS_ACTION,
    )
    assert blocker["evidence"] == {"owner": realctl.HOOK_OWNER, "name": "drain-gate"}
    assert f"    ! {NEEDS_ACTION}: hook drain-gate: its owner {realctl.HOOK_OWNER} removes it" in "\n".join(result["progress"])

    # OpenShift's drain names each Pod whose eviction it could not get within its 20 s try (not why: the
    # budget's refusal goes to its log) only in a DrainRequeued Event: the Drained False it sets is never
    # written (it returns before its status patch). The collection reads that Event while it follows the
    # drain and judges the Pod by its budget (docs/stalls.md).
    budget_body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "app", "namespace": namespace}}
    budget_body["spec"] = {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "app-0"}}}
    realctl.create(kube, budget_body)
    realctl.remove_hook(kubeconfig, namespace, worker, "preDrain", "drain-gate")

    def requeued() -> str:
        events = kube.list(f"/api/v1/namespaces/{namespace}/events")
        found = [e for e in events if e.get("reason") == "DrainRequeued" and (e.get("involvedObject") or {}).get("name") == worker]
        return next((e["message"] for e in found if "global timeout reached" in e.get("message", "")), "")

    report = wait_for(requeued, timeout=120, what="the drain's DrainRequeued Event naming the Pod")
    assert report == f'Node drain requeued: error when evicting pods/"app-0" -n "{namespace}": global timeout reached: 20s', report
    assert realctl.v1beta2_condition(kube.get(f"{machines}/{worker}"), "Drained").get("status") != "False"
    result = run_module_with(str(kubeconfig), "machine_delete", {**params, "drain_timeout": 5})
    [entry] = result["machines"]
    assert [(b["kind"], b["object"], b["verdict"]) for b in entry["blockers"]] == [
        ("controller", entry["blockers"][0]["object"], CLEARS),
        ("budget refusal", f"Pod {namespace}/app-0", NEVER),
    ], entry["blockers"]
    evidence = entry["blockers"][1]["evidence"]
    assert (evidence["budget"], evidence["max_unavailable"], evidence["disruptions_allowed"]) == (f"{namespace}/app", 0, 0), evidence
    assert evidence["report"] == f'error when evicting pods/"app-0" -n "{namespace}": global timeout reached: 20s', evidence
    assert kube.get(f"/api/v1/namespaces/{namespace}/pods/app-0") is not None, "the budget holds the Pod"
