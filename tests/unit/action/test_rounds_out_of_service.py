"""machine_delete's rounds and ``out_of_service``: each round sends the entries of the Machines still in
progress only, so that a later round does not refuse an entry whose Machine finished (it names the task's
Machines only); the first round sends them all, so a typo is still refused there."""

from __future__ import annotations

from test_rounds import delete_round, machine

from ansible_collections.lifecycle.machine.plugins.plugin_utils._rounds import DeleteRounds

ENTRIES = [{"machine": "ns/a", "reason": "INC-1"}, {"machine": "ns/b", "reason": "INC-2"}]


def test_each_round_sends_the_entries_of_the_machines_still_in_progress() -> None:
    given = [{"name": "a", "namespace": "ns"}, {"name": "b", "namespace": "ns"}]
    rounds = DeleteRounds({"machines": given, "out_of_service": ENTRIES, "progress_interval": 20}, check_mode=False)
    assert rounds.next_args(0)["out_of_service"] == ENTRIES
    rounds.add(delete_round(machine("a", "done"), machine("b", "in_progress")))
    assert rounds.next_args(0)["out_of_service"] == [ENTRIES[1]]
    rounds.add(delete_round(machine("b", "in_progress")))
    assert rounds.next_args(0)["out_of_service"] == [ENTRIES[1]]


def test_a_task_without_entries_sends_none() -> None:
    rounds = DeleteRounds({"machines": [{"name": "a", "namespace": "ns"}], "progress_interval": 20}, check_mode=False)
    rounds.add(delete_round(machine("a", "in_progress")))
    assert rounds.next_args(0)["out_of_service"] == []


def test_the_result_keeps_the_taint_an_earlier_round_put_on() -> None:
    rounds = DeleteRounds({"machines": [{"name": "a", "namespace": "ns"}], "out_of_service": ENTRIES[:1], "progress_interval": 20}, check_mode=False)
    tainted = {"node": "n-a", "state": "tainted", "applied": True, "reason": "INC-1"}
    rounds.add(delete_round({**machine("a", "in_progress", changed=True), "out_of_service": tainted}))
    rounds.add(delete_round({**machine("a", "in_progress"), "out_of_service": {**tainted, "state": "already tainted", "applied": False}}))
    rounds.add(delete_round({**machine("a", "done"), "step": "release"}))
    [entry] = rounds.result()["machines"]
    assert (entry["status"], entry["changed"], entry["out_of_service"]) == ("done", True, tainted)


def test_the_result_keeps_what_earlier_rounds_evicted_and_escalated() -> None:
    rounds = DeleteRounds({"machines": [{"name": "a", "namespace": "ns"}], "progress_interval": 20}, check_mode=False)
    escalation = {"pod": "ns/db-0", "action": "delete_pod", "reason": "CHG-1"}
    rounds.add(delete_round({**machine("a", "in_progress", changed=True), "drain": {"evicted": ["ns/web-0"], "completed": False}}))
    rounds.add(delete_round({**machine("a", "in_progress"), "drain": {"evicted": ["ns/web-1"], "escalations": [escalation], "completed": True}}))
    rounds.add(delete_round({**machine("a", "done"), "step": "release"}))
    [entry] = rounds.result()["machines"]
    assert entry["drain"] == {"evicted": ["ns/web-0", "ns/web-1"], "escalations": [escalation], "completed": True}
