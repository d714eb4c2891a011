"""Unit tests for label selectors (_drain/selectors.py)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.selectors import match_label_selector

# ---------------------------------------------------------------------------
# Label selectors


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {"a": "1"}, True),
        ({}, {}, True),
        ({"matchLabels": {}, "matchExpressions": []}, {"a": "1"}, True),
        ({"matchLabels": None, "matchExpressions": None}, None, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchLabels": {"a": "1"}}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": []}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "1"}, False),
        # matchLabels AND matchExpressions, and expressions ANDed with each other.
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1", "b": "x"}, True),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "example.com/b", "operator": "In", "values": ["x"]}]},
            {"a": "1", "example.com/b": "y"},
            False,
        ),
    ],
)
def test_match_label_selector(selector, labels, expected):
    assert match_label_selector(selector, labels) is expected


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["1"]}]}, "'Equals' is not a valid label selector operator"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "In expression on 'a' needs at least one value"),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn"}]}, "NotIn expression on 'a' needs at least one value"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["1"]}]}, "must not have values"),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["1"]}]}, "must not have values"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "label key None must be a string"),
        ({"matchLabels": {"-bad": "1"}}, "invalid label key '-bad'"),
        ({"matchLabels": {"a/b/c": "1"}}, "at most one '/'"),
        ({"matchLabels": {"Bad_Prefix/b": "1"}}, "prefix must be a DNS subdomain"),
        ({"matchLabels": {"a": "bad value"}}, "invalid value 'bad value'"),
        ({"matchLabels": {"a": "x" * 64}}, "invalid value"),
        ({"matchLabels": {"a": 1}}, "must be a string"),
        ({"matchLabel": {"a": "1"}}, "unknown label selector field(s): matchLabel"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "value": "x"}]}, "unknown matchExpressions field(s): value"),
        ({"matchExpressions": {"key": "a"}}, "matchExpressions must be a list"),
        ("app=web", "must be a mapping"),
    ],
)
def test_match_label_selector_rejects_invalid_selectors(selector, fragment):
    with pytest.raises(ValueError) as excinfo:
        match_label_selector(selector, {"a": "1"})
    assert fragment in str(excinfo.value)
