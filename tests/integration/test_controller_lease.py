"""machine_controller: auto reads the controller's leader-election Lease (_machine/liveness.py)
on the plain control plane, for a Machine whose status a controller once wrote but that no
controller answered since its deletion (the case the grace was for):

- a Lease held and renewed: the controller is live, followed at once (no grace waited for);
- a Lease vacant for longer than any takeover: no controller can act, the collection acts at once;
- a Lease the task may not read (403, the shipped AWX role grants no leases): the grace, then the collection;
- beside the real Cluster API v1.14.2 manager run with leader election, the Lease it holds reads as held.

Each test names its Lease where the controller's install keeps it (capi-system, openshift-machine-api)
and deletes it afterwards.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import yaml
from rbachelpers import RBAC, grant_user, revoke_user

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.capi import CAPI_LEASE
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.openshift import OPENSHIFT_LEASE_NAMESPACE
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.liveness import SKEW, TAKEOVER_FLOOR

pytestmark = pytest.mark.slow

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
# The OpenShift Machines of these tests say they are AWS Machines, so their controller's Lease is AWS's.
OPENSHIFT_LEASE = (OPENSHIFT_LEASE_NAMESPACE, "cluster-api-provider-aws-leader")
FLAVOURS = pytest.mark.parametrize("flavour", ["openshift", "v1beta2"], indirect=True)


def micro_time(seconds_ago: float = 0.0) -> str:
    return (_dt.datetime.now(_dt.UTC) - _dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ControllerLease:
    """The Lease of the flavour's controller, written as a leader-elected controller writes it."""

    def __init__(self, kube: KubeApi, flavour: str):
        self.kube = kube
        self.namespace, self.name = OPENSHIFT_LEASE if flavour == "openshift" else CAPI_LEASE
        self.duration = 120 if flavour == "openshift" else 15
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        try:
            kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        except ApiError as exc:
            if exc.status != 409:
                raise

    @property
    def path(self) -> str:
        return f"{LEASES.format(ns=self.namespace)}/{self.name}"

    def put(self, *, holder: str = "controller-0_6f1c", renewed_ago: float = 0.0) -> None:
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": self.duration,
            "acquireTime": micro_time(renewed_ago + 3600),
            "renewTime": micro_time(renewed_ago),
        }
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        current = self.kube.get(self.path)
        if current is None:
            self.kube.create(LEASES.format(ns=self.namespace), body)
        else:
            self.kube.patch(self.path, {"spec": spec})

    def renew(self, every: float = 2.0) -> None:
        """Keep it held and renewed, as a live leader does (every retry period), until the test ends."""
        self.put()

        def _loop() -> None:
            while not self._stop.wait(every):
                self.kube.patch(self.path, {"spec": {"renewTime": micro_time()}})

        self._renewer = threading.Thread(target=_loop, daemon=True)
        self._renewer.start()

    def remove(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=10)
        if self.kube.get(self.path) is not None:
            self.kube.delete(self.path)


@pytest.fixture
def controller_lease(kube: KubeApi, flavour: str) -> Iterator[ControllerLease]:
    lease = ControllerLease(kube, flavour)
    yield lease
    lease.remove()


@pytest.fixture
def served_once(kubeconfig: str, kube: KubeApi, flavour: str, victim) -> Callable[[], object]:
    """A victim whose status a controller wrote once (it has not answered since); an OpenShift
    one is an AWS Machine, whose controller's Lease is ``cluster-api-provider-aws-leader``."""

    def _make():
        machine = victim()
        if flavour == "openshift":
            kube.patch(machine.path, {"spec": {"providerSpec": {"value": {"kind": "AWSMachineProviderConfig"}}}})
        controller = api_from_kubeconfig(kubeconfig, user_agent="machine-controller/0.1")
        controller.patch(machine.path, {"status": {"phase": "Running"}}, subresource_status=True)
        return machine

    return _make


def _entry(result: dict) -> dict:
    assert not result.get("failed") or result.get("machines"), result.get("msg")
    assert len(result["machines"]) == 1, result
    return result["machines"][0]


def _timed(run: Callable[[], dict]) -> tuple[dict, float]:
    started = time.monotonic()
    result = run()
    return result, time.monotonic() - started


@FLAVOURS
def test_a_held_lease_is_followed_at_once(*, kube, served_once, controller_lease, run_module) -> None:
    machine = served_once()
    controller_lease.renew()
    args = {"machines": [{"name": machine.name, "namespace": machine.namespace}], "controller_grace": 120, "drain_timeout": 3}
    result, seconds = _timed(lambda: run_module("machine_delete", args))
    entry = _entry(result)
    # Followed from the start: the drain phase's 3 s ran out waiting for the controller, not 120 s of grace.
    assert (entry["status"], entry["carried_out_by"], entry["controller"], entry["step"]) == ("failed", "controller", "machine-controller", "drain"), entry
    assert "Timed out after 3 s waiting for its controller (machine-controller) to finish the drain phase" in entry["message"], entry["message"]
    assert seconds < 60, f"{seconds:.1f} s: the grace of 120 s must not have been waited for"
    # Nothing of the controller's work was done: the Node is schedulable, both Pods run on it.
    assert not kube.get(f"/api/v1/nodes/{machine.node}")["spec"].get("unschedulable")
    assert sorted(p["spec"]["nodeName"] for p in machine.web_pods() if not p["metadata"].get("deletionTimestamp")) == [machine.node, machine.node]
    print(f"held Lease: followed, {seconds:.1f} s for the task")


@FLAVOURS
def test_a_lease_vacant_for_good_lets_the_collection_act_at_once(*, flavour, served_once, controller_lease, run_module) -> None:
    machine = served_once()
    # Its controller wrote the status while it held the Lease, then stopped (scaled down): the Lease
    # expires now and is not taken over. A lease of 15 s keeps the takeover window short.
    controller_lease.duration = 15
    controller_lease.put(renewed_ago=controller_lease.duration)
    vacant_since = time.time()
    time.sleep(max(0.0, vacant_since + TAKEOVER_FLOOR + SKEW + 1 - time.time()))
    args = {"machines": [{"name": machine.name, "namespace": machine.namespace}], "controller_grace": 60, "drain_timeout": 120}
    result, seconds = _timed(lambda: run_module("machine_delete", args))
    entry = _entry(result)
    assert (entry["carried_out_by"], entry["controller"]) == ("collection", "machine-controller"), entry
    assert entry["status"] == ("awaiting_instance_termination" if flavour == "openshift" else "done"), result["progress"]
    assert seconds < 60, f"{seconds:.1f} s: the grace of 60 s must not have been waited for"
    print(f"vacant Lease: the collection acted at once, {seconds:.1f} s for the task")


NO_LEASES_USER = "lifecycle-machine-without-leases"


@pytest.fixture
def shipped_role(kube: KubeApi) -> Iterator[str]:
    """extensions/awx/rbac.yml's ClusterRole without its rule on leases (an install that never granted
    the Lease read), bound to a user of its own (the shipped binding may be there too); that user's name."""
    [role] = [item for item in yaml.safe_load(RBAC.read_text())["items"] if item["kind"] == "ClusterRole" and item["metadata"]["name"] == "lifecycle-machine"]
    rules = [rule for rule in role["rules"] if "coordination.k8s.io" not in rule["apiGroups"]]
    assert len(rules) == len(role["rules"]) - 1, "the shipped role grants get on leases in one rule"
    grant_user(kube, NO_LEASES_USER, rules)
    yield NO_LEASES_USER
    revoke_user(kube, NO_LEASES_USER)


def _may_get(kube: KubeApi, user: str, namespace: str, name: str) -> bool:
    attributes = {"group": "coordination.k8s.io", "resource": "leases", "verb": "get", "namespace": namespace, "name": name}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": user, "resourceAttributes": attributes}}
    return bool(kube.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)["status"].get("allowed"))


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_a_lease_the_task_may_not_read_gives_the_grace(*, kube, kubeconfig, served_once, controller_lease, shipped_role, run_module) -> None:
    from ansible_collections.lifecycle.machine.plugins.module_utils._machine import waits  # noqa: PLC0415

    machine = served_once()
    controller_lease.renew()  # held: read, it would be followed at once
    assert not _may_get(kube, shipped_role, controller_lease.namespace, controller_lease.name)
    # Someone else asks for the deletion (a second after the status write: managedFields keeps whole
    # seconds); the task, as the shipped role's user, looks for the controller.
    time.sleep(1.1)
    kube.delete(machine.path)
    as_role = api_from_kubeconfig(kubeconfig, impersonate_user=shipped_role)
    grace = 6
    waits.forget_leases()
    started = time.monotonic()
    _current, actor = waits.actor_of(as_role, kube.get(machine.path), "auto", grace)
    waited = time.monotonic() - started
    assert (actor.who, actor.manager) == ("collection", "machine-controller"), actor
    assert f"did not answer within {grace} s of the deletion" in actor.reason, actor.reason
    assert "Lease capi-system/controller-leader-election-capi may not be read (403 Forbidden: grant get on leases in capi-system)" in actor.reason
    assert waited >= grace - 2, f"{waited:.1f} s: the grace (from the deletion) was waited for"
    # The module, as the same user, carries the deletion out.
    args = {"machines": [{"name": machine.name, "namespace": machine.namespace}], "controller_grace": grace, "drain_timeout": 120}
    entry = _entry(run_module("machine_delete", {**args, "impersonate_user": shipped_role}))
    assert (entry["carried_out_by"], entry["controller"], entry["status"]) == ("collection", "machine-controller", "done"), entry


# The core manager finds its leader-election namespace only in a Pod (the service account's namespace
# file). Outside one, it is given that file in a mount namespace of its own (a tmpfs over /run, seen
# by the manager alone): the Lease then lands where an install keeps it, capi-system.
IN_CLUSTER_NAMESPACE = (
    "mount -t tmpfs lm-lease /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount"
    f" && printf %s {CAPI_LEASE[0]} > /run/secrets/kubernetes.io/serviceaccount/namespace"
    ' && exec "$0" "$@"'
)


@pytest.fixture
def capi_leader_elected(request: pytest.FixtureRequest) -> Iterator[dict]:
    """A control plane with the real Cluster API manager run as installed: with leader election
    (its defaults: 15 s lease), the Lease in capi-system; stopped after the test, pass or fail."""
    import os  # noqa: PLC0415
    import shutil  # noqa: PLC0415

    import controllers  # noqa: PLC0415
    import realctl  # noqa: PLC0415

    built = realctl.binaries(request, "capi")
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root to give the manager an in-cluster namespace file")
    state_dir = realctl.new_state_dir("capi-lease")
    try:
        state = controllers.cluster_tool.up(state_dir, quiet=True)
        kube = api_from_kubeconfig(str(state_dir / "kubeconfig"))
        kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CAPI_LEASE[0]}})
        controllers.apply_crds(state, built / "crds")
        controllers._webhook_cert(state_dir / "capi-certs")
        health = controllers.cluster_tool._free_port()
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_CLUSTER_NAMESPACE, str(built / controllers.BINARY["capi"])]
        argv += [
            f"--kubeconfig={state_dir / 'components.kubeconfig'}",
            "--leader-elect=true",
            f"--webhook-port={controllers.cluster_tool._free_port()}",
            f"--webhook-cert-dir={state_dir / 'capi-certs'}",
            f"--health-addr=127.0.0.1:{health}",
            "--diagnostics-address=0",
            "--logging-format=json",
            "--watch-filter=lm-lease-test",
        ]
        log = state_dir / "capi-manager.log"

        def ready() -> bool | str:
            healthy = controllers._http_ok(f"http://127.0.0.1:{health}/readyz")
            if healthy is not True:
                return f"/readyz: {healthy}"
            return controllers._log_has(log, '"Starting workers"', '"controller":"machine"') or "not leading yet"

        state = controllers._start_controller(state_dir, controllers.BINARY["capi"], argv, ready=ready, timeout=180, extra={})
        yield {**state, "kubeconfig": str(state_dir / "kubeconfig")}
    finally:
        controllers.down(state_dir)


@pytest.mark.real_controllers
def test_the_real_cluster_api_managers_lease_reads_as_held(capi_leader_elected) -> None:
    """Cluster API v1.14.2 with --leader-elect: the Lease it holds, read by the collection's own
    reader where the collection looks for it by default, is held - and held still a lease later
    (it renews) - and a Machine its status-writer left unanswered is followed at once."""
    from ansible_collections.lifecycle.machine.plugins.module_utils._machine import waits  # noqa: PLC0415
    from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import CONTROLLER, who_deletes  # noqa: PLC0415
    from ansible_collections.lifecycle.machine.plugins.module_utils._machine.liveness import HELD, default_lease, lease_actor, liveness  # noqa: PLC0415

    api = api_from_kubeconfig(capi_leader_elected["kubeconfig"])
    machine = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Machine",
        "metadata": {
            "name": "m",
            "namespace": "ns",
            "deletionTimestamp": micro_time()[:19] + "Z",
            "managedFields": [{"manager": "capi-manager", "operation": "Update", "subresource": "status", "time": micro_time(600)[:19] + "Z"}],
        },
    }
    ref = default_lease(machine)
    first = waits.read_lease(api, ref)
    said = liveness(first, time.time())
    assert said.state == HELD, said.reason
    assert first.lease["spec"]["leaseDurationSeconds"] == 15, first.lease
    print(f"{said.reason}")
    time.sleep(first.lease["spec"]["leaseDurationSeconds"] + 6)
    later = waits.read_lease(api, ref)
    assert liveness(later, time.time()).state == HELD, "renewed by the manager"
    assert later.lease["spec"]["renewTime"] != first.lease["spec"]["renewTime"]
    actor, _note = lease_actor(who_deletes(machine, "auto", 10, time.time()), machine, later, time.time())
    assert actor is not None and actor.who == CONTROLLER, actor
