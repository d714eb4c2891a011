"""machine_delete's orchestrator (``_delete/run.py``, ``MachineDeletion``) against the
in-memory stand-in, like the other runners: one round reads each Machine once and
hands the steps its scope; a step cut short by the end of the call's progress
interval goes on in the next call; one whose whole budget is spent fails; a live
controller is followed, writing nothing."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "terminate"))

from terminate_run_world import CAPI, NAME, NODE, NODE_PATH, NS, World

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import (
    DONE,
    DRAIN,
    FAILED,
    IN_PROGRESS,
    DeleteRequest,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.run import delete_machines
from ansible_collections.lifecycle.machine.plugins.module_utils._drain import rules as drain_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import normalize_escalations
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import normalize_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stall_policy import StallPolicy
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now, rfc3339

KEY = f"{NS}/{NAME}"
POD = f"/api/v1/namespaces/{NS}/pods/web-0"
PDB = "Cannot evict pod as it would violate the pod's disruption budget."


def world(*, deleting: bool = False, status_writer: str | None = None) -> World:
    """A Cluster API Machine with its Node, Cluster, control plane and referenced objects;
    not marked for deletion yet unless ``deleting``; ``status_writer``: a controller that wrote its status."""
    place = World(CAPI)
    place.fake.discovery.serve("v1", {"name": "namespaces", "kind": "Namespace", "namespaced": False})
    place.fake.put(f"/api/v1/namespaces/{NS}", {"kind": "Namespace", "metadata": {"name": NS}})
    machine = place.machine()
    machine["metadata"]["uid"] = "uid-machine"
    machine["status"].pop("deprecated", None)
    if not deleting:
        machine["metadata"].pop("deletionTimestamp")
    if status_writer:
        stamp = machine["metadata"].get("deletionTimestamp") or "2026-01-01T00:00:00Z"
        machine["metadata"]["managedFields"] = [{"manager": status_writer, "operation": "Update", "subresource": "status", "time": stamp}]
    place.fake.put(place.path, machine)
    return place


def pod(place: World) -> None:
    """A replicated Pod on the Machine's Node."""
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "controller": True}]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": NS, "labels": {"app": "web"}, "ownerReferences": owner},
        "spec": {"nodeName": NODE},
    }
    place.fake.put(POD, {**body, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})


def request(**options) -> DeleteRequest:
    return DeleteRequest(machines=({"name": NAME, "namespace": NS, "api_version": None},), **{"machine_controller": "absent", **options})


def machine_gets(place: World) -> int:
    return sum(1 for method, path in place.fake.requests if method == "GET" and path == place.path)


def test_one_round_reads_the_machine_once_and_deletes_it() -> None:
    place = world()
    result = delete_machines(place.fake, request())
    (outcome,) = result["machines"]
    assert (outcome["status"], outcome["message"], outcome["carried_out_by"]) == (DONE, "deleted", "collection"), outcome
    assert place.stored(place.path) is None and place.stored(NODE_PATH) is None
    # The round's one read: the deletion request's answer shows it marked, the release's answer shows
    # it gone (no finalizer left), and the drain and the termination take it from the round's scope.
    assert machine_gets(place) == 1, place.fake.requests
    assert result["completed"] and set(result["clock"][KEY]) == {DRAIN, "terminate", "done"}


def test_a_drain_cut_short_by_the_progress_interval_goes_on_in_the_next_call_then_fails_when_its_budget_is_spent() -> None:
    place = world(deleting=True)
    pod(place)
    place.fake.fail("POST", f"{POD}/eviction", *[place.fake.error(429, PDB) for _attempt in range(200)])
    first = delete_machines(place.fake, request(drain_timeout=60, progress_interval=10, wait_sleep=2))
    (outcome,) = first["machines"]
    assert (outcome["status"], outcome["step"]) == (IN_PROGRESS, DRAIN), outcome
    assert "Drain not completed yet" in outcome["message"], outcome["message"]
    # The drain's deadline was the end of the progress interval, given through its fork, on the transport's clock.
    drain_forks = [fork for fork in place.fake.forks if fork.deadline is not None]
    assert drain_forks and all(fork.deadline <= place.fake.monotonic() for fork in drain_forks)
    # Once the phase's budget is spent (its start is carried in the clock), the drain fails naming the whole budget.
    clock = {KEY: {phase: since - 120 for phase, since in first["clock"][KEY].items()}}
    last = delete_machines(place.fake, request(drain_timeout=60, progress_interval=10, wait_sleep=2, clock=clock))
    (outcome,) = last["machines"]
    assert outcome["status"] == FAILED and outcome["message"].startswith("Timed out after 60 s draining Node"), outcome


def test_a_live_controller_is_followed_and_nothing_is_written_but_the_mark() -> None:
    place = world(deleting=True, status_writer="capi-controller-manager")
    place.go_when_watched(place.path)
    result = delete_machines(place.fake, request(machine_controller="live"))
    (outcome,) = result["machines"]
    assert (outcome["status"], outcome["carried_out_by"]) == (DONE, "controller"), outcome
    assert outcome["message"] == "deleted by its controller", outcome["message"]
    assert outcome["drain"] == {"completed": True, "carried_out_by": "controller"}
    assert [method for method, _path in place.writes()] == [], place.writes()
    assert place.stored(NODE_PATH) is not None


def test_auto_acts_at_once_for_a_machine_no_controller_ever_served() -> None:
    place = world()
    result = delete_machines(place.fake, request(machine_controller="auto"))
    (outcome,) = result["machines"]
    assert (outcome["status"], outcome["carried_out_by"]) == (DONE, "collection"), outcome
    assert machine_gets(place) == 1, place.fake.requests  # the round's one read: no grace was waited for


def test_check_mode_plans_and_writes_nothing() -> None:
    place = world()
    result = delete_machines(place.fake, request(check_mode=True))
    (outcome,) = result["machines"]
    assert outcome["status"] == "planned", outcome
    assert place.stored(place.path)["metadata"].get("deletionTimestamp") is None


def test_inline_rules_are_validated_once_by_the_request_then_taken_as_they_are(monkeypatch) -> None:
    place = world()
    pod(place)
    rules = normalize_rules([{"name": "keep-web", "drain": {"behavior": "Skip"}, "pods": [{"selector": {"matchLabels": {"app": "web"}}}]}])
    validated = []
    real = drain_rules._rule_parts
    monkeypatch.setattr(drain_rules, "_rule_parts", lambda *args: validated.append(args) or real(*args))
    result = delete_machines(place.fake, request(rules=rules))
    assert result["machines"][0]["status"] == DONE, result["machines"][0]
    assert validated == [], "the drain and the volume wait validated the request's rules again"


def test_a_controller_that_answers_during_the_drain_takes_over_before_the_termination() -> None:
    """auto: a controller that served the Machine once and stayed silent past its grace leaves
    the drain to the collection; when it writes the status while the drain runs, the Machine as
    the drain last saw it says so, and the rest is followed, not raced (nothing terminated)."""
    place = world(deleting=True, status_writer="capi-controller-manager")
    stored = place.fake.objects[place.path]
    stored["metadata"]["managedFields"][0]["time"] = "2025-12-31T00:00:00Z"  # long before the deletion: it served the Machine once
    answered = []

    def controller_answers(method: str, path: str) -> None:
        if method == "PATCH" and path == f"{place.path}/status" and not answered:
            answered.append(path)
            entry = {"manager": "capi-controller-manager", "operation": "Update", "subresource": "status", "time": rfc3339(now())}
            place.fake.objects[place.path]["metadata"]["managedFields"] = [entry]

    place.fake.on_request = controller_answers
    result = delete_machines(place.fake, request(machine_controller="auto", controller_grace=0))
    (outcome,) = result["machines"]
    assert answered and outcome["carried_out_by"] == "controller", outcome
    assert outcome["controller"] == "capi-controller-manager"
    assert place.stored(NODE_PATH) is not None, "the collection deleted the Node its controller carries out"


def draining_controller(place: World) -> None:
    """The Machine's live controller drains it and reports web-0 refused by a budget that allows no eviction at all."""
    machine = place.stored(place.path)
    machine["status"].pop("deprecated", None)
    refused = f"* Pod {NS}/web-0: cannot evict pod as it would violate the pod's disruption budget."
    report = f"Drain not completed yet (started at 2026-01-01T00:00:00Z):\n{refused}"
    machine["status"]["conditions"] = [{"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": report}]
    place.fake.put(place.path, machine)
    pod(place)
    budget = {"metadata": {"name": "web", "namespace": NS}, "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}, "status": {}}
    place.fake.put(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web", budget)


def test_a_followed_budget_refusal_is_judged_by_its_budget_and_on_stall_fail_stops_following() -> None:
    place = world(deleting=True, status_writer="capi-controller-manager")
    draining_controller(place)
    waiting = delete_machines(place.fake, request(machine_controller="live", drain_timeout=600, progress_interval=10))
    (outcome,) = waiting["machines"]
    assert (outcome["status"], outcome["carried_out_by"]) == (IN_PROGRESS, "controller"), outcome
    refusal = next(b for b in outcome["blockers"] if b["kind"] == "budget refusal")
    assert refusal["verdict"] == "can never clear as things stand", refusal
    assert (refusal["evidence"]["budget"], refusal["evidence"]["max_unavailable"]) == (f"{NS}/web", 0)
    started = place.fake.monotonic()
    failed = delete_machines(place.fake, request(machine_controller="live", drain_timeout=600, stall=StallPolicy(on_stall="fail")))
    (outcome,) = failed["machines"]
    assert outcome["status"] == FAILED and outcome["message"].startswith("Stopped following the deletion"), outcome
    assert f"budget {NS}/web: its maxUnavailable is 0" in outcome["message"] and outcome["blockers"], outcome
    assert place.fake.monotonic() - started < 60, "on_stall: fail looks before the drain's budget is spent"
    assert [method for method, _path in place.writes()] == [], place.writes()
    assert place.stored(place.path) is not None and place.stored(POD) is not None


REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def changes(place: World) -> list[tuple[str, str]]:
    """The writes but the access reviews (which change nothing)."""
    return [(method, path) for method, path in place.writes() if path != REVIEWS]


def test_escalations_the_identity_may_not_carry_out_fail_the_machine_before_it_is_marked() -> None:
    """Escalations delete Pods: without delete on pods where the Node's Pods are, the Machine fails before anything is
    changed (it is not even marked), naming the option, the permission and where - in check mode too, where the preflight
    says it can never finish."""
    place = world()
    pod(place)
    place.fake.denied.add(("delete", "", "pods", None))
    escalations = normalize_escalations([{"after": "30m", "reason": "CHG-1"}])
    for check_mode in (True, False):
        result = delete_machines(place.fake, request(stall=StallPolicy(escalations=escalations), check_mode=check_mode))
        (outcome,) = result["machines"]
        assert outcome["status"] == FAILED, outcome
        message = outcome["message"]
        assert message.startswith("escalations[0] deletes Pods instead of evicting them, which needs delete pods (core API group) in every namespace")
        assert "lifecycle-machine-pod-delete" in message and message.endswith("Nothing was changed."), message
        assert changes(place) == [], changes(place)
        assert place.stored(place.path)["metadata"].get("deletionTimestamp") is None
    assert result["errors"] == [f"{KEY}: {message}"]
    preview = delete_machines(place.fake, request(stall=StallPolicy(escalations=escalations), check_mode=True))["preflight"]
    assert list(preview["can_never_finish"]) == [KEY] and "escalations[0]" in preview["can_never_finish"][KEY][0]


def test_a_machine_being_deleted_fails_before_its_drain_touches_anything() -> None:
    place = world(deleting=True)
    pod(place)
    place.fake.denied.add(("delete", "", "pods", NS))
    escalations = normalize_escalations([{"after": 0, "reason": "CHG-2", "namespaces": [NS]}])
    result = delete_machines(place.fake, request(stall=StallPolicy(escalations=escalations)))
    (outcome,) = result["machines"]
    assert outcome["status"] == FAILED and f"delete pods (core API group) in namespace {NS}" in outcome["message"], outcome
    assert changes(place) == [], changes(place)
    assert not place.stored(NODE_PATH).get("spec", {}).get("unschedulable"), "the Node was cordoned"


def test_escalations_the_identity_may_carry_out_are_asked_about_once() -> None:
    place = world()
    escalations = normalize_escalations([{"after": "30m", "reason": "CHG-1"}])
    result = delete_machines(place.fake, request(stall=StallPolicy(escalations=escalations)))
    assert result["machines"][0]["status"] == DONE, result["machines"][0]
    assert [path for _method, path in place.fake.requests].count(REVIEWS) == 1
    assert delete_machines(place.fake, request())["machines"][0]["status"] == DONE


def paused(place: World) -> None:
    cluster = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NS}/clusters/c-1"
    place.fake.put(cluster, {**place.stored(cluster), "spec": {"paused": True}})


def test_a_paused_machine_is_held_in_progress_and_nothing_is_written() -> None:
    """Hands off (docs/behaviour.md): not marked, not drained; the progress line says why; check mode and on_stall: fail too."""
    place = world()
    paused(place)
    result = delete_machines(place.fake, request())
    (outcome,) = result["machines"]
    assert (outcome["status"], outcome["step"]) == (IN_PROGRESS, "paused"), outcome
    assert [b["kind"] for b in outcome["blockers"]] == ["paused"] and place.writes() == [], place.writes()
    assert any(line.strip().startswith("! needs someone to act: paused Cluster") for line in result["progress"]), result["progress"]
    assert DRAIN in result["clock"][KEY]  # its drain budget counts while it is held
    plan = delete_machines(place.fake, request(check_mode=True))
    assert plan["machines"][0]["status"] == "planned" and KEY in plan["preflight"]["would_wait"], plan["preflight"]
    failed = delete_machines(place.fake, request(stall=StallPolicy(on_stall="fail")))
    assert failed["machines"][0]["status"] == FAILED and "on_stall is fail" in failed["machines"][0]["message"]
    assert place.writes() == []


def test_the_override_records_who_asked_once_and_the_collection_carries_the_deletion_out() -> None:
    place = world(status_writer="capi-controller-manager")
    paused(place)
    result = delete_machines(place.fake, request(machine_controller="auto", override_pause="CHG-7: teardown"))
    (outcome,) = result["machines"]
    assert (outcome["status"], outcome["carried_out_by"]) == (DONE, "collection"), outcome
    recorded = [obj for path, obj in place.fake.objects.items() if "/events/" in path and obj.get("reason") == "PauseOverridden"]
    assert [event["type"] for event in recorded] == ["Warning"] and recorded[0]["message"].endswith("with override_pause: CHG-7: teardown")
