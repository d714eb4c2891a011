"""Hands off what the controllers leave alone, against the real API server (docs/behaviour.md, "Hands off";
docs/stalls.md): a paused Cluster or Machine is neither marked, cordoned, drained, terminated nor released by any
module, the role or a playbook, and says why; override_pause goes through, on the record. OpenShift's move to
Cluster API: both Machine CRDs and ValidatingAdmissionPolicies reproducing the migration's refusals; the collection
refuses the non-authoritative side naming the authoritative Machine, writes hooks only where the policy lets it,
and deletes through the authoritative one."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path

import pytest
from khelpers import capi_machine, openshift_machine, put_fake_object, put_kubeconfig_secret, wait_for
from test_machine_drain import CAPI_ONLY, make_pods, node_unschedulable

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

REPO = Path(__file__).resolve().parents[2]
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
NEEDS_SOMEONE = "needs someone to act"
CLUSTER = "lm-test"


def machine_path(flavour: str, namespace: str, name: str) -> str:
    group = "machine.openshift.io/v1beta1" if flavour == "openshift" else f"cluster.x-k8s.io/{flavour}"
    return f"/apis/{group}/namespaces/{namespace}/machines/{name}"


def versions(kube: KubeApi, paths: list[str]) -> dict[str, str | None]:
    return {path: ((kube.get(path) or {}).get("metadata") or {}).get("resourceVersion") for path in paths}


def collection_writes(audit_events, namespace: str, since: float) -> list[str]:
    """``verb resource/subresource/name`` of every write sent with the collection's user agent in ``namespace`` (and on
    Nodes) since ``since`` (epoch seconds; the test's own client sends the same agent: take ``since`` after its writes)."""
    found = []
    for event in audit_events():
        ref = event.get("objectRef") or {}
        stamp = str(event.get("requestReceivedTimestamp") or "1970-01-01T00:00:00Z").replace("Z", "+00:00")
        if event.get("verb") not in WRITES or not (event.get("userAgent") or "").startswith("lifecycle.machine"):
            continue
        if ref.get("namespace") not in (namespace, None) or dt.datetime.fromisoformat(stamp).timestamp() < since:
            continue
        found.append(f"{event['verb']} {ref.get('resource')}/{ref.get('subresource', '')}/{ref.get('name')}")
    return found


def machine_event_messages(kube: KubeApi, namespace: str, name: str, reason: str) -> list[str]:
    events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={name}")
    return [event["message"] for event in events if event.get("reason") == reason]


@CAPI_ONLY
def test_a_paused_cluster_is_left_alone_whoever_would_act(*, flavour, kube, namespace, machine_node, run_module, run_playbook, audit_events) -> None:
    machine, node = machine_node()
    make_pods(kube, namespace, node, {"web-0": {}})
    cluster = f"/apis/cluster.x-k8s.io/{flavour}/namespaces/{namespace}/clusters/{CLUSTER}"
    kube.patch(cluster, {"spec": {"paused": True}})
    path = machine_path(flavour, namespace, machine)
    watched = [path, f"/api/v1/nodes/{node}", f"/api/v1/namespaces/{namespace}/pods/web-0"]
    before, started = versions(kube, watched), time.time()
    key = f"{namespace}/{machine}"
    cause = "Cluster spec.paused is set to true"

    marked = run_module("machine_mark_for_deletion", {"machine": machine, "namespace": namespace})
    assert marked.get("failed") and marked["msg"].startswith(f"Machine {key} is paused ({cause}): "), marked
    [blocker] = marked["blockers"]
    assert (blocker["kind"], blocker["object"], blocker["verdict"], blocker["phase"]) == ("paused", f"Cluster {namespace}/{CLUSTER}", NEEDS_SOMEONE, "paused")

    held = run_module("machine_delete", {"machines": [{"name": machine, "namespace": namespace}], "drain_timeout": 600})
    [entry] = held["machines"]
    assert (entry["status"], entry["step"]) == ("in_progress", "paused"), entry
    assert [b["kind"] for b in entry["blockers"]] == ["paused"]
    assert any(line.strip().startswith(f"! {NEEDS_SOMEONE}: paused Cluster {namespace}/{CLUSTER}") for line in held["progress"]), held["progress"]

    plan = run_module("machine_delete", {"machines": [{"name": machine, "namespace": namespace}]}, check=True)
    assert plan["preflight"]["would_wait"][key][0].startswith(f"{NEEDS_SOMEONE}: paused Cluster {namespace}/{CLUSTER}"), plan["preflight"]

    failed = run_module("machine_delete", {"machines": [{"name": machine, "namespace": namespace}], "on_stall": "fail"})
    [entry] = failed["machines"]
    assert entry["status"] == "failed" and "on_stall is fail" in entry["message"] and entry["blockers"][0]["kind"] == "paused"

    # The role, through the playbook AWX runs: it fails the Machine at once (on_stall=fail), naming the pause.
    proc = run_playbook(REPO / "playbooks" / "delete_machine.yml", {"machine_name": machine, "machine_namespace": namespace, "on_stall": "fail"})
    assert proc.returncode != 0 and f"Machine {key} is paused ({cause})" in proc.stdout, proc.stdout[-3000:]

    assert collection_writes(audit_events, namespace, started) == []

    # Marked by someone else meanwhile: the drain and the termination leave it alone too, whoever would carry it out.
    kube.delete(path)
    before[path] = versions(kube, [path])[path]
    started = time.time()
    for module in ("machine_drain", "machine_terminate"):
        result = run_module(module, {"machine": machine, "namespace": namespace, "machine_controller": "absent"})
        assert result.get("failed") and result["msg"].startswith(f"Machine {key} is paused"), result
        assert result["blockers"][0]["kind"] == "paused"
    assert versions(kube, watched) == before and not node_unschedulable(kube, node)
    assert collection_writes(audit_events, namespace, started) == []


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_the_paused_annotation_holds_and_the_override_goes_through_on_the_record(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node(annotations={"cluster.x-k8s.io/paused": ""})
    make_pods(kube, namespace, node, {"web-0": {}})
    path = machine_path(flavour, namespace, machine)
    machines = [{"name": machine, "namespace": namespace}]

    held = run_module("machine_delete", {"machines": machines})
    [entry] = held["machines"]
    assert entry["status"] == "in_progress" and entry["blockers"][0]["object"] == f"Machine {namespace}/{machine}", entry
    assert not kube.get(path)["metadata"].get("deletionTimestamp")

    reason = f"CHG-{uuid.uuid4().hex[:4]}: teardown with the controllers stopped, approved by the storage team"
    done = run_module("machine_delete", {"machines": machines, "override_pause": reason, "machine_controller": "absent", "wait_sleep": 1})
    [entry] = done["machines"]
    assert entry["status"] == "done", entry
    assert kube.get(path) is None and kube.get(f"/api/v1/nodes/{node}") is None
    [message] = machine_event_messages(kube, namespace, machine, "PauseOverridden")
    assert message == (
        f"Acting on the Machine although it is paused (Machine has the cluster.x-k8s.io/paused annotation), as asked by admin with override_pause: {reason}"
    )


# -- OpenShift's move to Cluster API -----------------------------------------------------------------------

MAPI_NS, CAPI_NS = "openshift-machine-api", "openshift-cluster-api"
POLICIES = ("lm-test-mirror-mapi", "lm-test-mirror-capi")


def _binding(name: str, namespace: str, params_in: str) -> dict:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "paramRef": {"namespace": params_in, "selector": {}, "parameterNotFoundAction": "Allow"},
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
        },
    }


def _policy(name: str, group: str, param: dict, when: str, message: str) -> dict:
    """A policy reproducing the migration's refusal of changes to the non-authoritative side (its spec, its
    machine.openshift.io and cluster.x-k8s.io annotations), by anyone (the bed runs no migration controller)."""
    annotations = (
        "!(object.metadata.?annotations.orValue({}).exists(k, (k.startsWith('machine.openshift.io') || k.contains('cluster.x-k8s.io')) &&"
        " oldObject.metadata.?annotations.orValue({})[?k].orValue(null) != object.metadata.?annotations.orValue({})[k]) ||"
        " oldObject.metadata.?annotations.orValue({}).exists(k, (k.startsWith('machine.openshift.io') || k.contains('cluster.x-k8s.io')) &&"
        " !(k in object.metadata.?annotations.orValue({}))))"
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": param,
            "matchConstraints": {"resourceRules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["machines"]}]},
            "matchConditions": [{"name": "mirror", "expression": "object.metadata.name == params.metadata.name"}, {"name": "authority", "expression": when}],
            "validations": [
                {"expression": "object.spec == oldObject.spec", "message": f"Changing .spec is not allowed: status.authoritativeAPI is set to {message}."},
                {
                    "expression": annotations,
                    "message": f"Cannot change machine.openshift.io or cluster.x-k8s.io annotations: status.authoritativeAPI is {message}.",
                },
            ],
        },
    }


@pytest.fixture
def migration(kube: KubeApi, self_hosted_kubeconfig: str, capi_generation):
    """The migration's two namespaces, a Cluster in the Cluster API one, and the two policies; removed after the test."""
    # The migration's mirrors are Cluster API v1beta2 Machines, whichever generation the worker's
    # control plane served for the test before.
    capi_generation.use("v1beta2")
    created: list[str] = []
    for namespace in (MAPI_NS, CAPI_NS):
        if kube.get(f"/api/v1/namespaces/{namespace}") is None:
            kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    put_kubeconfig_secret(kube, CAPI_NS, CLUSTER, self_hosted_kubeconfig)
    clusters = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{CAPI_NS}/clusters"
    if kube.get(f"{clusters}/{CLUSTER}") is None:
        kube.create(clusters, {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": CLUSTER}})
    created.append(f"{clusters}/{CLUSTER}")
    mapi_param = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine"}
    capi_param = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine"}
    policies = [
        (
            _policy(
                POLICIES[0],
                "machine.openshift.io",
                capi_param,
                "object.?status.authoritativeAPI.orValue('') == 'ClusterAPI'",
                "Cluster API",
            ),
            _binding(POLICIES[0], MAPI_NS, CAPI_NS),
        ),
        (
            _policy(
                POLICIES[1],
                "cluster.x-k8s.io",
                mapi_param,
                "params.?status.authoritativeAPI.orValue('') == 'MachineAPI'",
                "Machine API",
            ),
            _binding(POLICIES[1], CAPI_NS, MAPI_NS),
        ),
    ]
    base = "/apis/admissionregistration.k8s.io/v1"
    for policy, binding in policies:
        kube.create(f"{base}/validatingadmissionpolicies", policy)
        kube.create(f"{base}/validatingadmissionpolicybindings", binding)
        created += [
            f"{base}/validatingadmissionpolicybindings/{binding['metadata']['name']}",
            f"{base}/validatingadmissionpolicies/{policy['metadata']['name']}",
        ]
    yield
    for path in created:
        if kube.get(path) is not None:
            if "/machines/" in path or "/clusters/" in path:
                kube.patch(path, {"metadata": {"finalizers": None}})
            kube.delete(path)


def mirrored_pair(kube: KubeApi, make_node, authority: str) -> tuple[str, str, str]:
    """A Machine API Machine (status.authoritativeAPI ``authority``) with its Node, and its Cluster API mirror
    (paused while the Machine API is authoritative, as the sync keeps it). Returns (name, MAPI path, CAPI path)."""
    name = f"mig-{uuid.uuid4().hex[:6]}"
    node = make_node()
    mapi = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NS}/machines/{name}"
    kube.create(f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NS}/machines", openshift_machine(name))
    kube.patch(mapi, {"status": {"authoritativeAPI": authority, "nodeRef": {"kind": "Node", "name": node}}}, subresource_status=True)
    put_fake_object(kube, f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{CAPI_NS}/fakemachines", name)
    annotations = {"cluster.x-k8s.io/paused": ""} if authority != "ClusterAPI" else {}
    body = capi_machine(name, "v1beta2", annotations=annotations)
    body["metadata"]["finalizers"].append("sync.machine.openshift.io/finalizer")
    kube.create(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{CAPI_NS}/machines", body)
    capi = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{CAPI_NS}/machines/{name}"
    return name, mapi, capi


def wait_until_refused(kube: KubeApi, path: str, patch: dict) -> None:
    """Until the migration's policy refuses ``patch`` (sent as a dry run) - a new policy takes a moment to take effect."""

    def refused() -> bool:
        try:
            kube.patch(path, patch, dry_run=True)
        except ApiError as exc:
            return exc.status in (403, 422)
        return False

    wait_for(refused, timeout=30, what="the migration's admission policy to take effect")


def release(kube: KubeApi, *paths: str) -> None:
    for path in paths:
        if kube.get(path) is not None:
            kube.patch(path, {"metadata": {"finalizers": None}})
            kube.delete(path)


def test_the_cluster_api_mirror_of_an_authoritative_machine_api_machine_is_refused_and_the_deletion_goes_through_it(
    *, kube, migration, make_node, run_module, audit_events
) -> None:
    name, mapi, capi = mirrored_pair(kube, make_node, "MachineAPI")
    try:
        # The policy is live: a hook written on the mirror by hand is refused (a bare 403); a dry run, until it takes effect.
        wait_until_refused(kube, capi, {"metadata": {"annotations": {"pre-drain.delete.hook.machine.cluster.x-k8s.io/backup": "me"}}})
        authoritative = f"Machine {MAPI_NS}/{name} (machine.openshift.io/v1beta1)"

        hook = run_module("machine_hook", {"machine": name, "namespace": CAPI_NS, "point": "preDrain", "name": "backup", "owner": "backup-ctl"})
        assert hook.get("failed") and f"it mirrors {authoritative.replace('Machine ', 'Machine ', 1)}" in hook["msg"], hook
        assert "write the hook there (spec.lifecycleHooks.preDrain)" in hook["msg"]
        assert run_module("machine_hook", {"machine": name, "namespace": MAPI_NS, "point": "preDrain", "name": "backup", "owner": "backup-ctl"})["changed"]

        before, started = versions(kube, [capi]), time.time()
        refused_delete = run_module("machine_delete", {"machines": [{"name": name, "namespace": CAPI_NS}]})
        [entry] = refused_delete["machines"]
        assert entry["status"] == "failed" and entry["message"].startswith(f"Machine {CAPI_NS}/{name} is not the authoritative one: the Machine API")
        assert f"act on {authoritative} instead (deleting either deletes both)" in entry["message"]
        assert entry["blockers"][0]["kind"] == "authority elsewhere" and entry["blockers"][0]["object"] == authoritative
        marked = run_module("machine_mark_for_deletion", {"machine": name, "namespace": CAPI_NS})
        assert marked.get("failed") and "is not the authoritative one" in marked["msg"]
        assert versions(kube, [capi]) == before and not kube.get(capi)["metadata"].get("deletionTimestamp")
        assert [w for w in collection_writes(audit_events, CAPI_NS, started) if f"/{name}" in w] == []

        # Through the authoritative one it goes: marked, its hook waited for, drained, at the instance.
        run_module("machine_hook", {"machine": name, "namespace": MAPI_NS, "point": "preDrain", "name": "backup", "state": "absent"})
        deleted = run_module("machine_delete", {"machines": [{"name": name, "namespace": MAPI_NS}], "machine_controller": "absent"})
        [entry] = deleted["machines"]
        assert entry["status"] == "awaiting_instance_termination", entry
        assert kube.get(mapi)["metadata"].get("deletionTimestamp")
    finally:
        release(kube, mapi, capi)


def test_a_machine_api_machine_cluster_api_is_authoritative_for_is_refused_naming_its_mirror(*, kube, migration, make_node, run_module) -> None:
    name, mapi, capi = mirrored_pair(kube, make_node, "ClusterAPI")
    try:
        mirror = f"Machine {CAPI_NS}/{name} (cluster.x-k8s.io/v1beta2)"
        wait_until_refused(kube, mapi, {"spec": {"lifecycleHooks": {"preDrain": [{"name": "backup", "owner": "by-hand"}]}}})
        for module, options in (
            ("machine_mark_for_deletion", {}),
            ("machine_drain", {"machine_controller": "absent"}),
        ):
            result = run_module(module, {"machine": name, "namespace": MAPI_NS, **options})
            assert result.get("failed") and result["msg"].startswith(f"Machine {MAPI_NS}/{name} is not the authoritative one: Cluster API"), result
            assert f"act on {mirror} instead" in result["msg"] and "The AuthoritativeAPI status is set to 'ClusterAPI'" in result["msg"]
        hook = run_module("machine_hook", {"machine": name, "namespace": MAPI_NS, "point": "preTerminate", "name": "flush", "owner": "log-shipper"})
        assert hook.get("failed") and "as the annotation pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush" in hook["msg"], hook
        assert not kube.get(mapi)["metadata"].get("deletionTimestamp")
        # The authoritative Cluster API Machine takes the hook (the sync would copy it across).
        assert run_module("machine_hook", {"machine": name, "namespace": CAPI_NS, "point": "preTerminate", "name": "flush", "owner": "log-shipper"})["changed"]

        # While the authority is handed over, both sides are held, not refused.
        kube.patch(mapi, {"status": {"authoritativeAPI": "Migrating"}}, subresource_status=True)
        held = run_module("machine_delete", {"machines": [{"name": name, "namespace": CAPI_NS}, {"name": name, "namespace": MAPI_NS}]})
        assert [(m["status"], m["blockers"][0]["kind"]) for m in held["machines"]] == [("in_progress", "migration in progress")] * 2, held["machines"]
        wait_for(lambda: not kube.get(capi)["metadata"].get("deletionTimestamp"), 5, what="the mirror untouched")
    finally:
        release(kube, mapi, capi)
