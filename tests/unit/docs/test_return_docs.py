"""The modules' RETURN documentation names exactly the keys the code returns, where a result holds structured entries:
what holds a Machine (``blockers``), the escalations carried out, machine_delete's Machines, their drain, metrics and
clock, and the check-mode preflight with its findings. A key added to the code without its documentation fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import CLOCK_KEYS, DONE, Outcome, drain_summary, machine_metrics, preflight
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.preflight import Finding, batch_findings
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.escalations import normalize_escalations
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import Blocker

REPO = Path(__file__).resolve().parents[3]


def returned(module: str) -> dict:
    source = (REPO / "plugins" / "modules" / f"{module}.py").read_text()
    return yaml.safe_load(source.split('RETURN = r"""', 1)[1].split('"""', 1)[0])


def contains(module: str, *path: str) -> dict:
    """The ``contains`` of a return value, down ``path`` (each step a key of the one above)."""
    entry = returned(module)[path[0]]
    for key in path[1:]:
        entry = entry["contains"][key]
    return entry["contains"]


BLOCKER_KEYS = set(Blocker(phase="drain", kind="hook", object="Machine ns/m", verdict=None, reason="r").as_dict())
ESCALATION_KEYS = {"pod", "at", "dry_run", *normalize_escalations([{"after": 60, "reason": "CHG-1"}])[0].as_dict()}


@pytest.mark.parametrize(
    ("module", "path"), [("machine_drain", ("blockers",)), ("machine_terminate", ("blockers",)), ("machine_delete", ("machines", "blockers"))]
)
def test_blockers_are_documented_key_by_key_and_alike(module, path) -> None:
    documented = contains(module, *path)
    assert set(documented) == BLOCKER_KEYS
    assert documented == contains("machine_drain", "blockers"), "the three modules say the same of a blocker"


@pytest.mark.parametrize(("module", "path"), [("machine_drain", ("escalations",)), ("machine_delete", ("machines", "drain", "escalations"))])
def test_escalations_are_documented_key_by_key(module, path) -> None:
    assert set(contains(module, *path)) == ESCALATION_KEYS
    assert contains(module, *path) == contains("machine_drain", "escalations")


def test_a_machine_delete_entry_is_documented_key_by_key() -> None:
    outcome = Outcome(machine={"name": "m", "namespace": "ns", "api_version": None})
    documented = set(contains("machine_delete", "machines"))
    assert set(outcome.as_dict()) | {"out_of_service", "replacement"} == documented


def test_the_drain_summary_keys_are_documented() -> None:
    """What machine_delete keeps of a machine_drain result (every key machine_drain documents) is what it documents."""
    drain_result = dict.fromkeys(returned("machine_drain"), 1)
    assert set(drain_summary(drain_result)) == set(contains("machine_delete", "machines", "drain"))


def test_the_metrics_and_the_clock_are_documented_key_by_key() -> None:
    figures = machine_metrics(Outcome(machine={"name": "m", "namespace": "ns"}), {}, 1.0)
    replaced = machine_metrics(Outcome(machine={"name": "m", "namespace": "ns"}, replacement={"mode": "first"}), {}, 1.0)
    assert set(figures) | set(replaced) == set(contains("machine_delete", "metrics"))
    assert {*CLOCK_KEYS, DONE} == set(contains("machine_delete", "clock"))


def test_the_preflight_and_its_findings_are_documented_key_by_key() -> None:
    answer = preflight([], {"machines": [], "clusters": {}}, 1)
    assert set(answer) == set(contains("machine_delete", "preflight"))
    assert set(batch_findings({"machines": [], "clusters": {}}, 1, surge=1)) == set(contains("machine_delete", "preflight", "batch"))
    finding = Finding(kind="batch budget", machines=("ns/m",), object="PodDisruptionBudget ns/web", verdict="clears by itself", reason="r", holds=True)
    assert set(finding.as_dict()) == set(contains("machine_delete", "preflight", "batch", "findings"))
