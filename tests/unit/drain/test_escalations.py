"""The escalations option (``_drain/escalations.py``): what is understood, what is refused, which Pod it applies to and when."""

from __future__ import annotations

import pod_objects as objects
import pytest
from pod_objects import rule

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import (
    Escalation,
    escalation_for,
    event_message,
    normalize_escalations,
    permission_message,
    permissions_needed,
    rule_names_wanted,
    unknown_rule_names,
    unknown_rules_message,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import WAIT_COMPLETED
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError


def pod(name: str = "db-0", namespace: str = "shop", **labels: str) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}


def test_entries_are_understood_with_their_durations_and_defaults() -> None:
    found = normalize_escalations(
        [
            {"after": "30m", "reason": " CHG-1 ", "namespaces": ["shop"], "pod_selector": {"matchLabels": {"app": "db"}}},
            {"after": 0, "reason": "at once", "action": "delete_pod"},
            {"after": "90", "reason": "whole seconds as text"},
        ]
    )
    assert [(e.after, e.reason, e.action, e.namespaces) for e in found] == [
        (1800, "CHG-1", "delete_pod", ("shop",)),
        (0, "at once", "delete_pod", ()),
        (90, "whole seconds as text", "delete_pod", ()),
    ]
    assert normalize_escalations(None) == () and normalize_escalations([]) == ()


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"after": "soon", "reason": "x"}, "escalations[0].after must be a duration"),
        ({"after": -5, "reason": "x"}, "escalations[0].after must be a duration"),
        ({"after": True, "reason": "x"}, "escalations[0].after must be a duration"),
        ({"after": "1m"}, "escalations[0].reason must say who asked"),
        ({"after": "1m", "reason": "  "}, "escalations[0].reason must say who asked"),
        ({"after": "1m", "reason": "x", "action": "drop_budget"}, "escalations[0].action must be one of ['delete_pod']"),
        ({"after": "1m", "reason": "x", "namespaces": "shop"}, "escalations[0].namespaces must be a list"),
        ({"after": "1m", "reason": "x", "namespaces": ["Shop_1"]}, "can never name a Namespace"),
        ({"after": "1m", "reason": "x", "pod_selector": {"matchLabel": {}}}, "escalations[0].pod_selector: unknown label selector field"),
        ({"after": "1m", "reason": "x", "podSelector": {}}, "unknown keys ['podSelector']"),
        ("delete everything", "escalations[0] must be a mapping"),
    ],
)
def test_what_cannot_be_understood_is_refused_naming_the_entry(entry, said) -> None:
    with pytest.raises(MachineError) as raised:
        normalize_escalations([entry])
    assert said in raised.value.msg and raised.value.msg.endswith("nothing was changed")


def test_an_escalation_applies_after_its_deadline_to_the_chosen_pods_only() -> None:
    escalation = Escalation(after=60, reason="r", namespaces=("shop",), pod_selector={"matchLabels": {"app": "db"}})
    assert not escalation.applies(pod(app="db"), 59.9)
    assert escalation.applies(pod(app="db"), 60)
    assert not escalation.applies(pod(app="web"), 600)
    assert not escalation.applies(pod(namespace="other", app="db"), 600)
    anything = Escalation(after=0, reason="r")
    assert anything.applies(pod(), 0)


def test_the_first_matching_entry_applies_and_the_event_names_who_asked() -> None:
    late, early = Escalation(after=600, reason="late"), Escalation(after=60, reason="CHG-7 approved by the db team", namespaces=("shop",))
    assert escalation_for(pod(), [late, early], 120) is early
    assert escalation_for(pod(), [late, early], 30) is None
    assert (
        event_message("shop/db-0", early)
        == "Deleted Pod shop/db-0 instead of evicting it, 60 s after the drain started, as asked: CHG-7 approved by the db team"
    )


def test_drain_rules_name_the_rules_whose_pods_an_entry_takes() -> None:
    (entry,) = normalize_escalations([{"after": 0, "reason": "CHG-2", "drain_rules": [" db-last ", "db-last", "cache"]}])
    assert entry.drain_rules == ("db-last", "cache") and entry.as_dict()["drain_rules"] == ["db-last", "cache"]
    decided = {"db-0": "db-last", "web-0": None, "cache-0": "cache", "other-0": "other"}
    # Told no rule (none decided the Pod), it takes nothing; else only the Pods those rules decided.
    assert escalation_for(pod("db-0"), (entry,), 5) is None
    assert [escalation_for(pod(name), (entry,), 5, rule) is not None for name, rule in decided.items()] == [True, False, True, False]
    anything = Escalation(after=0, reason="any")
    assert all(escalation_for(pod(name), (anything,), 5, rule) is anything for name, rule in decided.items()), "an entry without drain_rules takes any"
    for bad in ([""], "db-last", [3]):
        with pytest.raises(MachineError, match=r"escalations\[0\]\.drain_rules"):
            normalize_escalations([{"after": 0, "reason": "x", "drain_rules": bad}])


def test_a_rule_name_none_of_the_tasks_rules_has_is_found_and_said() -> None:
    entries = normalize_escalations([{"after": 0, "reason": "x", "drain_rules": ["db-last", "typo"]}, {"after": 0, "reason": "y"}])
    assert rule_names_wanted(entries) == {"db-last", "typo"}
    assert unknown_rule_names(entries, ["db-last", "web-first"]) == ["typo"] and unknown_rule_names(entries, ["db-last", "typo"]) == []
    message = unknown_rules_message(["typo"], ["web-first", "db-last"], "its inline rules")
    assert "drain_rules names typo" in message and "the task's rules: db-last, web-first" in message and message.endswith("nothing was changed")


def test_the_classification_keeps_the_rule_that_decided_each_pod() -> None:
    rules = [
        rule("db-last", order=10, pods=[{"selector": {"matchLabels": {"app": "db"}}}]),
        rule("jobs-wait", WAIT_COMPLETED, pods=[{"selector": {"matchLabels": {"app": "job"}}}]),
    ]
    pods = [
        objects.pod("db-0", labels={"app": "db"}),
        objects.pod("job-0", labels={"app": "job"}),
        objects.pod("web-0", labels={"app": "web"}),
        objects.pod("pinned-0", labels={"app": "db", "cluster.x-k8s.io/drain": "skip"}),
    ]
    decisions = {d.name: d for d in objects.classify(pods, rules=rules)}
    assert {name: d.rule for name, d in decisions.items()} == {"db-0": "db-last", "job-0": "jobs-wait", "web-0": None, "pinned-0": None}


def test_what_the_options_need_of_the_identity() -> None:
    """Plain Pod deletion: in every namespace for disable_eviction and an escalation without namespaces, else in each of
    its namespaces; each permission once, named by the first option that needs it."""
    escalations = normalize_escalations(
        [{"after": 60, "reason": "a", "namespaces": ["shop", "db"]}, {"after": 60, "reason": "b", "namespaces": ["shop"]}, {"after": 60, "reason": "c"}]
    )
    delete = ("delete", "", "pods")
    assert permissions_needed(escalations) == [(delete, "shop", "escalations[0]"), (delete, "db", "escalations[0]"), (delete, None, "escalations[2]")]
    assert permissions_needed((), disable_eviction=True) == [(delete, None, "disable_eviction")]
    assert permissions_needed(()) == []


def test_the_refusal_names_the_option_the_permission_where_and_the_role() -> None:
    message = permission_message("escalations[1]", "delete pods (core API group) in namespace shop", "the workload cluster ns/c1")
    assert message.startswith("escalations[1] deletes Pods instead of evicting them, which needs delete pods (core API group) in namespace shop")
    assert "in the workload cluster ns/c1" in message and "lifecycle-machine-pod-delete" in message
    assert "leave escalations out" in message and message.endswith("Nothing was changed.")
