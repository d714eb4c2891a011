"""A whole ``machine_drain`` task (``run_drain``) against the fake transport:
a drain of a Machine being deleted in two order batches with a
PodDisruptionBudget refusal, check mode, ``wait: false``, skips, the held gate,
and failures (an API error in a pass or at the gate, a cancel) that carry the
partial result."""

from __future__ import annotations

import pytest
from drain_run_helpers import (
    LATE_DB,
    NODE,
    NODE_PATH,
    NS,
    OPENSHIFT_V,
    PDB,
    PDB_CAUSE,
    PODS_WATCH,
    finish_terminating_pods,
    machine_path,
    openshift_machine,
    pdb_refusal,
    pod_path,
    pods_go_away_while_watched,
    shop,
)
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import normalize_escalations
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import DrainRun, run_drain
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stall_policy import StallPolicy
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.base import OPENSHIFT_DRAIN_START_ANNOTATION

MACHINE = machine_path()
EVENTS = f"/api/v1/namespaces/{NS}/events"
RESULT_KEYS = {
    "changed",
    "blockers",
    "escalations",
    "state",
    "node",
    "completed",
    "message",
    "pods",
    "batches",
    "evicted",
    "passes",
    "started_at",
    "elapsed_seconds",
    "api_requests",
    "unschedulable",
    "machine",
    "diff",
}


def machine_request(**options) -> DrainRequest:
    return DrainRequest(**{"machine": "m1", "namespace": NS, "api_version": OPENSHIFT_V, "rules": [LATE_DB], **options})


def node_request(**options) -> DrainRequest:
    return DrainRequest(**{"node": NODE, "rules": [LATE_DB], **options})


def condition(fake: FakeKube, condition_type: str) -> dict | None:
    return next((c for c in fake.objects[MACHINE]["status"].get("conditions") or [] if c["type"] == condition_type), None)


def events(fake: FakeKube) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for path, e in sorted(fake.objects.items()) if path.startswith(EVENTS + "/")]


def eviction_posts(fake: FakeKube) -> list[str]:
    return [path.split("/")[-2] for method, path in fake.requests if method == "POST" and path.endswith("/eviction")]


# -- the drain ---------------------------------------------------------------------


def test_full_drain_of_a_machine_being_deleted() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake)
    fake.fail("POST", pod_path("web-1") + "/eviction", pdb_refusal())
    pods_go_away_while_watched(fake)
    messages: list[str] = []

    def remember_progress(method: str, path: str) -> None:
        if method == "PATCH" and path == MACHINE + "/status":
            drained = condition(fake, "Drained")
            messages.append(drained["message"] if drained else "")

    watch_hook = fake.on_request

    def on_request(method: str, path: str) -> None:
        watch_hook(method, path)
        remember_progress(method, path)

    fake.on_request = on_request
    result = run_drain(fake, machine_request())

    assert (result["completed"], result["changed"], result["message"]) == (True, True, f"Node {NODE} drained")
    # Pass 1: web-0 evicted, web-1 refused; 2: web-1 evicted; 3: db-0 (order 10); 4: nothing left.
    # A pass sends its evictions side by side, so within pass 1 either may be asked first.
    posts = eviction_posts(fake)
    assert (sorted(posts[:2]), posts[2:]) == (["web-0", "web-1"], ["web-1", "db-0"])
    assert result["evicted"] == ["shop/web-0", "shop/web-1", "shop/db-0"]
    assert result["passes"] == 4
    assert [(batch["order"], batch["pods"]) for batch in result["batches"]] == [(0, ["shop/web-0", "shop/web-1"]), (10, ["shop/db-0"])]
    assert [(pod["name"], pod["present"], pod["eviction_error"]) for pod in result["pods"]] == [
        ("db-0", False, None),
        ("web-0", False, None),
        ("web-1", False, None),
    ]
    assert set(result) == RESULT_KEYS
    assert result["machine"] == {"name": "m1", "namespace": NS, "api_version": OPENSHIFT_V, "flavour": "openshift", "deleting": True}
    assert result["unschedulable"] is True and fake.objects[NODE_PATH]["spec"]["unschedulable"] is True
    assert result["diff"]["before"]["pods"] == ["shop/db-0", "shop/web-0", "shop/web-1"] and result["diff"]["after"]["pods"] == []
    # The Machine: the start time once, the progress after every pass, then Drained and one Event.
    start = fake.objects[MACHINE]["metadata"]["annotations"][OPENSHIFT_DRAIN_START_ANNOTATION]
    assert result["started_at"] == start
    assert any(f"{PDB[0].lower()}{PDB[1:]} {PDB_CAUSE}" in message for message in messages), messages
    assert condition(fake, "Drained")["message"] == "Drain finished successfully"
    assert events(fake) == [("Normal", "SuccessfulDrainNode", f'success draining Machine\'s node "{NODE}"')]


def test_the_task_deadline_bounds_the_transport_only_while_waiting() -> None:
    fake = FakeKube()
    shop(fake, ("web-0", "web"))
    pods_go_away_while_watched(fake)
    started = fake.monotonic()
    run_drain(fake, node_request(wait_timeout=90))
    # The task's requests go through one fork of the transport, made with the task's deadline.
    assert len(fake.forks) == 1 and fake.forks[0].deadline == started + 90
    # A run reads its deadline from the fork it is given (machine_delete gives a phase's end).
    run = DrainRun(fake.forks[0], node_request(wait_timeout=5), started=started)
    assert run.deadline == started + 90 and run.wait_timeout == 90
    fake = FakeKube()
    shop(fake, ("web-0", "web"))
    run_drain(fake, node_request(wait=False))
    assert len(fake.forks) == 1 and fake.forks[0].deadline is None


def test_timeout_fails_with_the_progress_and_the_partial_result() -> None:
    fake = FakeKube()
    shop(fake, ("web-0", "web"))
    fake.fail("POST", pod_path("web-0") + "/eviction", *[pdb_refusal() for _attempt in range(20)])
    started = fake.monotonic()
    with pytest.raises(MachineError) as failure:
        run_drain(fake, node_request(wait_timeout=5, wait_sleep=2))
    assert failure.value.msg.startswith(f"Timed out after 5 s draining Node {NODE}. Drain not completed yet (started at ")
    assert f"* Pod shop/web-0: cannot evict pod as it would violate the pod's disruption budget. {PDB_CAUSE}" in failure.value.msg
    partial = failure.value.result
    assert partial["completed"] is False and partial["evicted"] == [] and partial["passes"] == 4
    assert partial["pods"][0]["eviction_error"] == f"{PDB} {PDB_CAUSE}"
    assert fake.monotonic() - started == 5, "passes at 0, 2, 4 and 5 s on the fake clock: the last pause ends at the deadline"


def test_wait_false_makes_one_pass() -> None:
    fake = FakeKube()
    shop(fake)
    result = run_drain(fake, node_request(wait=False))
    assert (result["completed"], result["changed"], result["passes"]) == (False, True, 1)
    assert result["evicted"] == ["shop/web-0", "shop/web-1"]
    assert result["message"].endswith("After above Pods have been removed from the Node, the following Pods will be evicted: shop/db-0")
    assert ("GET", PODS_WATCH[1]) not in fake.requests


def test_check_mode_writes_nothing() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake)
    before = len(fake.changes)
    result = run_drain(fake, machine_request(check_mode=True))
    assert len(fake.changes) == before, "nothing stored: every write was a dry run"
    assert events(fake) == [] and "unschedulable" not in fake.objects[NODE_PATH].get("spec", {})
    assert (result["completed"], result["changed"], result["evicted"], result["passes"]) == (False, True, [], 1)
    assert result["unschedulable"] is True and result["diff"]["after"]["pods"] == []
    assert result["message"].startswith("Drain not completed yet")


def test_check_mode_held_at_the_gate_shows_the_plan() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake, hooks=[("quorum-guard", "etcd")])
    before = len(fake.changes)
    result = run_drain(fake, machine_request(check_mode=True))
    assert len(fake.changes) == before
    assert result["completed"] is False and result["blocked_by"] == [{"name": "quorum-guard", "owner": "etcd"}]
    assert [(b["phase"], b["kind"], b["object"], b["verdict"]) for b in result["blockers"]] == [
        ("preDrain hook", "hook", "quorum-guard", "needs someone to act")
    ], "the gate is what holds it, not the Pods of the plan"
    assert result["message"] == f"Node {NODE} of Machine {NS}/m1 is held by preDrain hooks: quorum-guard (owner etcd)"
    assert [pod["name"] for pod in result["pods"]] == ["db-0", "web-0", "web-1"], "the plan once the gate opens"
    assert result["unschedulable"] is False, "nothing happens now"


# -- skips and the gate ------------------------------------------------------------


def test_exclude_annotation_skips_and_records_it() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake, annotations={"machine.openshift.io/exclude-node-draining": ""})
    result = run_drain(fake, machine_request())
    reason = f"Machine {NS}/m1 has the machine.openshift.io/exclude-node-draining annotation"
    assert (result["completed"], result["message"], result["skipped_reason"]) == (True, f"Drain skipped: {reason}", reason)
    assert condition(fake, "Drained")["message"] == "Node drain skipped"
    assert eviction_posts(fake) == [] and result["pods"] == []


def test_cordon_skip_names_the_action() -> None:
    fake = FakeKube()
    openshift_machine(fake, node=None)
    result = run_drain(fake, machine_request(state="cordoned"))
    assert result["message"] == f"Cordon skipped: Machine {NS}/m1 has no status.nodeRef"


@pytest.mark.parametrize(("state", "verb"), [("drained", "drain"), ("cordoned", "cordon"), ("uncordoned", "uncordon")])
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_node_named_that_does_not_exist_fails_naming_it(state: str, verb: str, check_mode: bool) -> None:
    fake = FakeKube()
    with pytest.raises(MachineError) as caught:
        run_drain(fake, DrainRequest(node="worker-typo", state=state, check_mode=check_mode))
    assert caught.value.msg == f"Cannot {verb} Node worker-typo: it does not exist"
    assert [method for method, _path in fake.requests if method != "GET"] == [], "nothing was written"


@pytest.mark.parametrize("state", ["drained", "cordoned"])
def test_the_node_of_a_machine_that_is_gone_has_nothing_to_drain(state: str) -> None:
    fake = FakeKube()
    openshift_machine(fake, node="gone")
    result = run_drain(fake, machine_request(state=state))
    assert (result["completed"], result["skipped_reason"]) == (True, "Node gone does not exist")


def test_held_without_waiting_returns_the_hooks() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake, hooks=[("quorum-guard", "etcd")])
    result = run_drain(fake, machine_request(wait=False))
    assert result["completed"] is False and result["changed"] is True, "the Drainable condition was written"
    assert condition(fake, "Drainable")["reason"] == "HookPresent"
    assert eviction_posts(fake) == [] and "unschedulable" not in fake.objects[NODE_PATH].get("spec", {})


def test_gate_opening_between_passes_is_waited_for() -> None:
    fake = FakeKube()
    shop(fake, ("web-0", "web"))
    openshift_machine(fake)

    def hook_appears_then_goes(method: str, path: str) -> None:
        if (method, path) == PODS_WATCH:
            # Someone adds a preDrain hook after the first pass; the drain waits at the gate until it goes.
            current = fake.objects[MACHINE]
            fake.put(MACHINE, {**current, "spec": {"lifecycleHooks": {"preDrain": [{"name": "late", "owner": "x"}]}}})
        elif method == "GET" and path.endswith("/machines?watch"):
            finish_terminating_pods(fake)
            fake.put(MACHINE, {**fake.objects[MACHINE], "spec": {}})

    fake.on_request = hook_appears_then_goes
    result = run_drain(fake, machine_request())
    assert result["completed"] is True and result["passes"] == 2


# -- failures carry the partial result ---------------------------------------------


def test_an_api_error_in_a_pass_fails_with_the_partial_result() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake)

    def node_read_fails_on_the_second_pass(method: str, path: str) -> None:
        if (method, path) == PODS_WATCH:
            finish_terminating_pods(fake)
            fake.fail("GET", NODE_PATH, FakeKube.error(503, "etcdserver: request timed out"))

    fake.on_request = node_read_fails_on_the_second_pass
    with pytest.raises(MachineError) as failure:
        run_drain(fake, machine_request())
    message = f"Failed to drain Node {NODE}: GET Node {NODE}: 503 etcdserver: request timed out"
    assert failure.value.msg == message
    partial = failure.value.result
    assert (partial["completed"], partial["message"], partial["passes"]) == (False, message, 1)
    assert partial["evicted"] == ["shop/web-0", "shop/web-1"] and len(partial["pods"]) == 3
    drained = condition(fake, "Drained")
    assert (drained["status"], drained["reason"], drained["message"]) == ("False", "DrainError", f"could not drain machine: {message}")
    assert events(fake) == [("Warning", "FailedDrainNode", f'error draining Machine\'s node "{NODE}": {message}')]
    assert "timed_out" not in partial


@pytest.mark.parametrize("where", ["pass", "gate"])
def test_an_api_error_that_outlasted_the_deadline_is_a_timeout(where: str) -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake)
    error = FakeKube.error(503, "etcdserver: request timed out")
    error.out_of_time = True  # the transport was still retrying when the task's deadline came

    def read_fails_on_the_second_pass(method: str, path: str) -> None:
        if (method, path) == PODS_WATCH:
            finish_terminating_pods(fake)
            fake.fail("GET", NODE_PATH if where == "pass" else MACHINE, error)

    fake.on_request = read_fails_on_the_second_pass
    with pytest.raises(MachineError) as failure:
        run_drain(fake, machine_request())
    assert failure.value.result["timed_out"] is True


def test_an_api_error_at_the_gate_fails_with_the_partial_result() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake)

    def machine_read_fails(method: str, path: str) -> None:
        if (method, path) == PODS_WATCH:
            fake.fail("GET", MACHINE, FakeKube.error(500, "boom"))

    fake.on_request = machine_read_fails
    with pytest.raises(MachineError) as failure:
        run_drain(fake, machine_request())
    assert failure.value.msg == f"Kubernetes API error: GET Machine {NS}/m1: 500 boom"
    partial = failure.value.result
    assert partial["status"] == 500 and partial["passes"] == 1 and partial["evicted"] == ["shop/web-0", "shop/web-1"]
    assert partial["machine"]["name"] == "m1"


def test_cancel_fails_with_the_partial_result() -> None:
    fake = FakeKube()
    shop(fake)

    def cancel_while_waiting(method: str, path: str) -> None:
        if (method, path) == PODS_WATCH:
            fake.cancel()

    fake.on_request = cancel_while_waiting
    with pytest.raises(MachineError) as failure:
        run_drain(fake, node_request())
    assert failure.value.msg.startswith("Cancelled: the run was cancelled")
    assert failure.value.result["evicted"] == ["shop/web-0", "shop/web-1"] and failure.value.result["completed"] is False


def test_an_invalid_cluster_rule_fails_the_pass_and_is_recorded() -> None:
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake)
    with pytest.raises(MachineError) as failure:
        run_drain(fake, machine_request(rules=[{"name": "bad", "drain": {"behavior": "Maybe"}}]))
    assert failure.value.msg.startswith("Invalid MachineDrainRule bad: ")
    assert failure.value.result == {}, "an invalid inline rule fails before anything is touched"
    assert fake.request_count == 0


# -- what the options need of the identity ------------------------------------------------


REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize(
    ("options", "option", "where"),
    [
        ({"disable_eviction": True}, "disable_eviction", "in every namespace"),
        ({"escalations": ({"after": "1h", "reason": "CHG-7", "namespaces": [NS]},)}, "escalations[0]", f"in namespace {NS}"),
    ],
)
def test_an_option_the_identity_may_not_carry_out_fails_before_anything_is_touched(options, option, where, check_mode) -> None:
    """disable_eviction and escalations delete Pods: a SelfSubjectAccessReview where the Node's Pods are asks first; refused,
    the task fails naming the option, the permission and where, having changed nothing (no cordon, no condition, no Event)."""
    fake = FakeKube()
    shop(fake)
    openshift_machine(fake)
    fake.denied.add(("delete", "", "pods", None if option == "disable_eviction" else NS))
    if "escalations" in options:
        options = {"stall": StallPolicy(escalations=normalize_escalations(options["escalations"]))}
    with pytest.raises(MachineError) as raised:
        run_drain(fake, machine_request(check_mode=check_mode, **options))
    assert raised.value.msg.startswith(f"{option} deletes Pods instead of evicting them, which needs delete pods (core API group) {where} in the cluster")
    assert [(m, p) for m, p in fake.requests if m != "GET" and p != REVIEWS] == []
    assert not fake.objects[NODE_PATH].get("spec", {}).get("unschedulable")


def test_a_node_given_by_name_is_asked_about_in_the_tasks_cluster() -> None:
    fake = FakeKube()
    shop(fake)
    run_drain(fake, node_request(disable_eviction=True, check_mode=True))
    assert [path for _method, path in fake.requests].count(REVIEWS) == 1
