"""The escalations option (``_drain/escalations.py``): what is understood, what is refused, which Pod it applies to and when."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import (
    Escalation,
    escalation_for,
    event_message,
    normalize_escalations,
)
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
