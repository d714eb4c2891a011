"""Unit tests for the flavour adapter (docs/behaviour.md §1): where each Machine flavour keeps
hooks, timeouts, references, start times and conditions, from plain dicts."""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import STAGE_PRE_DRAIN, STAGE_PRE_TERMINATE, Stage, capi_deleting_summary
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import (
    CAPI_DEFAULT_NODE_DELETION_TIMEOUT,
    CLUSTERAPI,
    OPENSHIFT,
    PAST_DRAIN_REASONS,
    ClusterAPIFlavour,
    Hook,
    ObjectRef,
    OpenShiftFlavour,
    flavour_for,
    hooks_summary,
    hooks_text,
    is_deleting,
    machine_label,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import timeout_passed

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
STAMP = "2026-01-02T03:04:05Z"
EARLIER = "2026-01-01T00:00:00Z"
OPENSHIFT_V = "machine.openshift.io/v1beta1"
CAPI_V1 = "cluster.x-k8s.io/v1beta1"
CAPI_V2 = "cluster.x-k8s.io/v1beta2"
DRAIN_PREFIX = "pre-drain.delete.hook.machine.cluster.x-k8s.io"
TERMINATE_PREFIX = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"


def machine(api_version: str, *, annotations=None, labels=None, spec=None, status=None, deleting=False, **meta) -> dict:
    metadata = {"name": "m-1", "namespace": "ns", "resourceVersion": "42", "generation": 3, **meta}
    if annotations is not None:
        metadata["annotations"] = annotations
    if labels is not None:
        metadata["labels"] = labels
    if deleting:
        metadata["deletionTimestamp"] = EARLIER
    result = {"apiVersion": api_version, "kind": "Machine", "metadata": metadata}
    if spec is not None:
        result["spec"] = spec
    if status is not None:
        result["status"] = status
    return result


def openshift(hooks: dict | None = None, **kwargs) -> dict:
    spec = dict(kwargs.pop("spec", None) or {})
    if hooks is not None:
        spec["lifecycleHooks"] = {point: [{"name": n, "owner": o} for n, o in entries] for point, entries in hooks.items()}
    return machine(OPENSHIFT_V, spec=spec, **kwargs)


def names(hooks: list[Hook]) -> list[tuple[str, str]]:
    return [(hook.name, hook.owner) for hook in hooks]


# -- flavour detection ---------------------------------------------------------


@pytest.mark.parametrize(
    ("api_version", "cls", "name", "version"),
    [
        (OPENSHIFT_V, OpenShiftFlavour, OPENSHIFT, "v1beta1"),
        (CAPI_V1, ClusterAPIFlavour, CLUSTERAPI, "v1beta1"),
        (CAPI_V2, ClusterAPIFlavour, CLUSTERAPI, "v1beta2"),
    ],
)
def test_flavour_comes_from_the_api_version(api_version, cls, name, version) -> None:
    for given in (machine(api_version), api_version):
        flavour = flavour_for(given)
        assert isinstance(flavour, cls)
        assert flavour.name == name
        assert flavour.version == version


def test_capi_generation_follows_the_version() -> None:
    assert flavour_for(CAPI_V1).v1beta2 is False
    assert flavour_for(CAPI_V2).v1beta2 is True


@pytest.mark.parametrize("api_version", ["apps/v1", "cluster.x-k8s.io.evil/v1beta1", "", "v1"])
def test_unknown_api_version_is_refused(api_version) -> None:
    with pytest.raises(MachineError, match="Unsupported Machine apiVersion"):
        flavour_for(api_version)


def test_finalizers_and_exclude_annotations_per_flavour() -> None:
    assert flavour_for(OPENSHIFT_V).finalizer == "machine.machine.openshift.io"
    assert flavour_for(CAPI_V2).finalizer == "machine.cluster.x-k8s.io"
    assert flavour_for(OPENSHIFT_V).exclude_drain_annotation == "machine.openshift.io/exclude-node-draining"
    assert flavour_for(CAPI_V1).exclude_drain_annotation == "machine.cluster.x-k8s.io/exclude-node-draining"


def test_machine_label_and_deleting() -> None:
    assert machine_label(machine(CAPI_V2)) == "ns/m-1"
    assert is_deleting(machine(CAPI_V2)) is False
    assert is_deleting(machine(CAPI_V2, deleting=True)) is True


# -- hooks: OpenShift lists ----------------------------------------------------


def test_the_cluster_a_machine_belongs_to_for_its_metrics() -> None:
    """Cluster API: spec.clusterName (the cluster-name label when unset); OpenShift: the cluster-api-cluster label."""
    assert flavour_for(machine(CAPI_V2, spec={"clusterName": "prod"})).owning_cluster(machine(CAPI_V2, spec={"clusterName": "prod"})) == "prod"
    labelled = machine(CAPI_V1, labels={"cluster.x-k8s.io/cluster-name": "dev"})
    assert flavour_for(labelled).owning_cluster(labelled) == "dev"
    ocp = openshift(labels={"machine.openshift.io/cluster-api-cluster": "ocp-7x2k"})
    assert flavour_for(ocp).owning_cluster(ocp) == "ocp-7x2k"
    assert flavour_for(openshift()).owning_cluster(openshift()) is None
    assert flavour_for(ocp).cluster_name(ocp) is None, "an OpenShift Machine's Node is beside it: no workload cluster"


def test_openshift_hooks_are_read_from_the_lists_of_every_point() -> None:
    m = openshift(
        {
            "preDrain": [("EtcdQuorum", "clusteroperator/etcd")],
            "preTerminate": [("a-hook", "x-owner"), ("b-hook", "y-owner")],
            "preCreate": [("ipam", "ipam-ctl")],
        }
    )
    hooks = flavour_for(m).hooks(m)
    assert list(hooks) == ["preDrain", "preTerminate", "preCreate"]
    assert names(hooks["preDrain"]) == [("EtcdQuorum", "clusteroperator/etcd")]
    assert names(hooks["preTerminate"]) == [("a-hook", "x-owner"), ("b-hook", "y-owner")]
    assert names(hooks["preCreate"]) == [("ipam", "ipam-ctl")]
    assert all(hook.key is None for point in hooks.values() for hook in point)
    assert hooks["preDrain"][0].point == "preDrain"


@pytest.mark.parametrize("spec", [None, {}, {"lifecycleHooks": None}, {"lifecycleHooks": {"preDrain": None}}])
def test_openshift_without_hooks(spec) -> None:
    m = machine(OPENSHIFT_V, spec=spec)
    assert flavour_for(m).hooks(m) == {"preDrain": [], "preTerminate": [], "preCreate": []}


def test_openshift_ignores_annotations_that_look_like_capi_hooks() -> None:
    m = openshift(annotations={f"{DRAIN_PREFIX}/x": "y"})
    assert flavour_for(m).hooks(m)["preDrain"] == []


def test_openshift_find_hook_by_name() -> None:
    m = openshift({"preDrain": [("first", "owner-1"), ("second", "owner-2")]})
    flavour = flavour_for(m)
    assert flavour.find_hook(m, "preDrain", "second") == Hook("preDrain", "second", "owner-2")
    assert flavour.find_hook(m, "preTerminate", "second") is None
    assert flavour.find_hook(m, "preDrain", "third") is None


# -- hooks: Cluster API annotations ---------------------------------------------


@pytest.mark.parametrize("api_version", [CAPI_V1, CAPI_V2])
def test_capi_hooks_are_annotations_with_the_prefix(api_version) -> None:
    annotations = {
        f"{DRAIN_PREFIX}/etcd-quorum": "etcd-guard",
        f"{TERMINATE_PREFIX}/flush-logs": "log-shipper",
        f"{TERMINATE_PREFIX}/backup": "velero",
        "unrelated.example.com/pre-drain": "no",
        "machine.cluster.x-k8s.io/exclude-node-draining": "",
    }
    m = machine(api_version, annotations=annotations)
    hooks = flavour_for(m).hooks(m)
    assert list(hooks) == ["preDrain", "preTerminate"]
    assert names(hooks["preDrain"]) == [("etcd-quorum", "etcd-guard")]
    # Sorted by annotation key, as the Cluster API message lists them.
    assert names(hooks["preTerminate"]) == [("backup", "velero"), ("flush-logs", "log-shipper")]
    assert hooks["preDrain"][0].key == f"{DRAIN_PREFIX}/etcd-quorum"


def test_capi_any_key_starting_with_the_prefix_blocks() -> None:
    """Upstream checks only the prefix: the bare prefix and forms without the
    '/' separator are hooks too; their name is the whole key."""
    annotations = {DRAIN_PREFIX: "bare", f"{DRAIN_PREFIX}-custom": "dash", f"{TERMINATE_PREFIX}.dotted": "dot"}
    m = machine(CAPI_V2, annotations=annotations)
    hooks = flavour_for(m).hooks(m)
    assert names(hooks["preDrain"]) == [(DRAIN_PREFIX, "bare"), (f"{DRAIN_PREFIX}-custom", "dash")]
    assert names(hooks["preTerminate"]) == [(f"{TERMINATE_PREFIX}.dotted", "dot")]
    assert flavour_for(m).gates(m)["drainable"] is False


@pytest.mark.parametrize("value", ["", "true", "false", "0", "{not: json}"])
def test_capi_hook_value_is_never_interpreted(value) -> None:
    m = machine(CAPI_V1, annotations={f"{DRAIN_PREFIX}/hook": value})
    flavour = flavour_for(m)
    assert names(flavour.hooks(m)["preDrain"]) == [("hook", value)]
    assert flavour.gates(m)["drainable"] is False


def test_capi_key_with_prefix_in_the_middle_is_not_a_hook() -> None:
    m = machine(CAPI_V2, annotations={f"example.com/{DRAIN_PREFIX}": "x", f"x.{TERMINATE_PREFIX}/y": "z"})
    assert flavour_for(m).hooks(m) == {"preDrain": [], "preTerminate": []}


def test_capi_without_annotations() -> None:
    for given in (None, {}):
        m = machine(CAPI_V2, annotations=given)
        assert flavour_for(m).hooks(m) == {"preDrain": [], "preTerminate": []}


def test_capi_find_hook_matches_only_the_recommended_key() -> None:
    m = machine(CAPI_V2, annotations={f"{DRAIN_PREFIX}/guard": "a", f"{DRAIN_PREFIX}-guard": "b"})
    flavour = flavour_for(m)
    assert flavour.find_hook(m, "preDrain", "guard") == Hook("preDrain", "guard", "a", f"{DRAIN_PREFIX}/guard")
    assert flavour.find_hook(m, "preTerminate", "guard") is None
    assert flavour.find_hook(m, "preCreate", "guard") is None


def test_hook_as_dict_and_summary() -> None:
    m = machine(CAPI_V1, annotations={f"{DRAIN_PREFIX}/guard": "owner"})
    summary = hooks_summary(flavour_for(m).hooks(m))
    assert summary == {"preDrain": [{"name": "guard", "owner": "owner", "annotation": f"{DRAIN_PREFIX}/guard"}], "preTerminate": []}
    assert Hook("preDrain", "n", "o").as_dict() == {"name": "n", "owner": "o"}


# -- hook patches ------------------------------------------------------------------


def test_openshift_add_patch_keeps_other_hooks_and_carries_the_resource_version() -> None:
    m = openshift({"preDrain": [("other", "someone-else")], "preTerminate": [("keep", "me")]})
    before = copy.deepcopy(m)
    patch = flavour_for(m).hook_patch(m, "preDrain", "guard", "guard-ctl")
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "spec": {"lifecycleHooks": {"preDrain": [{"name": "other", "owner": "someone-else"}, {"name": "guard", "owner": "guard-ctl"}]}},
    }
    assert m == before, "building a patch must not change the Machine it was built from"


def test_openshift_reown_patch_replaces_in_place() -> None:
    m = openshift({"preDrain": [("a", "owner-a"), ("guard", "old-owner"), ("c", "owner-c")]})
    patch = flavour_for(m).hook_patch(m, "preDrain", "guard", "new-owner")
    assert [h["owner"] for h in patch["spec"]["lifecycleHooks"]["preDrain"]] == ["owner-a", "new-owner", "owner-c"]


def test_openshift_remove_patch_keeps_the_others() -> None:
    m = openshift({"preTerminate": [("a", "owner-a"), ("guard", "g"), ("c", "owner-c")]})
    patch = flavour_for(m).hook_patch(m, "preTerminate", "guard", None)
    assert patch["spec"]["lifecycleHooks"]["preTerminate"] == [{"name": "a", "owner": "owner-a"}, {"name": "c", "owner": "owner-c"}]
    assert patch["metadata"]["resourceVersion"] == "42"


def test_openshift_removing_the_last_hook_removes_the_list() -> None:
    m = openshift({"preDrain": [("guard", "g")]})
    patch = flavour_for(m).hook_patch(m, "preDrain", "guard", None)
    # null in a JSON merge patch deletes the field.
    assert patch["spec"]["lifecycleHooks"] == {"preDrain": None}


def test_openshift_first_hook_on_a_machine_without_lifecycle_hooks() -> None:
    m = machine(OPENSHIFT_V)
    patch = flavour_for(m).hook_patch(m, "preCreate", "ipam", "ipam-ctl")
    assert patch["spec"]["lifecycleHooks"] == {"preCreate": [{"name": "ipam", "owner": "ipam-ctl"}]}


@pytest.mark.parametrize("api_version", [CAPI_V1, CAPI_V2])
def test_capi_patches_touch_only_their_own_key(api_version) -> None:
    m = machine(api_version, annotations={f"{DRAIN_PREFIX}/other": "x"})
    flavour = flavour_for(m)
    assert flavour.hook_patch(m, "preDrain", "guard", "guard-ctl") == {"metadata": {"annotations": {f"{DRAIN_PREFIX}/guard": "guard-ctl"}}}
    assert flavour.hook_patch(m, "preTerminate", "flush-logs", None) == {"metadata": {"annotations": {f"{TERMINATE_PREFIX}/flush-logs": None}}}


# -- hook validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["abc", "MigrateImportantApp", "EtcdQuorumOperator", "etcd-quorum", "a_b.c-d", "example.com/Backup", "sub.example.com/x-y", "x" * 256, "a1b", "9to5"],
)
def test_openshift_valid_hook_names(name) -> None:
    assert flavour_for(OPENSHIFT_V).hook_errors("preDrain", name, "an-owner") == []


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("ab", "3 to 256 characters long (got 2)"),
        ("", "3 to 256 characters long (got 0)"),
        ("x" * 257, "3 to 256 characters long (got 257)"),
        ("has space", "must match"),
        ("-leading", "must match"),
        ("trailing.", "must match"),
        ("Upper.Example.com/x", "must match"),
        ("a/b/c", "must match"),
        ("ümlaut", "must match"),
    ],
)
def test_openshift_invalid_hook_names(name, rule) -> None:
    errors = flavour_for(OPENSHIFT_V).hook_errors("preDrain", name, "an-owner")
    assert any(rule in error for error in errors), errors


@pytest.mark.parametrize(("owner", "ok"), [("abc", True), ("x" * 512, True), ("ab", False), ("x" * 513, False), ("", False), ("clusteroperator/etcd", True)])
def test_openshift_owner_length(owner, ok) -> None:
    errors = flavour_for(OPENSHIFT_V).hook_errors("preTerminate", "a-hook", owner)
    assert (errors == []) is ok, errors
    if not ok:
        assert errors == [f"hook owner must be 3 to 512 characters long (got {len(owner)})"]


def test_openshift_owner_is_not_checked_on_removal() -> None:
    assert flavour_for(OPENSHIFT_V).hook_errors("preDrain", "a-hook", None) == []


def test_openshift_allows_pre_create_and_refuses_unknown_points() -> None:
    flavour = flavour_for(OPENSHIFT_V)
    assert flavour.hook_errors("preCreate", "ipam", "ipam-ctl") == []
    assert flavour.hook_errors("preDelete", "ipam", "ipam-ctl") == ["point must be one of preDrain, preTerminate, preCreate"]


@pytest.mark.parametrize("api_version", [CAPI_V1, CAPI_V2])
@pytest.mark.parametrize("name", ["a", "flush-logs", "etcd_quorum.v2", "X" * 63, "9"])
def test_capi_valid_hook_names(api_version, name) -> None:
    assert flavour_for(api_version).hook_errors("preTerminate", name, "owner") == []


@pytest.mark.parametrize("name", ["", "x" * 64, "has/slash", "-lead", "trail-", "has space", "a:b"])
def test_capi_hook_names_must_be_qualified_names(name) -> None:
    errors = flavour_for(CAPI_V2).hook_errors("preDrain", name, "owner")
    assert len(errors) == 1
    assert errors[0].startswith("hook name must be a valid annotation name after the hook prefix")


def test_capi_refuses_pre_create() -> None:
    errors = flavour_for(CAPI_V1).hook_errors("preCreate", "ipam", "ipam-ctl")
    assert errors == ["preCreate hooks exist only on OpenShift Machine API machines; Cluster API supports preDrain and preTerminate"]


def test_capi_owner_may_be_short_but_not_empty() -> None:
    flavour = flavour_for(CAPI_V2)
    assert flavour.hook_errors("preDrain", "hook", "x") == []
    assert flavour.hook_errors("preDrain", "hook", "") == ["hook owner must not be empty"]
    assert flavour.hook_errors("preDrain", "hook", None) == []


# -- gates ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hooks", "gates"),
    [
        ({}, {"drainable": True, "drained": False, "terminable": True, "creatable": True}),
        ({"preDrain": [("a-hook", "own")]}, {"drainable": False, "drained": False, "terminable": True, "creatable": True}),
        ({"preTerminate": [("a-hook", "own")]}, {"drainable": True, "drained": False, "terminable": False, "creatable": True}),
        ({"preCreate": [("a-hook", "own")]}, {"drainable": True, "drained": False, "terminable": True, "creatable": False}),
        (
            {"preDrain": [("a-hook", "own")], "preTerminate": [("b-hook", "own")]},
            {"drainable": False, "drained": False, "terminable": False, "creatable": True},
        ),
    ],
)
def test_openshift_gates_follow_the_hooks(hooks, gates) -> None:
    m = openshift(hooks)
    assert flavour_for(m).gates(m) == gates


def test_capi_gates_follow_the_hooks_and_are_always_creatable() -> None:
    m = machine(CAPI_V2, annotations={f"{TERMINATE_PREFIX}/x": "y"})
    assert flavour_for(m).gates(m) == {"drainable": True, "drained": False, "terminable": False, "creatable": True}


@pytest.mark.parametrize(
    ("conditions", "drained"),
    [
        ([], False),
        ([{"type": "Drained", "status": "True", "message": "Drain finished successfully"}], True),
        ([{"type": "Drained", "status": "True", "message": "Node drain skipped"}], True),
        ([{"type": "Drained", "status": "False", "reason": "DrainError"}], False),
        ([{"type": "Drained", "status": "Unknown"}], False),
        ([{"type": "DrainingSucceeded", "status": "True"}], False),
    ],
)
def test_openshift_drained_is_the_drained_condition(conditions, drained) -> None:
    m = openshift(status={"conditions": conditions})
    assert flavour_for(m).drained(m) is drained
    assert flavour_for(m).gates(m)["drained"] is drained


def capi_with(api_version: str, *, v1beta1=None, v1beta2=None) -> dict:
    status: dict = {}
    if api_version == CAPI_V1:
        if v1beta1 is not None:
            status["conditions"] = v1beta1
        if v1beta2 is not None:
            status["v1beta2"] = {"conditions": v1beta2}
    else:
        if v1beta2 is not None:
            status["conditions"] = v1beta2
        if v1beta1 is not None:
            status["deprecated"] = {"v1beta1": {"conditions": v1beta1}}
    return machine(api_version, status=status)


@pytest.mark.parametrize("api_version", [CAPI_V1, CAPI_V2])
def test_capi_drained_by_draining_succeeded(api_version) -> None:
    done = capi_with(api_version, v1beta1=[{"type": "DrainingSucceeded", "status": "True"}])
    draining = capi_with(api_version, v1beta1=[{"type": "DrainingSucceeded", "status": "False", "reason": "Draining"}])
    assert flavour_for(done).drained(done) is True
    assert flavour_for(draining).drained(draining) is False


def deleting(reason: str, status: str = "True") -> list[dict]:
    return [{"type": "Deleting", "status": status, "reason": reason, "message": ""}]


@pytest.mark.parametrize("api_version", [CAPI_V1, CAPI_V2])
@pytest.mark.parametrize("reason", PAST_DRAIN_REASONS)
def test_capi_skipped_drain_shows_in_the_deleting_reason(api_version, reason) -> None:
    """A skipped drain never writes DrainingSucceeded; the Deleting condition
    having moved past the drain says the drain step is over."""
    m = capi_with(api_version, v1beta2=deleting(reason))
    assert flavour_for(m).drained(m) is True


def test_capi_past_drain_reasons_are_the_later_stages() -> None:
    assert PAST_DRAIN_REASONS == (
        "WaitingForVolumeDetach",
        "WaitingForPreTerminateHook",
        "WaitingForInfrastructureDeletion",
        "WaitingForBootstrapDeletion",
        "DeletingNode",
        "DeletionCompleted",
    )


@pytest.mark.parametrize("api_version", [CAPI_V1, CAPI_V2])
@pytest.mark.parametrize("reason", ["Deleting", "WaitingForPreDrainHook", "DrainingNode", "NotDeleting", "InternalError"])
def test_capi_not_drained_before_or_during_the_drain(api_version, reason) -> None:
    m = capi_with(api_version, v1beta2=deleting(reason))
    assert flavour_for(m).drained(m) is False


def test_capi_deleting_false_is_not_drained() -> None:
    m = capi_with(CAPI_V2, v1beta2=deleting("WaitingForPreTerminateHook", status="False"))
    assert flavour_for(m).drained(m) is False


def test_capi_conditions_are_read_where_each_version_keeps_them() -> None:
    v1 = [{"type": "Ready", "status": "True"}]
    v2 = [{"type": "Available", "status": "True", "reason": "Available", "message": ""}]
    for api_version in (CAPI_V1, CAPI_V2):
        m = capi_with(api_version, v1beta1=v1, v1beta2=v2)
        flavour = flavour_for(m)
        assert flavour.v1beta1_conditions(m) == v1
        assert flavour.v1beta2_conditions(m) == v2
        assert flavour.all_conditions(m) == v2 + v1
        assert flavour.condition(m, "Ready") == v1[0]
        assert flavour.condition(m, "Available") == v2[0]
        assert flavour.condition(m, "Missing") is None


# -- timeouts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("10m", 600),
        ("1h30m", 5400),
        ("90s", 90),
        ("1m30s", 90),
        ("2h", 7200),
        ("1.5h", 5400),
        ("0s", None),
        ("0", None),
        ("", None),
        (None, None),
        # As Cluster API: a duration of zero or less is no limit, any positive one a limit, however short.
        ("-5m", None),
        ("500ms", 0.5),
        ("1ns", 1e-6),
        ("0.0s", None),
        ("-0s", None),
        ("1s500ms", 1.5),
    ],
)
def test_capi_v1beta1_timeouts_are_durations(value, seconds) -> None:
    spec = {} if value is None else {"nodeDrainTimeout": value, "nodeVolumeDetachTimeout": value}
    m = machine(CAPI_V1, spec=spec)
    flavour = flavour_for(m)
    assert flavour.drain_timeout(m) == seconds
    assert flavour.volume_detach_timeout(m) == seconds


def test_capi_v1beta1_invalid_duration_names_the_machine_and_field() -> None:
    m = machine(CAPI_V1, spec={"nodeDrainTimeout": "ten minutes"})
    with pytest.raises(MachineError, match=r"Machine ns/m-1 has an invalid spec.nodeDrainTimeout"):
        flavour_for(m).drain_timeout(m)


@pytest.mark.parametrize("value", ["10", "1d", "2w", "10 m", " 10m", "1mm", "m"])
def test_capi_v1beta1_refuses_what_go_refuses(value) -> None:
    m = machine(CAPI_V1, spec={"nodeDrainTimeout": value})
    with pytest.raises(MachineError, match=r"Machine ns/m-1 has an invalid spec.nodeDrainTimeout"):
        flavour_for(m).drain_timeout(m)


def test_a_sub_second_drain_timeout_passes_after_that_fraction_of_a_second() -> None:
    """Before durationpy, 500ms became 0 seconds, read as no limit: the drain never gave up."""
    m = machine(CAPI_V1, spec={"nodeDrainTimeout": "500ms"})
    started = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    timeout = flavour_for(m).drain_timeout(m)
    assert timeout == 0.5
    assert not timeout_passed(started, timeout, started + dt.timedelta(milliseconds=400))
    assert timeout_passed(started, timeout, started + dt.timedelta(seconds=1))


@pytest.mark.parametrize(("value", "seconds"), [(600, 600), (1, 1), (0, None), (-5, None), (None, None)])
def test_capi_v1beta2_timeouts_are_seconds(value, seconds) -> None:
    deletion = {} if value is None else {"nodeDrainTimeoutSeconds": value, "nodeVolumeDetachTimeoutSeconds": value}
    m = machine(CAPI_V2, spec={"deletion": deletion})
    flavour = flavour_for(m)
    assert flavour.drain_timeout(m) == seconds
    assert flavour.volume_detach_timeout(m) == seconds


def test_capi_v1beta2_reads_seconds_not_v1beta1_durations() -> None:
    m = machine(CAPI_V2, spec={"nodeDrainTimeout": "10m"})
    assert flavour_for(m).drain_timeout(m) is None


@pytest.mark.parametrize(
    ("api_version", "spec", "seconds"),
    [
        (CAPI_V1, {}, CAPI_DEFAULT_NODE_DELETION_TIMEOUT),
        (CAPI_V1, {"nodeDeletionTimeout": "30s"}, 30),
        (CAPI_V1, {"nodeDeletionTimeout": "0s"}, None),
        (CAPI_V2, {}, CAPI_DEFAULT_NODE_DELETION_TIMEOUT),
        (CAPI_V2, {"deletion": {}}, CAPI_DEFAULT_NODE_DELETION_TIMEOUT),
        (CAPI_V2, {"deletion": {"nodeDeletionTimeoutSeconds": 30}}, 30),
        (CAPI_V2, {"deletion": {"nodeDeletionTimeoutSeconds": 0}}, None),
    ],
)
def test_node_deletion_timeout_defaults_to_ten_seconds(api_version, spec, seconds) -> None:
    assert CAPI_DEFAULT_NODE_DELETION_TIMEOUT == 10
    m = machine(api_version, spec=spec)
    assert flavour_for(m).node_deletion_timeout(m) == seconds


def test_openshift_has_no_timeouts() -> None:
    m = openshift(spec={"nodeDrainTimeout": "10m"})
    flavour = flavour_for(m)
    assert (flavour.drain_timeout(m), flavour.volume_detach_timeout(m), flavour.node_deletion_timeout(m)) == (None, None, None)


# -- references ----------------------------------------------------------------------------


def test_capi_v1beta1_refs_carry_the_api_version() -> None:
    spec = {
        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "AWSMachine", "name": "m-1-infra"},
        "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "m-1-boot", "namespace": "other"}},
    }
    m = machine(CAPI_V1, spec=spec)
    flavour = flavour_for(m)
    infra = flavour.infrastructure_ref(m)
    assert infra == ObjectRef(kind="AWSMachine", name="m-1-infra", namespace="ns", api_version="infrastructure.cluster.x-k8s.io/v1beta1")
    assert infra.group == "infrastructure.cluster.x-k8s.io"
    assert infra.as_dict() == {"kind": "AWSMachine", "name": "m-1-infra", "namespace": "ns", "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1"}
    boot = flavour.bootstrap_ref(m)
    assert boot.namespace == "other"
    assert boot.group == "bootstrap.cluster.x-k8s.io"


def test_capi_v1beta2_refs_carry_only_the_api_group() -> None:
    spec = {
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachine", "name": "m-1-infra"},
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "m-1-boot"}},
    }
    m = machine(CAPI_V2, spec=spec)
    flavour = flavour_for(m)
    infra = flavour.infrastructure_ref(m)
    assert infra == ObjectRef(kind="AWSMachine", name="m-1-infra", namespace="ns", api_group="infrastructure.cluster.x-k8s.io")
    assert infra.api_version is None
    assert infra.group == "infrastructure.cluster.x-k8s.io"
    assert infra.as_dict() == {"kind": "AWSMachine", "name": "m-1-infra", "namespace": "ns", "apiGroup": "infrastructure.cluster.x-k8s.io"}
    assert flavour.bootstrap_ref(m).as_dict()["apiGroup"] == "bootstrap.cluster.x-k8s.io"


@pytest.mark.parametrize("ref", [None, {}, {"kind": "AWSMachine"}, {"name": "x"}])
def test_capi_incomplete_refs_are_none(ref) -> None:
    spec = {"infrastructureRef": ref, "bootstrap": {"configRef": ref}} if ref is not None else {}
    for api_version in (CAPI_V1, CAPI_V2):
        m = machine(api_version, spec=spec)
        assert flavour_for(m).infrastructure_ref(m) is None
        assert flavour_for(m).bootstrap_ref(m) is None


def test_capi_control_plane_ref_of_a_cluster() -> None:
    cluster = {
        "apiVersion": CAPI_V2,
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "cp"}},
    }
    ref = flavour_for(cluster).control_plane_ref(cluster)
    assert (ref.kind, ref.name, ref.namespace, ref.group) == ("KubeadmControlPlane", "cp", "ns", "controlplane.cluster.x-k8s.io")


def test_openshift_has_no_object_refs_or_cluster() -> None:
    m = openshift(spec={"infrastructureRef": {"kind": "X", "name": "y"}})
    flavour = flavour_for(m)
    assert flavour.infrastructure_ref(m) is None
    assert flavour.bootstrap_ref(m) is None
    assert flavour.cluster_name(m) is None
    assert flavour.is_control_plane(m) is False


def test_node_name_and_cluster_membership() -> None:
    m = machine(CAPI_V1, labels={"cluster.x-k8s.io/cluster-name": "from-label", "cluster.x-k8s.io/control-plane": ""}, status={"nodeRef": {"name": "node-1"}})
    flavour = flavour_for(m)
    assert flavour.node_name(m) == "node-1"
    assert flavour.cluster_name(m) == "from-label"
    assert flavour.is_control_plane(m) is True
    m["spec"] = {"clusterName": "from-spec"}
    assert flavour.cluster_name(m) == "from-spec"
    assert flavour.node_name(machine(CAPI_V2)) is None
    assert flavour_for(OPENSHIFT_V).node_name(openshift(status={"nodeRef": {"kind": "Node", "name": "n"}})) == "n"


# -- exclusions and start times -------------------------------------------------------------


def test_exclude_annotations_per_flavour() -> None:
    os_m = openshift(annotations={"machine.openshift.io/exclude-node-draining": ""})
    assert flavour_for(os_m).drain_excluded(os_m) is True
    assert flavour_for(os_m).volume_wait_excluded(os_m) is False
    wrong = openshift(annotations={"machine.cluster.x-k8s.io/exclude-node-draining": ""})
    assert flavour_for(wrong).drain_excluded(wrong) is False
    capi = machine(CAPI_V2, annotations={"machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach": ""})
    assert flavour_for(capi).drain_excluded(capi) is False
    assert flavour_for(capi).volume_wait_excluded(capi) is True


def test_openshift_start_times_live_in_annotations() -> None:
    flavour = flavour_for(OPENSHIFT_V)
    later = NOW + dt.timedelta(minutes=1)
    patch, status = flavour.start_time_patches(drain=NOW, volumes=later)
    assert status is None
    annotations = patch["metadata"]["annotations"]
    assert annotations == {"lifecycle.machine.dev/node-drain-start-time": STAMP, "lifecycle.machine.dev/volume-detach-start-time": "2026-01-02T03:05:05Z"}
    m = openshift(annotations=annotations)
    assert flavour.drain_started_at(m) == NOW
    assert flavour.volume_detach_started_at(m) == later
    assert flavour.start_time_patches() == (None, None)


@pytest.mark.parametrize("api_version", [CAPI_V1, CAPI_V2])
def test_capi_start_times_live_in_status_deletion(api_version) -> None:
    flavour = flavour_for(api_version)
    patch, status = flavour.start_time_patches(drain=NOW)
    assert patch is None
    assert status == {"status": {"deletion": {"nodeDrainStartTime": STAMP}}}
    m = machine(api_version, status={"deletion": {"nodeDrainStartTime": STAMP, "waitForNodeVolumeDetachStartTime": "2026-01-02T03:04:05.250Z"}})
    assert flavour.drain_started_at(m) == NOW
    assert flavour.volume_detach_started_at(m) == NOW + dt.timedelta(milliseconds=250)
    assert flavour.drain_started_at(machine(api_version)) is None


# -- status patches ---------------------------------------------------------------------------


def test_openshift_status_patch_records_hook_conditions_and_phase() -> None:
    m = openshift({"preDrain": [("guard", "guard-ctl")]}, deleting=True, status={"phase": "Running"})
    patch = flavour_for(m).status_patch(m, Stage(STAGE_PRE_DRAIN, hooks=flavour_for(m).hooks(m)["preDrain"]), NOW)
    assert patch["status"]["phase"] == "Deleting"
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert by_type["Drainable"]["message"] == "Drain operation currently blocked by: [{Name:guard Owner:guard-ctl}]"
    assert by_type["Terminable"] == {"type": "Terminable", "status": "True", "lastTransitionTime": STAMP}


def test_openshift_status_patch_is_none_when_nothing_changes() -> None:
    conditions = [
        {"type": "Drainable", "status": "True", "lastTransitionTime": EARLIER},
        {"type": "Terminable", "status": "True", "lastTransitionTime": EARLIER},
    ]
    m = openshift(deleting=True, status={"phase": "Deleting", "conditions": conditions})
    assert flavour_for(m).status_patch(m, None, NOW) is None


def test_openshift_status_patch_leaves_the_phase_of_a_live_machine() -> None:
    m = openshift(status={"phase": "Running"})
    patch = flavour_for(m).status_patch(m, None, NOW)
    assert "phase" not in patch["status"]


def test_capi_v1beta2_status_patch_writes_deleting_and_deprecated_v1beta1() -> None:
    m = machine(CAPI_V2, annotations={f"{DRAIN_PREFIX}/guard": "g"}, deleting=True)
    flavour = flavour_for(m)
    patch = flavour.status_patch(m, Stage(STAGE_PRE_DRAIN, hooks=flavour.hooks(m)["preDrain"]), NOW)
    assert patch["status"]["phase"] == "Deleting"
    assert patch["status"]["conditions"] == [
        {
            "type": "Deleting",
            "status": "True",
            "reason": "WaitingForPreDrainHook",
            "message": f"Waiting for pre-drain hooks to succeed (hooks: {DRAIN_PREFIX}/guard)",
            "observedGeneration": 3,
            "lastTransitionTime": STAMP,
        },
        {
            # As the Machine controller's Ready summary words it (deleted long before NOW).
            "type": "Ready",
            "status": "False",
            "reason": "NotReady",
            "message": "* Deleting: Machine deletion in progress since more than 15m, stage: WaitingForPreDrainHook",
            "observedGeneration": 3,
            "lastTransitionTime": STAMP,
        },
    ]
    assert patch["status"]["deprecated"]["v1beta1"]["conditions"] == [
        {"type": "PreDrainDeleteHookSucceeded", "status": "False", "severity": "Info", "reason": "WaitingExternalHook", "lastTransitionTime": STAMP}
    ]


def test_the_ready_summary_of_a_long_drain_names_what_slows_it() -> None:
    deleting = {
        "type": "Deleting",
        "reason": "DrainingNode",
        "message": (
            "Drain not completed yet (started at x):\n"
            "* Pod a/b: cannot evict pod as it would violate the pod's disruption budget. The disruption budget b needs 1\n"
            "* Pod a/c: waiting for completion"
        ),
    }
    now = dt.datetime(2026, 1, 1, 1, 0, tzinfo=dt.UTC)
    early = capi_deleting_summary(deleting, deleted_at=now - dt.timedelta(minutes=10), drain_started=now - dt.timedelta(minutes=9), now=now)
    assert early == "Machine deletion in progress, stage: DrainingNode"
    late = capi_deleting_summary(deleting, deleted_at=now - dt.timedelta(minutes=20), drain_started=now - dt.timedelta(minutes=9), now=now)
    assert late == "Machine deletion in progress since more than 15m, stage: DrainingNode, delay likely due to PodDisruptionBudgets, Pods not completed yet"
    fresh_drain = capi_deleting_summary(deleting, deleted_at=now - dt.timedelta(minutes=20), drain_started=now - dt.timedelta(minutes=4), now=now)
    assert fresh_drain == "Machine deletion in progress since more than 15m, stage: DrainingNode"


def test_capi_v1beta1_status_patch_writes_conditions_and_v1beta2() -> None:
    m = machine(CAPI_V1, annotations={f"{TERMINATE_PREFIX}/flush": "g"}, deleting=True, status={"phase": "Deleting"})
    flavour = flavour_for(m)
    patch = flavour.status_patch(m, Stage(STAGE_PRE_TERMINATE, hooks=flavour.hooks(m)["preTerminate"]), NOW)
    assert "phase" not in patch["status"]
    assert [c["type"] for c in patch["status"]["conditions"]] == ["PreTerminateDeleteHookSucceeded"]
    assert patch["status"]["v1beta2"]["conditions"][0]["reason"] == "WaitingForPreTerminateHook"
    assert "deprecated" not in patch["status"]


# -- conditions written by others (machine_condition) ---------------------------------

FAILED = {"type": "PreTerminateFlushLogsSucceeded", "status": "False", "reason": "HookFailed", "message": "boom", "severity": "Warning"}


@pytest.mark.parametrize("api_version", [OPENSHIFT_V, CAPI_V1])
def test_v1beta1_style_condition_goes_into_status_conditions_sorted(api_version) -> None:
    current = [{"type": "Terminable", "status": "True", "lastTransitionTime": EARLIER}, {"type": "Ready", "status": "True", "lastTransitionTime": EARLIER}]
    m = machine(api_version, status={"conditions": current})
    flavour = flavour_for(m)
    assert flavour.metav1_conditions is False
    patch = flavour.set_condition_patch(m, FAILED, NOW)
    assert patch["metadata"] == {"resourceVersion": "42"}
    assert patch["status"]["conditions"] == [current[1], {**FAILED, "lastTransitionTime": STAMP}, current[0]]


def test_v1beta1_style_true_condition_carries_no_severity() -> None:
    m = machine(OPENSHIFT_V)
    patch = flavour_for(m).set_condition_patch(m, {"type": "X", "status": "True", "reason": "Done", "message": "", "severity": ""}, NOW)
    assert patch["status"]["conditions"] == [{"type": "X", "status": "True", "reason": "Done", "lastTransitionTime": STAMP}]


def test_metav1_condition_goes_into_v1beta2_status_conditions() -> None:
    m = machine(CAPI_V2, status={"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": EARLIER}]})
    flavour = flavour_for(m)
    assert flavour.metav1_conditions is True
    patch = flavour.set_condition_patch(m, FAILED, NOW)
    written = patch["status"]["conditions"][1]
    assert written == {
        "type": FAILED["type"],
        "status": "False",
        "reason": "HookFailed",
        "message": "boom",
        "observedGeneration": 3,
        "lastTransitionTime": STAMP,
    }
    assert flavour.custom_condition({**m, "status": patch["status"]}, FAILED["type"]) == written


def test_capi_v1beta1_machine_does_not_write_its_v1beta2_list() -> None:
    m = machine(CAPI_V1, status={"v1beta2": {"conditions": []}})
    patch = flavour_for(m).set_condition_patch(m, FAILED, NOW)
    assert list(patch["status"]) == ["conditions"]


@pytest.mark.parametrize("api_version", [OPENSHIFT_V, CAPI_V1, CAPI_V2])
def test_unchanged_condition_needs_no_patch_even_in_an_unsorted_list(api_version) -> None:
    m = machine(api_version)
    flavour = flavour_for(m)
    stored = flavour.set_condition_patch(m, FAILED, NOW)["status"]["conditions"]
    unsorted = [{"type": "Zeta", "status": "True", "reason": "Z", "message": "", "lastTransitionTime": EARLIER}, *stored]
    again = machine(api_version, status={"conditions": unsorted})
    assert flavour.set_condition_patch(again, FAILED, NOW + dt.timedelta(minutes=1)) is None


@pytest.mark.parametrize("api_version", [OPENSHIFT_V, CAPI_V1, CAPI_V2])
def test_status_true_after_false(api_version) -> None:
    m = machine(api_version)
    flavour = flavour_for(m)
    failed = machine(api_version, status=flavour.set_condition_patch(m, FAILED, NOW)["status"])
    later = NOW + dt.timedelta(minutes=1)
    success = {"type": FAILED["type"], "status": "True", "reason": "HookSucceeded", "message": ""}
    written = flavour.custom_condition(machine(api_version, status=flavour.set_condition_patch(failed, success, later)["status"]), FAILED["type"])
    assert written["status"] == "True"
    assert written["lastTransitionTime"] == "2026-01-02T03:05:05Z"
    assert "severity" not in written


@pytest.mark.parametrize("api_version", [OPENSHIFT_V, CAPI_V1, CAPI_V2])
def test_remove_condition_patch(api_version) -> None:
    keep = {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": EARLIER}
    gone = {**FAILED, "lastTransitionTime": EARLIER}
    m = machine(api_version, status={"conditions": [keep, gone]})
    flavour = flavour_for(m)
    assert flavour.remove_condition_patch(m, FAILED["type"]) == {"metadata": {"resourceVersion": "42"}, "status": {"conditions": [keep]}}
    assert flavour.remove_condition_patch(m, "NotThere") is None


@pytest.mark.parametrize(
    ("api_version", "condition_type", "reason", "message", "fragment"),
    [
        (OPENSHIFT_V, "has space", "R", "", "condition type must be at most 256 characters"),
        (OPENSHIFT_V, "", "R", "", "condition type must be"),
        (CAPI_V1, "X" * 257, "R", "", "condition type must be at most 256 characters"),
        (CAPI_V2, "X" * 317, "R", "", "condition type must be at most 316 characters"),
        (CAPI_V2, "Good", "", "", "a reason is required"),
        (OPENSHIFT_V, "Good", "has-dash", "", "condition reason must be"),
        (CAPI_V2, "Good", "Trailing:", "", "condition reason must be"),
        (CAPI_V1, "Good", "R", "m" * 10241, "condition message must be at most 10240 characters (got 10241)"),
        (CAPI_V2, "Good", "R", "m" * 32769, "condition message must be at most 32768 characters (got 32769)"),
    ],
)
def test_condition_errors(api_version, condition_type, reason, message, fragment) -> None:
    errors = flavour_for(api_version).condition_errors(condition_type, reason, message)
    assert any(fragment in error for error in errors), errors


@pytest.mark.parametrize("api_version", [OPENSHIFT_V, CAPI_V1, CAPI_V2])
def test_valid_conditions(api_version) -> None:
    flavour = flavour_for(api_version)
    assert flavour.condition_errors("PreTerminateFlushLogsSucceeded", "HookFailed", "m" * 10240) == []
    assert flavour.condition_errors("example.com/Custom_type.v2", "Reason_1:x,y", "") == []
    assert flavour.condition_errors("X" * 256) == []
    assert flavour_for(OPENSHIFT_V).condition_errors("Good", "", "") == []


def test_hooks_text() -> None:
    hooks = [Hook("preDrain", "quorum", "etcd"), Hook("preDrain", "backup", "velero")]
    assert hooks_text(hooks) == "quorum (owner etcd), backup (owner velero)"


def test_only_openshift_records_an_event_when_the_drain_is_skipped() -> None:
    """Row O1: OpenShift's drain controller records DrainSkipped with Drained True 'Node drain skipped'; Cluster API nothing."""
    assert flavour_for("machine.openshift.io/v1beta1").drain_skipped_event == ("Normal", "DrainSkipped", "Node drain skipped")
    assert flavour_for("cluster.x-k8s.io/v1beta2").drain_skipped_event is None
