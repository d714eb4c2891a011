"""The bounds of the modules' number options (``_options/logic.py``, pure), and
each module's request refusing an option out of range before anything runs."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import AliveRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._info.logic import InfoRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import (
    A_YEAR,
    Bound,
    bound_errors,
    check_options,
    empty_names,
    invalid_names,
    invalid_options,
    namespace_error,
    seconds,
    subdomain_error,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import TerminateRequest


@pytest.mark.parametrize(
    ("bound", "value", "error"),
    [
        (Bound("wait_timeout"), -1, "wait_timeout must be 0 or more seconds (got -1)"),
        (Bound("wait_timeout"), 0, None),
        (Bound("wait_timeout"), A_YEAR, None),
        (Bound("wait_timeout"), A_YEAR + 1, "wait_timeout must be at most 31536000 seconds, a year (got 31536001)"),
        (Bound("wait_sleep", least=1), 0, "wait_sleep must be at least 1 (got 0)"),
        (Bound("concurrency", least=1, most=None), 10**9, None),
        (Bound("grace_period"), None, None),
        (Bound("wait_timeout"), "soon", None),
        (Bound("wait_timeout"), True, None),
    ],
)
def test_a_bound_says_why_a_value_is_out_of_range(bound: Bound, value, error: str | None) -> None:
    assert bound.error(value) == error


def test_every_option_out_of_range_is_named_once_in_order() -> None:
    bounds = (*seconds("wait_timeout", "progress_interval"), *seconds("wait_sleep", least=1))
    params = {"wait_timeout": -5, "progress_interval": 20, "wait_sleep": 0, "other": -1}
    assert bound_errors(params, bounds) == ["wait_timeout must be 0 or more seconds (got -5)", "wait_sleep must be at least 1 (got 0)"]
    assert bound_errors({}, bounds) == [], "options a module does not have are not checked"


def test_the_failure_names_the_module_and_that_nothing_changed() -> None:
    with pytest.raises(MachineError) as caught:
        check_options("machine_drain", {"grace_period": -1}, seconds("grace_period"), errors=["rules must be a list"])
    assert caught.value.msg == "Invalid options of machine_drain: rules must be a list; grace_period must be 0 or more seconds (got -1); nothing was changed"
    check_options("machine_drain", {"grace_period": 0}, seconds("grace_period"))
    assert invalid_options("m", ["a", "b"]).msg == "Invalid options of m: a; b; nothing was changed"


DRAIN = {
    "node": "n1",
    "machine": None,
    "namespace": None,
    "api_version": None,
    "state": "drained",
    "rules": [],
    "use_cluster_rules": True,
    "wait": True,
    "wait_timeout": 600,
    "wait_sleep": 2,
    "grace_period": None,
    "disable_eviction": False,
    "progress_interval": 0,
}
TERMINATE = {
    "machine": "m1",
    "namespace": "ns",
    "api_version": None,
    "wait": True,
    "wait_timeout": 120,
    "wait_sleep": 2,
    "instance_terminated": False,
    "rules": None,
    "use_cluster_rules": True,
}


@pytest.mark.parametrize(
    ("build", "params", "message"),
    [
        (lambda p: DrainRequest.from_params(p, False), {**DRAIN, "wait_timeout": -1}, "machine_drain: wait_timeout must be 0 or more seconds (got -1)"),
        (lambda p: DrainRequest.from_params(p, False), {**DRAIN, "wait_sleep": -1}, "machine_drain: wait_sleep must be 0 or more seconds (got -1)"),
        (lambda p: DrainRequest.from_params(p, False), {**DRAIN, "progress_interval": -1}, "progress_interval must be 0 or more seconds (got -1)"),
        (lambda p: DrainRequest.from_params(p, False), {**DRAIN, "grace_period": A_YEAR + 1}, "grace_period must be at most 31536000 seconds"),
        (lambda p: TerminateRequest.from_params(p, False), {**TERMINATE, "wait_sleep": 0}, "machine_terminate: wait_sleep must be at least 1 (got 0)"),
        (lambda p: TerminateRequest.from_params(p, False), {**TERMINATE, "wait_timeout": -1}, "machine_terminate: wait_timeout must be 0 or more"),
        (InfoRequest.from_params, {"machine": "m1", "namespace": "ns", "wait": True, "wait_for": "deleted", "wait_timeout": -1}, "machine_info: wait_timeout"),
        (AliveRequest.from_params, {"name": "cluster", "namespace": "ns", "state": "absent", "wait_timeout": -1}, "cluster_alive: wait_timeout"),
    ],
)
def test_each_request_refuses_an_option_out_of_range(build, params: dict, message: str) -> None:
    with pytest.raises(MachineError, match=r"nothing was changed$") as caught:
        build(params)
    assert message in caught.value.msg


def test_zero_keeps_its_meaning() -> None:
    drain = DrainRequest.from_params({**DRAIN, "wait_timeout": 0, "wait_sleep": 0, "progress_interval": 0, "grace_period": 0}, False)
    assert (drain.wait_timeout, drain.wait_sleep, drain.progress_interval, drain.grace_period) == (0, 0, 0, 0)
    assert TerminateRequest.from_params({**TERMINATE, "wait_timeout": 0, "wait_sleep": 1}, False).wait_timeout == 0
    assert AliveRequest.from_params({"namespace": "ns", "wait_timeout": 0}).wait_timeout == 0
    assert AliveRequest.from_params({"namespace": "ns", "finalizer": "a.example.com/x"}, "cluster_alive_finalizer").finalizer == "a.example.com/x"


def test_an_empty_name_is_refused() -> None:
    params = {"name": "", "namespace": " ", "machine": None, "node": "n1"}
    assert empty_names(params, ("name", "namespace", "machine", "node")) == ["name must not be empty", "namespace must not be empty"]
    with pytest.raises(MachineError, match=r"^Invalid options of cluster_alive: name must not be empty; nothing was changed$"):
        AliveRequest.from_params({"name": "", "namespace": "ns", "state": "absent", "wait_timeout": 600})
    with pytest.raises(MachineError, match=r"node must not be empty"):
        DrainRequest.from_params({**DRAIN, "node": ""}, False)
    with pytest.raises(MachineError, match=r"machine must not be empty"):
        TerminateRequest.from_params({**TERMINATE, "machine": ""}, False)


@pytest.mark.parametrize("name", ["worker-1", "a", "ip-10-0-1-2.ec2.internal", "0abc", "a" * 253])
def test_names_objects_can_have(name: str) -> None:
    assert subdomain_error("machine", name) is None


@pytest.mark.parametrize("name", ["Worker-1", "worker_1", "worker 1", "-worker", "worker-", "worker..1", "a" * 254, "wörker"])
def test_names_no_object_can_have(name: str) -> None:
    assert subdomain_error("machine", name) == (
        f"machine {name!r} can never name a Kubernetes object: a name is at most 253 characters: lower case letters, digits, '-' and '.',"
        " starting and ending with a letter or digit"
    )


@pytest.mark.parametrize(("name", "valid"), [("openshift-machine-api", True), ("a" * 63, True), ("a" * 64, False), ("capi.system", False), ("Default", False)])
def test_namespace_names_are_dns_labels(name: str, valid: bool) -> None:
    assert (namespace_error("namespace", name) is None) is valid


def test_unset_and_empty_names_are_left_to_the_other_checks() -> None:
    assert invalid_names({"machine": None, "node": "", "namespace": None}, ("machine", "node"), ("namespace",)) == []


@pytest.mark.parametrize(
    ("build", "params", "message"),
    [
        (lambda p: DrainRequest.from_params(p, False), {**DRAIN, "node": "Worker-1"}, "machine_drain: node 'Worker-1' can never name"),
        (
            lambda p: TerminateRequest.from_params(p, False),
            {**TERMINATE, "namespace": "Capi"},
            "machine_terminate: namespace 'Capi' can never name a Namespace",
        ),
        (InfoRequest.from_params, {"machine": "M1", "namespace": "ns", "wait": False, "wait_for": "deleted", "wait_timeout": 1}, "machine_info: machine 'M1'"),
        (AliveRequest.from_params, {"name": "Cluster", "namespace": "ns", "state": "absent", "wait_timeout": 1}, "cluster_alive: name 'Cluster' can never"),
    ],
)
def test_each_request_refuses_a_name_no_object_can_have(build, params: dict, message: str) -> None:
    with pytest.raises(MachineError, match=r"nothing was changed$") as caught:
        build(params)
    assert message in caught.value.msg
