"""Unit tests for what a refused eviction means (_drain/evictions.py, docs/behaviour.md §3.3)."""

from __future__ import annotations

import pytest
from pod_objects import PDB

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.evictions import TERMINATING_NAMESPACE_MESSAGE, budget_cause, eviction_failure_message

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


def test_which_budget_refusal_an_eviction_failure_is() -> None:
    """The cause's type where the server sends it (announced for Kubernetes 1.37), the words only where it does not."""
    typed = [{"type": "DisruptionBudgetNegativeAllowedDisruptions", "message": "..."}]
    assert budget_cause(403, "forbidden", typed) == "DisruptionBudgetNegativeAllowedDisruptions"
    assert budget_cause(403, "forbidden", [{"type": "DisruptionBudgetTooManyDisruptedPods"}]) == "DisruptionBudgetTooManyDisruptedPods"
    untyped = [{"type": "DisruptionBudget", "message": "The disruption budget web does not allow evicting pods currently: pdb disruptions allowed is negative"}]
    assert budget_cause(403, 'poddisruptionbudgets.policy "web" is forbidden: pdb disruptions allowed is negative', untyped) == (
        "DisruptionBudgetNegativeAllowedDisruptions"
    )
    words = "The disruption budget web does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller"
    many = [{"type": "DisruptionBudget", "message": words}]
    assert budget_cause(403, "forbidden", many) == "DisruptionBudgetTooManyDisruptedPods"
    assert budget_cause(429, "Cannot evict pod as it would violate the pod's disruption budget.", None) == "DisruptionBudget"
    assert budget_cause(403, "denied by an admission policy", [{"type": "FieldValueForbidden"}]) is None
    assert budget_cause(500, "This pod has more than one PodDisruptionBudget", None) is None
