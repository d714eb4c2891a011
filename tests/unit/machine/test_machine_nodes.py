"""Unit tests for what every feature reads of a Machine's Node (_machine/nodes.py)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_node_unreachable, is_unschedulable


@pytest.mark.parametrize(
    ("conditions", "unreachable"),
    [
        ([{"type": "Ready", "status": "Unknown"}], True),
        ([{"type": "MemoryPressure", "status": "Unknown"}, {"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "True"}], False),
        ([], False),
    ],
)
def test_is_node_unreachable(conditions, unreachable):
    assert is_node_unreachable({"status": {"conditions": conditions}}) is unreachable


def test_is_node_unreachable_without_a_node():
    assert is_node_unreachable(None) is False


def test_is_unschedulable():
    assert is_unschedulable({"spec": {"unschedulable": True}}) is True
    assert is_unschedulable({"spec": {}}) is False
    assert is_unschedulable(None) is False
