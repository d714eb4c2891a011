"""The collection's hook controllers beside the real machine controllers.

The real Cluster API manager and the real OpenShift machine controller (run by
hack/controllers.py on control planes of their own) delete a Machine carrying a
pre-drain and a pre-terminate hook; the hooks are served by the collection,
either by the ``hook_controller`` role (one ``ansible-playbook`` run serving
both points, started before the deletion) or by ``ansible-rulebook`` with the
``machine_gates`` source and the ``serve_gates`` rulebook. The hook's work
waits until the test lets it finish, so each test proves that:

- the work starts when the Machine reaches the gate, and the controller holds
  there (nothing cordoned, evicted or deleted) until the hook is released;
- once released, the controller goes on by itself: it drains the Node, stops at
  the next gate, and after that deletes the infrastructure, the Node and the
  Machine (the audit log shows the controller's user agent evicting and deleting);
- the ``<Point><Hook>Succeeded`` conditions the collection records are kept
  through every later status write of the controller, in every version of the
  Machine a watch sees until it is gone.

They run like the smoke tests of test_real_controllers.py (``make conformance``,
or this file named to pytest); the OpenShift one served by the role is also in
make test's fixed subset (``real_controllers_subset``).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import controllers
import pytest
import realctl
from conftest import ansible_env
from khelpers import stop_process, wait_for
from rulebook import Rulebook

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]

HOOKS = {"preDrain": "drain-gate", "preTerminate": "terminate-gate"}
CONDITIONS = {"preDrain": "PreDrainDrainGateSucceeded", "preTerminate": "PreTerminateTerminateGateSucceeded"}
HOLD_SECONDS = 4  # the controller is watched this long at each gate while the work waits
GONE_TIMEOUT = 90

# The hook's work: say it started, then wait until the test releases it.
WORK = """\
- name: Note that the work of the gate started
  ansible.builtin.file:
    path: "{gate_dir}/{{{{ hook_controller_point }}}}.started"
    state: touch
    mode: "0644"

- name: Wait until the test lets the work finish
  ansible.builtin.wait_for:
    path: "{gate_dir}/{{{{ hook_controller_point }}}}.release"
    timeout: 240
"""

ROLE_PLAY = """\
- name: Serve both gates of one Machine with the hook_controller role
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    common: &common
      hook_controller_hook_owner: {owner}
      hook_controller_machine: "{{{{ machine }}}}"
      hook_controller_namespace: "{{{{ namespace }}}}"
      hook_controller_tasks_file: "{{{{ tasks_file }}}}"
      hook_controller_wait_timeout: 180
  tasks:
    - name: Serve the preDrain hook
      ansible.builtin.include_role:
        name: lifecycle.machine.hook_controller
      vars:
        <<: *common
        hook_controller_point: preDrain
        hook_controller_hook_name: {pre_drain}

    - name: Keep the preDrain report
      ansible.builtin.set_fact:
        pre_drain_report: "{{{{ hook_controller_report }}}}"

    - name: Serve the preTerminate hook
      ansible.builtin.include_role:
        name: lifecycle.machine.hook_controller
      vars:
        <<: *common
        hook_controller_point: preTerminate
        hook_controller_hook_name: {pre_terminate}

    - name: Save the reports
      ansible.builtin.copy:
        content: "{{{{ {{'preDrain': pre_drain_report, 'preTerminate': hook_controller_report}} | to_json }}}}"
        dest: "{{{{ report_path }}}}"
        mode: "0644"
"""


# ---------------------------------------------------------------------------
# What each controller's world looks like


class World:
    """One Machine the real controller will delete, with its Node and a running Pod."""

    kind = ""
    agent = ""  # the controller's user agent in the audit log
    kubeconfig: Path  # where the Machines are (and the collection connects)
    kube: KubeApi  # the Machines' API server
    nodes: KubeApi  # the Node's API server
    audit: Path  # the audit log of the Node's API server
    machines = ""  # the Machines' collection path
    namespace = ""
    pod_namespace = ""
    worker = "worker-0"

    @property
    def path(self) -> str:
        return f"{self.machines}/{self.worker}"

    def machine(self) -> dict | None:
        return self.kube.get(self.path)

    def build(self) -> None:
        """Create the Machine, its infrastructure, its Node and the Pod; return once the controller runs it."""
        raise NotImplementedError

    def hooks(self, point: str) -> list[str]:
        raise NotImplementedError

    def node_cordoned(self) -> bool:
        return bool(((self.nodes.get(f"/api/v1/nodes/{self.worker}") or {}).get("spec") or {}).get("unschedulable"))

    def node_exists(self) -> bool:
        return self.nodes.get(f"/api/v1/nodes/{self.worker}") is not None

    def pod_state(self) -> str:
        pod = self.nodes.get(f"/api/v1/namespaces/{self.pod_namespace}/pods/app-0")
        return "gone" if pod is None else ("terminating" if pod["metadata"].get("deletionTimestamp") else "running")

    def infrastructure_exists(self) -> bool:
        raise NotImplementedError

    def wait_at_pre_drain(self) -> None:
        """Until the controller itself says it waits for the pre-drain hooks."""

    def before_drain(self) -> str | None:
        """What moved past the pre-drain gate, or None."""
        if self.node_cordoned():
            return "the Node is cordoned"
        return None if self.pod_state() == "running" else f"the Pod is {self.pod_state()}"

    def wait_drained(self) -> None:
        """Until the controller has drained the Node and says so."""

    def wait_at_pre_terminate(self) -> None:
        """Until the controller itself says it waits for the pre-terminate hooks."""

    def before_terminate(self) -> str | None:
        if self.machine() is None:
            return "the Machine is gone"
        if not self.infrastructure_exists():
            return "the infrastructure was deleted"
        return None if self.node_exists() else "the Node is gone"


class CapiWorld(World):
    kind = "capi"
    agent = "cluster-api-controller-manager"

    def __init__(self, plane: dict):
        state_dir = Path(plane["state_dir"])
        workload_kubeconfig = Path(plane["workload_kubeconfig"])
        self.kubeconfig = state_dir / "kubeconfig"
        self.kube = api_from_kubeconfig(str(self.kubeconfig))
        self.nodes = api_from_kubeconfig(str(workload_kubeconfig))
        self.audit = workload_kubeconfig.parent / "audit.log"
        self.namespace, self.pod_namespace = "hooks-capi", "apps"
        self.machines = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{self.namespace}/machines"
        self.workload_kubeconfig = workload_kubeconfig

    def build(self) -> None:
        realctl.capi_worker_with_hooks(
            self.kube,
            self.nodes,
            self.workload_kubeconfig,
            namespace=self.namespace,
            cluster="real",
            worker=self.worker,
            hooks=HOOKS,
            pod_namespace=self.pod_namespace,
        )

    def hooks(self, point: str) -> list[str]:
        prefix = realctl.CAPI_HOOK_PREFIX[point] + "/"
        annotations = ((self.machine() or {}).get("metadata") or {}).get("annotations") or {}
        return [key[len(prefix) :] for key in annotations if key.startswith(prefix)]

    def deleting_reason(self) -> str:
        return realctl.v1beta2_condition(self.machine(), "Deleting").get("reason", "")

    def infrastructure_exists(self) -> bool:
        return self.kube.get(f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{self.namespace}/fakemachines/{self.worker}") is not None

    def wait_at_pre_drain(self) -> None:
        wait_for(lambda: self.deleting_reason() == "WaitingForPreDrainHook", timeout=60, what="Deleting reason WaitingForPreDrainHook")

    def before_drain(self) -> str | None:
        reason = self.deleting_reason()
        return f"Deleting reason {reason!r}" if reason != "WaitingForPreDrainHook" else super().before_drain()

    def wait_drained(self) -> None:
        wait_for(
            lambda: realctl.v1beta1_condition(self.machine(), "DrainingSucceeded").get("status") == "True",
            timeout=120,
            what="v1beta1 DrainingSucceeded True",
        )

    def wait_at_pre_terminate(self) -> None:
        wait_for(lambda: self.deleting_reason() == "WaitingForPreTerminateHook", timeout=60, what="Deleting reason WaitingForPreTerminateHook")

    def before_terminate(self) -> str | None:
        reason = self.deleting_reason()
        return f"Deleting reason {reason!r}" if reason != "WaitingForPreTerminateHook" else super().before_terminate()


class MapiWorld(World):
    kind = "mapi"
    agent = "mapi-controller"

    def __init__(self, plane: dict):
        state_dir = Path(plane["state_dir"])
        self.kubeconfig = state_dir / "kubeconfig"
        self.kube = self.nodes = api_from_kubeconfig(str(self.kubeconfig))
        self.audit = state_dir / "audit.log"
        self.namespace = self.pod_namespace = "hooks-mapi"
        self.machines = f"/apis/machine.openshift.io/v1beta1/namespaces/{self.namespace}/machines"

    def build(self) -> None:
        realctl.create_namespace(self.kube, self.namespace)
        hooks = {point: [{"name": name, "owner": realctl.HOOK_OWNER}] for point, name in HOOKS.items()}
        realctl.create(self.kube, controllers.mapi_machine(self.worker, self.namespace, hooks=hooks))
        provider_id = wait_for(lambda: ((self.machine() or {}).get("spec") or {}).get("providerID"), timeout=60, what="spec.providerID")
        realctl.kwok_node(self.kube, self.worker, provider_id)
        realctl.running_pod(self.kube, self.namespace, "app-0", self.worker)
        wait_for(lambda: ((self.machine() or {}).get("status") or {}).get("phase") == "Running", timeout=90, what="phase Running")

    def condition(self, kind: str) -> dict:
        return next((c for c in ((self.machine() or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})

    def hooks(self, point: str) -> list[str]:
        return [hook["name"] for hook in (((self.machine() or {}).get("spec") or {}).get("lifecycleHooks") or {}).get(point) or []]

    def infrastructure_exists(self) -> bool:
        return self.kube.get(f"/api/v1/namespaces/{self.namespace}/configmaps/{self.worker}-fake-instance") is not None

    def wait_at_pre_drain(self) -> None:
        wait_for(lambda: self.condition("Drainable").get("status") == "False", timeout=60, what="Drainable condition False")

    def before_drain(self) -> str | None:
        if self.condition("Drained"):
            return f"Drained condition {self.condition('Drained')}"
        return super().before_drain()

    def wait_drained(self) -> None:
        wait_for(lambda: self.condition("Drained").get("status") == "True", timeout=120, what="Drained condition True")

    def wait_at_pre_terminate(self) -> None:
        wait_for(lambda: self.condition("Terminable").get("status") == "False", timeout=60, what="Terminable condition False")


# ---------------------------------------------------------------------------
# Following the Machine


class History:
    """Every version of the Machine a watch sees, from before its deletion until it is gone:
    ``versions`` holds ``{condition type: (status, reason)}`` of ``status.conditions`` per version."""

    def __init__(self, world: World):
        self.world = world
        self.versions: list[dict[str, tuple[str, str]]] = []
        self.gone = threading.Event()
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)

    def __enter__(self) -> History:
        self.thread.start()
        assert self.ready.wait(30), "the watch on the Machine did not start"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join(15)

    def _note(self, machine: dict) -> None:
        conditions = (machine.get("status") or {}).get("conditions") or []
        self.versions.append({c.get("type", ""): (c.get("status", ""), c.get("reason", "")) for c in conditions})

    def _follow(self) -> None:
        # A client of its own: the test's requests go on meanwhile.
        kube, selector = api_from_kubeconfig(str(self.world.kubeconfig)), f"metadata.name={self.world.worker}"
        items, version = kube.list_with_version(self.world.machines, field_selector=selector)
        for machine in items:
            self._note(machine)
        self.ready.set()
        while not self.stop.is_set() and not self.gone.is_set():
            for event in kube.watch(self.world.machines, resource_version=version, field_selector=selector, timeout=2):
                machine = event.get("object") or {}
                if event.get("type") == "ERROR":  # the position expired: read again (a version may be missed)
                    items, version = kube.list_with_version(self.world.machines, field_selector=selector)
                    for item in items:
                        self._note(item)
                    break
                version = (machine.get("metadata") or {}).get("resourceVersion") or version
                self._note(machine)
                if event.get("type") == "DELETED":
                    self.gone.set()
                    break

    def kept(self, condition_type: str) -> int:
        """Fail unless ``condition_type`` is True in every version from the first that has it;
        how many later versions changed the controller's own conditions."""
        first = next((i for i, v in enumerate(self.versions) if v.get(condition_type, ("",))[0] == "True"), None)
        assert first is not None, f"{condition_type}=True was never seen on the Machine: {self.versions}"
        later = self.versions[first:]
        dropped = [i for i, version in enumerate(later) if version.get(condition_type, ("",))[0] != "True"]
        assert not dropped, f"{condition_type} was lost by a later status write: {later}"

        def others(version: dict) -> dict:
            return {k: v for k, v in version.items() if k not in CONDITIONS.values()}

        return sum(1 for before, after in itertools.pairwise(later) if others(before) != others(after))


# ---------------------------------------------------------------------------
# Serving the hooks


class RoleServer:
    """One ansible-playbook run of the hook_controller role for both points (started once the Machine exists)."""

    early = False

    def __init__(self, world: World, tmp_path: Path, tasks_file: Path):
        self.world, self.tmp_path, self.tasks_file = world, tmp_path, tasks_file
        self.report_path = tmp_path / "report.json"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        play = self.tmp_path / "serve.yml"
        play.write_text(ROLE_PLAY.format(owner=realctl.HOOK_OWNER, pre_drain=HOOKS["preDrain"], pre_terminate=HOOKS["preTerminate"]))
        variables = {"machine": self.world.worker, "namespace": self.world.namespace, "tasks_file": str(self.tasks_file), "report_path": str(self.report_path)}
        command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(play), "-e", json.dumps(variables)]
        self.log = (self.tmp_path / "role.log").open("w")
        self.proc = subprocess.Popen(command, env=ansible_env(str(self.world.kubeconfig)), stdout=self.log, stderr=subprocess.STDOUT, text=True)

    def output(self) -> str:
        return (self.tmp_path / "role.log").read_text()

    def finish(self) -> None:
        assert self.proc is not None
        code = self.proc.wait(timeout=60)
        assert code == 0, self.output()[-6000:]
        report = json.loads(self.report_path.read_text())
        label = f"{self.world.namespace}/{self.world.worker}"
        for point in HOOKS:
            assert report[point]["served"] == [label], report
            assert report[point]["failed"] == [], report

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.log.close()


class RulebookServer:
    """ansible-rulebook with the machine_gates source and the serve_gates rulebook
    (started while the Machine is being built: it follows the namespace from the start)."""

    early = True

    def __init__(self, world: World, tmp_path: Path, tasks_file: Path):
        self.world = world
        variables = {
            "hook_owner": realctl.HOOK_OWNER,
            "hook_name": "",
            "hook_points": list(HOOKS),
            "machine_namespace": world.namespace,
            "hook_tasks_file": str(tasks_file),
        }
        self.rulebook = Rulebook("lifecycle.machine.serve_gates", variables, ansible_env(str(world.kubeconfig)), tmp_path / "rulebook")

    def start(self) -> None:
        self.rulebook.start()

    def output(self) -> str:
        return self.rulebook.output()

    def finish(self) -> None:
        output = self.output()
        for point, hook in HOOKS.items():
            assert f"reached the {point} gate of hook {hook}" in output, output[-6000:]
        assert self.rulebook.stop() is not None, "ansible-rulebook had to be killed: it did not stop on SIGINT"

    def stop(self) -> None:
        self.rulebook.stop()


SERVERS = {"role": RoleServer, "rulebook": RulebookServer}
WORLDS = {"capi": CapiWorld, "mapi": MapiWorld}


# ---------------------------------------------------------------------------


class Gates:
    """The work's markers: ``<point>.started`` written by the work, ``<point>.release`` by the test."""

    def __init__(self, world: World, directory: Path):
        self.world, self.dir = world, directory
        self.dir.mkdir()

    def started(self, point: str) -> bool:
        return (self.dir / f"{point}.started").exists()

    def wait_started(self, point: str) -> None:
        wait_for(lambda: self.started(point), timeout=60, interval=0.1, what=f"the {point} work to start")

    def release(self, point: str) -> float:
        """Let the work finish; the seconds until the hook is gone."""
        released = time.monotonic()
        (self.dir / f"{point}.release").touch()
        wait_for(lambda: HOOKS[point] not in self.world.hooks(point), timeout=60, interval=0.1, what=f"the {point} hook released")
        return time.monotonic() - released


def delete_through_both_gates(world: World, gates: Gates) -> dict[str, float]:
    """Delete the Machine and follow the controller through both gates to the end; the figures."""
    figures: dict[str, float] = {}
    deleted_at = time.monotonic()
    world.kube.delete(world.path)

    # Gate 1: the work runs, the controller waits for the pre-drain hook.
    gates.wait_started("preDrain")
    figures["deletion to preDrain work"] = time.monotonic() - deleted_at
    world.wait_at_pre_drain()
    assert not gates.started("preTerminate"), "the preTerminate work started before the drain"
    realctl.hold(world.before_drain, HOLD_SECONDS)
    assert HOOKS["preDrain"] in world.hooks("preDrain")
    figures["preDrain work done to hook gone"] = gates.release("preDrain")

    # The controller drains by itself; gate 2: the work runs, the controller waits.
    world.wait_drained()
    assert world.node_cordoned()
    wait_for(lambda: world.pod_state() == "gone", timeout=30, what="the evicted Pod to be gone")
    gates.wait_started("preTerminate")
    world.wait_at_pre_terminate()
    realctl.hold(world.before_terminate, HOLD_SECONDS)
    assert HOOKS["preTerminate"] in world.hooks("preTerminate")
    released_at = time.monotonic()
    figures["preTerminate work done to hook gone"] = gates.release("preTerminate")

    # The controller deletes the infrastructure, the Node, then lets the Machine go.
    wait_for(lambda: world.machine() is None, timeout=GONE_TIMEOUT, what="the Machine to be gone")
    figures["preTerminate released to Machine gone"] = time.monotonic() - released_at
    assert not world.infrastructure_exists()
    assert not world.node_exists()
    return figures


@pytest.mark.parametrize(
    ("kind", "serving"),
    [
        pytest.param("mapi", "role", marks=pytest.mark.real_controllers_subset, id="openshift-role"),
        pytest.param("mapi", "rulebook", id="openshift-rulebook"),
        pytest.param("capi", "role", id="clusterapi-role"),
        pytest.param("capi", "rulebook", id="clusterapi-rulebook"),
    ],
)
def test_the_real_controller_holds_at_each_gate_the_collection_serves(kind: str, serving: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    plane = request.getfixturevalue(f"{kind}_plane")
    started = time.monotonic()
    world = WORLDS[kind](plane)
    gates = Gates(world, tmp_path / "gates")
    tasks_file = tmp_path / "work.yml"
    tasks_file.write_text(WORK.format(gate_dir=gates.dir))
    server = SERVERS[serving](world, tmp_path, tasks_file)
    history = History(world)

    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(server.start) if server.early else None
        try:
            world.build()
            if starting is None:
                server.start()
            else:
                starting.result()
            with history:
                figures = delete_through_both_gates(world, gates)
                wait_for(history.gone.is_set, timeout=10, what="the watch to see the Machine go")
            server.finish()
        finally:
            if starting is not None:
                wait([starting])  # a start still going on is stopped once it is done
            server.stop()

    realctl.assert_the_controller_acted(world.audit, world.pod_namespace, "app-0", world.worker, world.agent)

    # The collection's conditions outlive the controller's status writes.
    writes_after_pre_drain = history.kept(CONDITIONS["preDrain"])
    history.kept(CONDITIONS["preTerminate"])
    assert writes_after_pre_drain >= 1, f"the controller never wrote its conditions after {CONDITIONS['preDrain']}: {history.versions}"
    report = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in figures.items())
    print(
        f"{kind} served by the {serving}: {report}; {len(history.versions)} versions of the Machine seen,"
        f" {writes_after_pre_drain} status writes of the controller kept {CONDITIONS['preDrain']};"
        f" {time.monotonic() - started:.1f} s in all"
    )
