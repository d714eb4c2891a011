"""Unit tests for what a refused eviction means (_drain/evictions.py, docs/behaviour.md §3.3)."""

from __future__ import annotations

import pytest
from pod_objects import PDB

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import TERMINATING_NAMESPACE_MESSAGE, eviction_failure_message

# Eviction failures


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((404, 'pods "web" not found', None), None),
        (
            (429, PDB, ["The disruption budget nginx needs 20 healthy pods and has 20 currently"]),
            PDB + " The disruption budget nginx needs 20 healthy pods and has 20 currently",
        ),
        ((429, PDB, ["first", "second"]), PDB + " first,second"),
        ((429, PDB, [{"reason": "DisruptionBudget", "message": "The disruption budget x needs 1"}]), PDB + " The disruption budget x needs 1"),
        ((429, "Too many requests, please try again later.", None), "Too many requests, please try again later."),
        ((403, "forbidden", ["namespace apps is being terminated"], True), TERMINATING_NAMESPACE_MESSAGE),
        ((403, "forbidden", [{"type": "NamespaceTerminating", "message": "namespace apps is being terminated"}]), TERMINATING_NAMESPACE_MESSAGE),
        ((403, 'pods "web" is forbidden: RBAC says no', None), 'pods "web" is forbidden: RBAC says no'),
        ((500, "some other error", None), "some other error"),
        ((500, "", None), "eviction failed with HTTP status 500"),
    ],
)
def test_eviction_failure_message(args, expected):
    assert eviction_failure_message(*args) == expected


def test_terminating_namespace_text_is_exact():
    assert eviction_failure_message(403, "x", [], namespace_terminating=True) == (
        "Cannot evict pod from terminating namespace: unable to create eviction (kube-controller-manager should set deletionTimestamp)"
    )
