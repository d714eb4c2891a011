"""machine_info's options, its query over the Machines' views and the gates a wait can ask for (``_info/logic.py``, pure)."""

from __future__ import annotations

import re

import pytest
from fake_machines import capi, openshift

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._info.logic import WAIT_STATES, InfoRequest, reached, select_by_query
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.view import describe

DRAIN_KEY = "pre-drain.delete.hook.machine.cluster.x-k8s.io/migrate"
TERMINATE_KEY = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush"


def test_request_from_params() -> None:
    params = {"machine": "m-1", "namespace": "ns", "label_selectors": None, "api_version": None, "wait": True, "wait_for": "drained", "wait_timeout": 30}
    assert InfoRequest.from_params(params) == InfoRequest(MachineSelection(machine="m-1", namespace="ns"), True, "drained", 30)
    assert InfoRequest() == InfoRequest(MachineSelection(), False, "deleted", 120)


@pytest.mark.parametrize("state", WAIT_STATES)
def test_a_machine_that_is_gone_has_reached_every_state(state) -> None:
    assert reached(state)(None)


@pytest.mark.parametrize(
    ("state", "closed", "open_"),
    [
        ("drainable", openshift({"preDrain": [("migrate", "team-a")]}), openshift({"preTerminate": [("flush", "logs")]})),
        ("drainable", capi({DRAIN_KEY: "team-a"}), capi({TERMINATE_KEY: "logs"})),
        ("terminable", openshift({"preTerminate": [("flush", "logs")]}), openshift({"preDrain": [("migrate", "team-a")]})),
        ("terminable", capi({TERMINATE_KEY: "logs"}), capi({DRAIN_KEY: "team-a"})),
        ("creatable", openshift({"preCreate": [("ipam", "net")]}), openshift()),
        ("drained", openshift(conditions=[{"type": "Drained", "status": "False"}]), openshift(conditions=[{"type": "Drained", "status": "True"}])),
        ("drained", capi(), capi(conditions=[{"type": "Deleting", "status": "True", "reason": "WaitingForVolumeDetach"}])),
        ("deleting", capi(), capi(deleting=True)),
        ("deleting", openshift(), openshift(deleting=True)),
    ],
)
def test_reached_follows_each_gate(state, closed, open_) -> None:
    assert not reached(state)(closed)
    assert reached(state)(open_)


def test_deleted_is_reached_only_when_gone() -> None:
    assert not reached("deleted")(openshift(deleting=True))
    assert not reached("deleted")(capi())


# -- query ------------------------------------------------------------------------------------


def test_a_query_picks_machines_out_of_the_views() -> None:
    views = [describe(openshift({"preDrain": [("migrate", "team-a")]}, deleting=True)), describe(capi())]
    assert [v["name"] for v in select_by_query(views, "[?deleting]")] == ["m-1"]
    assert [v["name"] for v in select_by_query(views, "[?flavour=='clusterapi' && cluster_name=='prod']")] == ["m-2"]
    assert [v["name"] for v in select_by_query(views, "[?hooks.preDrain[0]]")] == ["m-1"]
    assert select_by_query(views, "[?phase=='Failed']") == []
    assert [v["name"] for v in select_by_query(views, "[0]")] == ["m-1"], "one Machine is a list of one"
    assert select_by_query([], "[?deleting]") == []


def test_old_deletions_are_found_by_comparing_timestamps_as_strings() -> None:
    views = [describe(openshift(deleting=True))]  # deleting since 2026-01-01T00:00:00Z
    assert len(select_by_query(views, "[?deletion_timestamp < '2026-01-01T01:00:00Z']")) == 1
    assert select_by_query(views, "[?deletion_timestamp < '2025-12-31T23:00:00Z']") == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("[?", "Invalid JMESPath query '[?': "),
        ("[].name", "query '[].name' must select Machines (entries of machines, each with name, namespace and api_version)"),
        ("length(@)", "it gave int"),
    ],
)
def test_a_query_that_does_not_select_machines_is_refused(query, message) -> None:
    with pytest.raises(MachineError, match=re.escape(message)):
        select_by_query([describe(capi())], query)


def test_the_query_is_checked_with_the_other_options() -> None:
    params = {"machine": None, "namespace": "ns", "label_selectors": None, "api_version": None, "wait": False, "wait_for": "deleted", "wait_timeout": 1}
    assert InfoRequest.from_params({**params, "query": "[?deleting]"}).query == "[?deleting]"
    with pytest.raises(MachineError, match="query must not be empty"):
        InfoRequest.from_params({**params, "query": " "})
    with pytest.raises(MachineError, match="Invalid JMESPath query"):
        InfoRequest.from_params({**params, "query": "[?"})
