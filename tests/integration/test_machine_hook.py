"""machine_hook and machine_info against the real API server, for OpenShift,
Cluster API v1beta1-only and Cluster API v1beta2 Machines."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
from conftest import machine_collection
from khelpers import drained_status

from ansible_collections.lifecycle.machine.plugins.module_utils._hook.logic import HookRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._hook.run import manage_hook
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

CAPI_PREFIX = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}


def stored_hooks(kube: KubeApi, flavour: str, namespace: str, name: str, point: str) -> dict[str, str]:
    """Hook name -> owner, read straight from the stored Machine."""
    machine = kube.get(f"{machine_collection(flavour, namespace)}/{name}")
    if flavour == "openshift":
        return {h["name"]: h["owner"] for h in (machine["spec"].get("lifecycleHooks") or {}).get(point) or []}
    prefix = CAPI_PREFIX[point] + "/"
    return {k[len(prefix) :]: v for k, v in (machine["metadata"].get("annotations") or {}).items() if k.startswith(prefix)}


def resource_version(kube: KubeApi, flavour: str, namespace: str, name: str) -> str:
    return kube.get(f"{machine_collection(flavour, namespace)}/{name}")["metadata"]["resourceVersion"]


def hook_args(machine: str, namespace: str, **extra) -> dict:
    return {"machine": machine, "namespace": namespace, "point": "preDrain", "name": "etcd-quorum", "owner": "etcd-guard", **extra}


@pytest.mark.parametrize("point", ["preDrain", "preTerminate"])
def test_add_readd_reown_remove(*, flavour, namespace, make_machine, run_module, kube, point) -> None:
    machine = make_machine(namespace, hooks={point: [("other-owners-hook", "someone-else")]})["metadata"]["name"]
    args = hook_args(machine, namespace, point=point)

    added = run_module("machine_hook", args, diff=True)
    assert added["changed"] is True, added
    assert added["machines"][0]["action"] == "added"
    assert added["machines"][0]["flavour"] == ("openshift" if flavour == "openshift" else "clusterapi")
    assert stored_hooks(kube, flavour, namespace, machine, point) == {"other-owners-hook": "someone-else", "etcd-quorum": "etcd-guard"}
    key = f"{namespace}/{machine}"
    assert [h["name"] for h in added["diff"]["before"][key][point]] == ["other-owners-hook"]
    assert sorted(h["name"] for h in added["diff"]["after"][key][point]) == ["etcd-quorum", "other-owners-hook"]

    before = resource_version(kube, flavour, namespace, machine)
    again = run_module("machine_hook", args)
    assert again["changed"] is False
    assert again["machines"][0]["action"] == "none"
    assert resource_version(kube, flavour, namespace, machine) == before, "re-adding wrote to the Machine"

    reowned = run_module("machine_hook", {**args, "owner": "new-etcd-guard"})
    assert reowned["changed"] is True
    assert reowned["machines"][0]["action"] == "reowned"
    assert stored_hooks(kube, flavour, namespace, machine, point)["etcd-quorum"] == "new-etcd-guard"

    removed = run_module("machine_hook", {**args, "state": "absent"})
    assert removed["changed"] is True
    assert removed["machines"][0]["action"] == "removed"
    assert stored_hooks(kube, flavour, namespace, machine, point) == {"other-owners-hook": "someone-else"}

    gone = run_module("machine_hook", {**args, "state": "absent"})
    assert gone["changed"] is False


def _succeeded(kube: KubeApi, flavour: str, namespace: str, name: str) -> dict | None:
    machine = kube.get(f"{machine_collection(flavour, namespace)}/{name}")
    return next((c for c in machine.get("status", {}).get("conditions") or [] if c["type"] == "PreDrainEtcdQuorumSucceeded"), None)


def _hook_events(kube: KubeApi, namespace: str, name: str) -> list[dict]:
    events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={name}")
    return [e for e in events if e.get("reason") == "HookSucceeded"]


def test_release_records_the_success_then_removes_the_hook(flavour, namespace, make_machine, run_module, kube) -> None:
    hooks = {"preDrain": [("etcd-quorum", "etcd-guard"), ("other-owners-hook", "someone-else")]}
    machine = make_machine(namespace, hooks=hooks)["metadata"]["name"]
    args = {"machine": machine, "namespace": namespace, "point": "preDrain", "name": "etcd-quorum", "state": "released"}

    before = resource_version(kube, flavour, namespace, machine)
    preview = run_module("machine_hook", args, check=True)
    assert preview["changed"] is True and preview["machines"][0]["action"] == "removed"
    assert resource_version(kube, flavour, namespace, machine) == before, "check mode wrote to the Machine"
    assert _hook_events(kube, namespace, machine) == []

    released = run_module("machine_hook", args, diff=True)
    assert released["changed"] is True, released
    entry = released["machines"][0]
    assert (entry["action"], entry["condition_changed"]) == ("removed", True)
    condition = _succeeded(kube, flavour, namespace, machine)
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "HookSucceeded", "preDrain hook etcd-quorum of etcd-guard succeeded")
    assert stored_hooks(kube, flavour, namespace, machine, "preDrain") == {"other-owners-hook": "someone-else"}
    [event] = _hook_events(kube, namespace, machine)
    assert (event["type"], event["message"]) == ("Normal", "preDrain hook etcd-quorum of etcd-guard succeeded")

    before = resource_version(kube, flavour, namespace, machine)
    again = run_module("machine_hook", args)
    assert again["changed"] is False
    assert resource_version(kube, flavour, namespace, machine) == before, "a second release wrote to the Machine"
    assert len(_hook_events(kube, namespace, machine)) == 1


def test_release_after_a_run_that_recorded_the_success_only_removes_the_hook(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace, hooks={"preDrain": [("etcd-quorum", "etcd-guard")]})["metadata"]["name"]
    recorded = run_module(
        "machine_condition",
        {"machine": machine, "namespace": namespace, "hook": {"point": "preDrain", "name": "etcd-quorum"}, "reason": "HookSucceeded", "msg": "moved"},
    )
    assert recorded["changed"] is True

    released = run_module("machine_hook", {"machine": machine, "namespace": namespace, "point": "preDrain", "name": "etcd-quorum", "state": "released"})

    assert released["machines"][0]["condition_changed"] is False
    assert _succeeded(kube, flavour, namespace, machine)["message"] == "moved"
    assert stored_hooks(kube, flavour, namespace, machine, "preDrain") == {}
    assert _hook_events(kube, namespace, machine) == []


def test_check_mode_predicts_and_changes_nothing(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    before = resource_version(kube, flavour, namespace, machine)
    result = run_module("machine_hook", hook_args(machine, namespace), check=True, diff=True)
    assert result["changed"] is True
    assert result["machines"][0]["action"] == "added"
    assert [h["name"] for h in result["machines"][0]["hooks"]["preDrain"]] == ["etcd-quorum"]
    assert result["diff"]["after"][f"{namespace}/{machine}"]["preDrain"][0]["owner"] == "etcd-guard"
    assert resource_version(kube, flavour, namespace, machine) == before
    assert stored_hooks(kube, flavour, namespace, machine, "preDrain") == {}


def test_label_selectors_choose_every_matching_machine(flavour, namespace, make_machine, run_module, kube) -> None:
    pool = [make_machine(namespace, labels={"pool": "blue"})["metadata"]["name"] for _index in range(2)]
    other = make_machine(namespace, labels={"pool": "green"})["metadata"]["name"]
    args = {"label_selectors": ["pool=blue"], "namespace": namespace, "point": "preTerminate", "name": "backup", "owner": "velero"}
    result = run_module("machine_hook", args)
    assert result["changed"] is True
    assert sorted(m["name"] for m in result["machines"]) == sorted(pool)
    for name in pool:
        assert stored_hooks(kube, flavour, namespace, name, "preTerminate") == {"backup": "velero"}
    assert stored_hooks(kube, flavour, namespace, other, "preTerminate") == {}


def _add_hook(kubeconfig: str, namespace: str, machine: str, hook: str, sync: tuple) -> None:
    # The module's own code path, in a process of its own, started at the same moment as its rival.

    api = api_from_kubeconfig(kubeconfig)
    params = {"machine": machine, "namespace": namespace, "point": "preDrain", "name": hook, "owner": f"owner-of-{hook}", "state": "present"}
    params.update({"label_selectors": None, "api_version": None})
    barrier, results = sync
    barrier.wait()
    try:
        results.put((hook, manage_hook(api, HookRequest.from_params(params, False))["changed"]))
    except Exception as exc:  # reported to the parent
        results.put((hook, repr(exc)))


def test_concurrent_writers_never_lose_a_hook(flavour, namespace, make_machine, kube, kubeconfig) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    context = multiprocessing.get_context("fork")
    for round_number in range(20):
        barrier, results = context.Barrier(2), context.Queue()
        hooks = [f"writer-a-{round_number}", f"writer-b-{round_number}"]
        workers = [context.Process(target=_add_hook, args=(kubeconfig, namespace, machine, hook, (barrier, results))) for hook in hooks]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        outcomes = dict(results.get(timeout=5) for _worker in workers)
        assert outcomes == dict.fromkeys(hooks, True), f"round {round_number}: {outcomes}"
        present = stored_hooks(kube, flavour, namespace, machine, "preDrain")
        assert set(present) == {f"writer-{w}-{r}" for r in range(round_number + 1) for w in "ab"}, f"round {round_number} lost a hook: {sorted(present)}"


def _delete_keeping(kube: KubeApi, flavour: str, namespace: str, name: str) -> None:
    """Mark a Machine for deletion; its finalizer keeps it in the API."""
    kube.delete(f"{machine_collection(flavour, namespace)}/{name}")


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        ({"name": "ab"}, "hook name must be"),
        ({"name": "has spaces!"}, "hook name must"),
        ({"owner": ""}, "owner"),
    ],
)
def test_invalid_hooks_fail_and_change_nothing(*, flavour, namespace, make_machine, run_module, kube, args, rule) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    before = resource_version(kube, flavour, namespace, machine)
    if flavour != "openshift" and args.get("name") == "ab":
        args = {"name": "x" * 64}  # Cluster API names are annotation names: at most 63 characters
    result = run_module("machine_hook", hook_args(machine, namespace, **args))
    assert result.get("failed"), result
    if args.get("owner") != "":
        assert f"{namespace}/{machine}" in result["msg"]
        assert (args.get("name") or "etcd-quorum") in result["msg"]
    assert rule in result["msg"]
    assert resource_version(kube, flavour, namespace, machine) == before


OPENSHIFT_ONLY = pytest.mark.parametrize("flavour", ["openshift"], indirect=True)


@OPENSHIFT_ONLY
def test_openshift_owner_length_rule(namespace, make_machine, run_module, kube, flavour) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    result = run_module("machine_hook", hook_args(machine, namespace, owner="ab"))
    assert result.get("failed")
    assert "hook owner must be 3 to 512 characters long" in result["msg"]
    assert f"Machine {namespace}/{machine}" in result["msg"]


def test_pre_create_only_on_openshift(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    before = resource_version(kube, flavour, namespace, machine)
    result = run_module("machine_hook", hook_args(machine, namespace, point="preCreate", name="ipam", owner="ipam-controller"))
    if flavour == "openshift":
        assert result["changed"] is True
        assert stored_hooks(kube, flavour, namespace, machine, "preCreate") == {"ipam": "ipam-controller"}
        return
    assert result.get("failed")
    assert f"Cannot add preCreate hook ipam on Machine {namespace}/{machine}" in result["msg"]
    assert "exist only on OpenShift" in result["msg"]
    assert resource_version(kube, flavour, namespace, machine) == before


def test_missing_machine_fails(flavour, namespace, run_module) -> None:
    result = run_module("machine_hook", hook_args("no-such-machine", namespace))
    assert result.get("failed")
    assert f"Machine {namespace}/no-such-machine not found" in result["msg"]


def test_deleting_machine_rules(flavour, namespace, make_machine, run_module, kube) -> None:
    """OpenShift forbids adding or re-owning hooks once deletion started; removing
    is allowed. Cluster API allows hooks at any time."""
    machine = make_machine(namespace, hooks={"preDrain": [("etcd-quorum", "etcd-guard")]})["metadata"]["name"]
    _delete_keeping(kube, flavour, namespace, machine)
    before = resource_version(kube, flavour, namespace, machine)

    added = run_module("machine_hook", hook_args(machine, namespace, name="late-hook"))
    reowned = run_module("machine_hook", hook_args(machine, namespace, owner="someone-else"))
    if flavour == "openshift":
        for result, name, owner in ((added, "late-hook", "etcd-guard"), (reowned, "etcd-quorum", "someone-else")):
            assert result.get("failed"), result
            assert f"Machine {namespace}/{machine}" in result["msg"]
            assert (
                "pre-drain hooks are immutable when machine is marked for deletion: "
                f"the following hooks are new or changed: [{{Name:{name} Owner:{owner}}}]" in result["msg"]
            )
        assert resource_version(kube, flavour, namespace, machine) == before
    else:
        assert added["changed"] is True
        assert reowned["changed"] is True

    removed = run_module("machine_hook", hook_args(machine, namespace, state="absent"))
    assert removed["changed"] is True
    assert "etcd-quorum" not in stored_hooks(kube, flavour, namespace, machine, "preDrain")


@OPENSHIFT_ONLY
def test_bad_input_on_one_machine_writes_to_none(flavour, namespace, make_machine, run_module, kube) -> None:
    """Only OpenShift has a deletion-time rule that can refuse one Machine of many."""
    healthy = make_machine(namespace, labels={"pool": "mixed"})["metadata"]["name"]
    deleting = make_machine(namespace, labels={"pool": "mixed"})["metadata"]["name"]
    _delete_keeping(kube, flavour, namespace, deleting)
    before = resource_version(kube, flavour, namespace, healthy)
    result = run_module("machine_hook", {"label_selectors": ["pool=mixed"], "namespace": namespace, "point": "preDrain", "name": "guard", "owner": "guard-ctl"})
    assert result.get("failed")
    assert f"Machine {namespace}/{deleting}" in result["msg"]
    assert resource_version(kube, flavour, namespace, healthy) == before


@pytest.fixture
def machine_crd_without_pre_create(kube: KubeApi):
    """An OpenShift Machine schema as real clusters serve it: no preCreate."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machines.machine.openshift.io"
    original = kube.get(path)
    crd = kube.get(path)
    hooks = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["lifecycleHooks"]["properties"]
    hooks.pop("preCreate")
    kube.replace(path, crd)
    time.sleep(2)  # the schema change reaches the REST handler asynchronously
    yield
    fresh = kube.get(path)
    fresh["spec"] = original["spec"]
    kube.replace(path, fresh)
    time.sleep(2)


@OPENSHIFT_ONLY
@pytest.mark.parametrize("check", [False, True])
def test_pruned_hook_is_detected(*, flavour, namespace, make_machine, run_module, kube, machine_crd_without_pre_create, check) -> None:
    """A schema without spec.lifecycleHooks.preCreate silently prunes the hook."""
    machine = make_machine(namespace)["metadata"]["name"]
    before = resource_version(kube, flavour, namespace, machine)
    result = run_module("machine_hook", hook_args(machine, namespace, point="preCreate", name="ipam", owner="ipam-controller"), check=check)
    assert result.get("failed"), result
    assert f"dropped preCreate hook ipam on Machine {namespace}/{machine}" in result["msg"]
    assert "spec.lifecycleHooks.preCreate" in result["msg"]
    assert resource_version(kube, flavour, namespace, machine) == before


def test_machine_info_reports_hooks_and_gates(flavour, namespace, make_machine, run_module, make_node) -> None:
    node = make_node()
    hooks = {"preDrain": [("etcd-quorum", "etcd-guard")], "preTerminate": [("backup", "velero"), ("flush-logs", "log-shipper")]}
    machine = make_machine(namespace, node=node, hooks=hooks)["metadata"]["name"]
    info = run_module("machine_info", {"machine": machine, "namespace": namespace})
    assert info["changed"] is False
    (described,) = info["machines"]
    assert described["node_name"] == node
    assert described["deleting"] is False
    assert described["flavour"] == ("openshift" if flavour == "openshift" else "clusterapi")
    assert described["api_version"].endswith("v1beta1" if flavour != "v1beta2" else "v1beta2")
    assert [(h["name"], h["owner"]) for h in described["hooks"]["preDrain"]] == [("etcd-quorum", "etcd-guard")]
    assert sorted(h["name"] for h in described["hooks"]["preTerminate"]) == ["backup", "flush-logs"]
    assert described["gates"] == {"drainable": False, "drained": False, "terminable": False, "creatable": True}
    if flavour != "openshift":
        assert described["hooks"]["preDrain"][0]["annotation"] == f"{CAPI_PREFIX['preDrain']}/etcd-quorum"
        assert described["infrastructure_ref"]["kind"] == "FakeMachine"
        assert described["cluster_name"] == "lm-test"


def test_machine_info_query_picks_the_machines_held_at_a_gate(flavour, namespace, make_machine, run_module, kube) -> None:
    held = make_machine(namespace, hooks={"preTerminate": [("flush-logs", "log-shipper")]})["metadata"]["name"]
    make_machine(namespace)
    _delete_keeping(kube, flavour, namespace, held)
    long_ago = "1970-01-01T00:00:00Z"

    found = run_module("machine_info", {"namespace": namespace, "query": "[?deleting && hooks.preTerminate[0]]"})
    assert [m["name"] for m in found["machines"]] == [held]
    old = run_module("machine_info", {"namespace": namespace, "query": f"[?deleting && deletion_timestamp < '{long_ago}']"})
    assert old["machines"] == [], "a deletion that started now is not an old one"

    waited = run_module("machine_info", {"namespace": namespace, "query": "[?deleting]", "wait": True, "wait_for": "deleting", "wait_timeout": 10})
    assert [m["name"] for m in waited["machines"]] == [held], "only the Machines the query chose are waited for"

    projection = run_module("machine_info", {"namespace": namespace, "query": "[].name"})
    assert projection["failed"] and "must select Machines" in projection["msg"]


def test_machine_info_drained_gate_follows_conditions(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    path = f"{machine_collection(flavour, namespace)}/{machine}"
    assert run_module("machine_info", {"machine": machine, "namespace": namespace})["machines"][0]["gates"]["drained"] is False
    kube.patch(path, {"status": drained_status(flavour)}, subresource_status=True)
    assert run_module("machine_info", {"machine": machine, "namespace": namespace})["machines"][0]["gates"]["drained"] is True


def test_machine_info_wait_returns_when_last_hook_goes(flavour, namespace, make_machine, run_module, kube) -> None:
    hooks = {"preDrain": [("first", "owner-a"), ("second", "owner-b")]}
    machine = make_machine(namespace, hooks=hooks)["metadata"]["name"]
    removed_at: list[float] = []

    def remove_hooks_later() -> None:

        base = {"machine": machine, "namespace": namespace, "point": "preDrain", "owner": None, "state": "absent", "label_selectors": None, "api_version": None}
        time.sleep(4)
        manage_hook(kube, HookRequest.from_params({**base, "name": "first"}, False))
        time.sleep(2)
        manage_hook(kube, HookRequest.from_params({**base, "name": "second"}, False))
        removed_at.append(time.monotonic())

    remover = threading.Thread(target=remove_hooks_later)
    remover.start()
    result = run_module("machine_info", {"machine": machine, "namespace": namespace, "wait": True, "wait_for": "drainable", "wait_timeout": 60})
    returned_at = time.monotonic()
    remover.join()
    assert not result.get("failed"), result
    assert result["machines"][0]["gates"]["drainable"] is True
    assert result["machines"][0]["hooks"]["preDrain"] == []
    # The ansible process itself takes a moment to exit; the wait must not poll slowly.
    assert returned_at - removed_at[0] < 3, f"returned {returned_at - removed_at[0]:.1f}s after the last hook went"


def test_machine_info_wait_times_out_naming_the_machine(flavour, namespace, make_machine, run_module) -> None:
    machine = make_machine(namespace, hooks={"preTerminate": [("backup", "velero")]})["metadata"]["name"]
    result = run_module("machine_info", {"machine": machine, "namespace": namespace, "wait": True, "wait_for": "terminable", "wait_timeout": 3})
    assert result.get("failed")
    assert f"waiting for Machine {namespace}/{machine} to be terminable" in result["msg"]
    assert result["machines"][0]["gates"]["terminable"] is False


def test_machine_info_wait_for_deleted(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    path = f"{machine_collection(flavour, namespace)}/{machine}"
    kube.delete(path)

    def release() -> None:
        # Late enough that the module (a whole ansible process) is waiting even on a busy machine.
        time.sleep(12)
        kube.patch(path, {"metadata": {"finalizers": None}})

    threading.Thread(target=release).start()
    result = run_module("machine_info", {"machine": machine, "namespace": namespace, "wait": True, "wait_for": "deleted", "wait_timeout": 60})
    assert not result.get("failed"), result
    assert result["machines"][0]["exists"] is False
    assert result["waited"] > 0

    again = run_module("machine_info", {"machine": machine, "namespace": namespace, "wait": True, "wait_for": "deleted", "wait_timeout": 30})
    assert again["machines"][0]["exists"] is False
    assert again["waited"] == 0


def test_machine_info_missing_machine_is_not_an_error(flavour, namespace, run_module) -> None:
    result = run_module("machine_info", {"machine": "never-existed", "namespace": namespace})
    assert result["machines"] == []
    waited = run_module("machine_info", {"machine": "never-existed", "namespace": namespace, "wait": True, "wait_for": "drained"})
    assert waited["machines"][0]["exists"] is False
