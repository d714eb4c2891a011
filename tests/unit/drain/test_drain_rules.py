"""Unit tests for MachineDrainRules (_drain/rules.py): their shapes, validation and merging (docs/behaviour.md §3.1)."""

from __future__ import annotations

import re

import pytest
from pod_objects import PORTWORX_SPEC, classify, pod, rule, served

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import (
    DRAIN,
    SKIP,
    WAIT_COMPLETED,
    DrainRuleError,
    merge_rules,
    normalize_rules,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError

# ---------------------------------------------------------------------------
# MachineDrainRules: shapes and validation


def test_normalize_served_v1beta1_v1beta2_and_inline_give_one_shape():
    expected = [
        {
            "name": "portworx",
            "namespace": "capi",
            "drain": {"behavior": "Drain", "order": 100},
            "machines": [{"selector": {}, "clusterSelector": None}],
            "pods": [{"selector": {"matchLabels": {"app": "portworx"}}, "namespaceSelector": None}],
        }
    ]
    assert normalize_rules([served("portworx", "capi", PORTWORX_SPEC, "v1beta1")]) == expected
    assert normalize_rules([served("portworx", "capi", PORTWORX_SPEC, "v1beta2")]) == expected
    inline = normalize_rules([{"name": "portworx", **PORTWORX_SPEC}])
    assert inline == [{**expected[0], "namespace": None}]


def test_normalize_is_idempotent_and_absent_lists_become_empty():
    once = normalize_rules([rule("skip-all", SKIP), served("late", "capi", PORTWORX_SPEC)])
    assert once[1]["machines"] == [] and once[1]["pods"] == []
    assert once[1]["drain"] == {"behavior": SKIP, "order": None}
    assert normalize_rules(once) == once


def test_normalize_keeps_only_the_machine_namespace_and_inline_rules():
    rules = [served("here", "capi", PORTWORX_SPEC), served("elsewhere", "other", PORTWORX_SPEC), rule("inline", SKIP)]
    assert [r["name"] for r in normalize_rules(rules, namespace="capi")] == ["here", "inline"]
    assert [r["name"] for r in normalize_rules(rules)] == ["elsewhere", "here", "inline"]


def test_normalize_sorts_by_name_in_byte_order():
    names = ["a", "B", "_x", "a-b", "a.b", "Z", "0"]
    assert [r["name"] for r in normalize_rules([rule(n, SKIP) for n in names])] == ["0", "B", "Z", "_x", "a", "a-b", "a.b"]


def test_served_rules_ignore_unknown_spec_fields():
    spec = {**PORTWORX_SPEC, "futureField": True, "drain": {"behavior": "Drain", "order": 1, "futureKnob": 2}}
    assert normalize_rules([served("r", "capi", spec)], served=True)[0]["drain"] == {"behavior": "Drain", "order": 1}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (
            served("r", "capi", {"drain": {"behavior": "Skip"}, "pods": [{"podSelector": {"matchLabels": {"app": "db"}}}]}),
            "spec.pods[0] has unknown field(s) podSelector",
        ),
        (served("r", "capi", {"drain": {"behavior": "Skip"}, "futureField": 1}), "spec has unknown field(s) futureField (allowed: drain, machines, pods)"),
        (served("r", "capi", {"drain": {"behavior": "Skip", "orders": 1}}), "spec.drain has unknown field(s) orders"),
        ({**served("r", "capi", {"drain": {"behavior": "Skip"}}), "specs": {}}, "unknown field(s) specs"),
    ],
)
def test_a_rule_the_user_wrote_in_the_objects_shape_is_checked_strictly(raw, fragment):
    """Only rules read from the cluster may carry unknown fields: an ignored podSelector widens a rule to every Pod."""
    with pytest.raises(DrainRuleError, match=re.escape(fragment)):
        normalize_rules([raw])


def test_merged_cluster_rules_are_read_leniently_and_inline_ones_strictly():
    future = served("r", "capi", {"drain": {"behavior": "Skip"}, "futureField": 1})
    assert [rule["name"] for rule in merge_rules([], [future], "capi")] == ["r"]
    with pytest.raises(DrainRuleError):
        merge_rules([future], [], "capi")


@pytest.mark.parametrize(
    ("raw", "name", "fragment"),
    [
        (served("bad", "capi", {"drain": {"behavior": "Evict"}}), "capi/bad", "behavior must be one of Drain, Skip, WaitCompleted, got 'Evict'"),
        (served("bad", "capi", {"drain": {"behavior": "drain"}}), "capi/bad", "got 'drain'"),
        (served("bad", "capi", {"machines": []}), "capi/bad", "spec.drain must be a mapping"),
        (rule("bad", SKIP, 5), "bad", 'order must not be set if drain behavior is "Skip" or "WaitCompleted"'),
        (rule("bad", WAIT_COMPLETED, 0), "bad", "order must not be set"),
        (rule("bad", DRAIN, 2**31), "bad", "out of the int32 range"),
        (rule("bad", DRAIN, -(2**31) - 1), "bad", "out of the int32 range"),
        ({"name": "bad", "drain": {"behavior": "Drain", "order": True}}, "bad", "order must be an integer"),
        ({"name": "bad", "drain": {"behavior": "Drain", "order": 1.5}}, "bad", "order must be an integer"),
        ({"name": "bad", "drain": {"behavior": "Drain", "order": "soon"}}, "bad", "order must be an integer"),
        (
            rule("bad", SKIP, pods=[{"selector": {"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["x"]}]}}]),
            "bad",
            "spec.pods[0].selector: 'Equals' is not a valid label selector operator",
        ),
        (
            rule("bad", SKIP, pods=[{}, {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]),
            "bad",
            "spec.pods[1].namespaceSelector: the In expression on 'a' needs at least one value",
        ),
        (
            served("bad", "capi", {"drain": {"behavior": "Skip"}, "machines": [{"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}]}),
            "capi/bad",
            "spec.machines[0].selector: 'Bogus' is not a valid label selector operator",
        ),
        (
            rule("bad", SKIP, machines=[{"clusterSelector": {"matchLabels": {"stage": "a b"}}}]),
            "bad",
            "spec.machines[0].clusterSelector: invalid value 'a b'",
        ),
        (rule("bad", SKIP, machines=[{"namespaceSelector": {}}]), "bad", "spec.machines[0] has unknown field(s) namespaceSelector"),
        (rule("bad", SKIP, pods={"selector": {}}), "bad", "spec.pods must be a list"),
        (rule("bad", SKIP, pods=["app=web"]), "bad", "spec.pods[0] must be a mapping"),
        ({"name": "bad", "drain": {"behavior": "Skip"}, "pod": []}, "bad", "unknown field(s) pod"),
        ({"name": "bad", "drain": {"behavior": "Skip", "ordre": 1}}, "bad", "spec.drain has unknown field(s) ordre"),
        ({"drain": {"behavior": "Skip"}}, "#0", "needs a non-empty name"),
        ("Skip", "#0", "must be a mapping"),
    ],
)
def test_invalid_rules_raise_an_error_naming_the_rule(raw, name, fragment):
    with pytest.raises(DrainRuleError) as excinfo:
        normalize_rules([raw])
    assert excinfo.value.rule == name
    assert str(excinfo.value).startswith(f"Invalid MachineDrainRule {name}: ")
    assert fragment in str(excinfo.value)


def test_rule_errors_are_value_errors_and_machine_errors():
    # ValueError per the interface; MachineError so the module's run() reports it with fail_json.
    with pytest.raises(DrainRuleError) as excinfo:
        normalize_rules([rule("bad", "Evict")])
    assert isinstance(excinfo.value, ValueError)
    assert isinstance(excinfo.value, MachineError)
    assert excinfo.value.msg == str(excinfo.value)


def test_duplicate_rule_names_are_rejected():
    with pytest.raises(DrainRuleError, match="Invalid MachineDrainRule dup: another rule has the same name"):
        normalize_rules([rule("dup", SKIP), rule("dup", DRAIN, 3)])


@pytest.mark.parametrize(("order", "expected"), [(-5, -5), ("7", 7), (" -3 ", -3), (2**31 - 1, 2**31 - 1), (-(2**31), -(2**31)), (None, None)])
def test_drain_order_accepts_int32_and_integer_text(order, expected):
    raw = {"name": "r", "drain": {"behavior": DRAIN, "order": order}}
    assert normalize_rules([raw])[0]["drain"]["order"] == expected


def test_an_invalid_rule_fails_classification_even_if_it_would_not_match():
    # Upstream validates every rule in the namespace before matching any Pod.
    never = rule("never", SKIP, machines=[{"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}])
    with pytest.raises(DrainRuleError, match="Invalid MachineDrainRule never"):
        classify([pod("web")], rules=[never])


# ---------------------------------------------------------------------------
# Merging the task's rules with the cluster's


def served_rule(name: str, namespace: str, behavior: str = SKIP) -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"drain": {"behavior": behavior}}}


def test_inline_rules_add_to_cluster_rules_and_replace_same_names() -> None:
    inline = [{"name": "b-rule", "drain": {"behavior": "Drain", "order": 7}}, {"name": "a-rule", "drain": {"behavior": "WaitCompleted"}}]
    rules = merge_rules(inline, [served_rule("b-rule", "ns"), served_rule("c-rule", "ns"), served_rule("elsewhere", "other")], "ns")
    assert [(r["name"], r["drain"]["behavior"], r["drain"]["order"]) for r in rules] == [
        ("a-rule", "WaitCompleted", None),
        ("b-rule", "Drain", 7),
        ("c-rule", "Skip", None),
    ]


def test_merge_rules_names_an_invalid_cluster_rule() -> None:
    broken = served_rule("broken", "ns")
    broken["spec"]["pods"] = [{"selector": {"matchExpressions": [{"key": "a", "operator": "Maybe"}]}}]
    with pytest.raises(DrainRuleError, match=r"^Invalid MachineDrainRule ns/broken: spec.pods\[0\].selector: "):
        merge_rules([], [broken], "ns")


def test_merge_rules_names_an_invalid_inline_rule() -> None:
    with pytest.raises(DrainRuleError, match=r"^Invalid MachineDrainRule bad: "):
        merge_rules([{"name": "bad", "drain": {"behavior": "Skip", "order": 1}}], [], None)


def test_rules_normalised_once_are_taken_as_they_are() -> None:
    rules = normalize_rules([{"name": "portworx", **PORTWORX_SPEC}])
    assert normalize_rules(rules) is rules
    assert merge_rules(rules, [], None) == rules
