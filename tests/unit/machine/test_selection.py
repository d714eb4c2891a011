"""Which Machines a task is about (``_machine/selection.py``, pure)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import (
    MachineSelection,
    selection_errors,
    served_machine_apis,
    unserved_api_version,
)


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


def test_the_machine_apis_a_cluster_serves() -> None:
    both = {"machine.openshift.io": ["v1beta1", "v1"], "cluster.x-k8s.io": ["v1beta2", "v1beta1"]}
    assert served_machine_apis(lambda group: both.get(group, [])) == ["machine.openshift.io/v1beta1", "cluster.x-k8s.io/v1beta2", "cluster.x-k8s.io/v1beta1"]
    capi_1_9 = {"cluster.x-k8s.io": ["v1beta1"]}
    assert served_machine_apis(lambda group: capi_1_9.get(group, [])) == ["cluster.x-k8s.io/v1beta1"]
    assert served_machine_apis(lambda group: []) == []


def test_an_api_version_that_serves_no_machines_is_named_with_those_that_do() -> None:
    served = ["machine.openshift.io/v1beta1", "cluster.x-k8s.io/v1beta1"]
    assert unserved_api_version("machine.openshift.io/v1", served) == (
        "api_version machine.openshift.io/v1 is not a Machine API this cluster serves; it serves Machines as "
        "machine.openshift.io/v1beta1, cluster.x-k8s.io/v1beta1"
    )
    assert unserved_api_version("cluster.x-k8s.io/v1beta3", []) == (
        "api_version cluster.x-k8s.io/v1beta3 is not a Machine API this cluster serves: it serves neither machine.openshift.io nor cluster.x-k8s.io Machines"
    )


@pytest.mark.parametrize(
    ("params", "writes", "errors"),
    [
        ({"machine": "m-1", "label_selectors": None}, True, []),
        ({"machine": "", "label_selectors": None}, False, ["machine must not be empty"]),
        ({"machine": "  ", "label_selectors": None}, True, ["machine must not be empty"]),
        ({"machine": None, "label_selectors": []}, True, ["label_selectors must not be empty: an empty list would choose every Machine"]),
        ({"machine": None, "label_selectors": []}, False, []),
        ({"machine": None, "label_selectors": None}, False, []),
        ({"machine": None, "label_selectors": ["pool=a", ""]}, False, ["label_selectors must not hold an empty selector: it would choose every Machine"]),
    ],
)
def test_options_that_would_choose_every_machine_are_refused(params: dict, writes: bool, errors: list[str]) -> None:
    assert selection_errors(params, writes=writes) == errors
