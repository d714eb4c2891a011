"""Which Machines a task is about (``_machine/selection.py``, pure)."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection


def test_one_machine_by_name() -> None:
    chosen = MachineSelection.from_params({"machine": "m-1", "namespace": "ns", "label_selectors": None, "api_version": "cluster.x-k8s.io/v1beta2"})
    assert chosen == MachineSelection(machine="m-1", namespace="ns", api_version="cluster.x-k8s.io/v1beta2")
    assert chosen.label_selector is None


def test_label_selectors_are_anded_into_one() -> None:
    chosen = MachineSelection.from_params({"label_selectors": ["pool=a", "zone in (x,y)", "!spot"]})
    assert chosen.label_selectors == ("pool=a", "zone in (x,y)", "!spot")
    assert chosen.label_selector == "pool=a,zone in (x,y),!spot"
    assert (chosen.machine, chosen.namespace, chosen.api_version) == (None, None, None)


def test_no_options_select_by_nothing() -> None:
    assert MachineSelection.from_params({}) == MachineSelection()
    assert MachineSelection(label_selectors=()).label_selector is None
    assert hash(MachineSelection(label_selectors=("a=b",))) == hash(MachineSelection(label_selectors=("a=b",))), "a value"
