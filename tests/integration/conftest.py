"""Fixtures for integration tests against the real local control plane.

The control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok) is started once per test session by ``hack/cluster.py``,
unless ``LIFECYCLE_MACHINE_KUBECONFIG`` points at one that is already running
(``make cluster-up`` writes ``.cluster/kubeconfig``; ``make test`` reuses it).

Cluster API's layout has a second one: the workload cluster, holding the Nodes
and Pods of the Machines of the management cluster above, reached through the
Secret ``<cluster>-kubeconfig`` of the Machines' namespace. ``workload_kubeconfig``
gives one (``LIFECYCLE_MACHINE_WORKLOAD_KUBECONFIG``, else ``.cluster/workload``,
else a private one started on first use). Until a test says otherwise, every
``namespace`` holds ``lm-test-kubeconfig`` pointing at the management cluster
itself: a self-hosted cluster, as the tests' Machines have always assumed.
"""

from __future__ import annotations

pytest_plugins = ["fault_fixtures", "victims", "awxserver"]

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool

COLLECTIONS_ROOT = cluster_tool.collections_root()
# Tests cancel runs with SIGINT, as AWX does: the runs must not inherit it ignored.
cluster_tool.restore_sigint()
sys.path.insert(0, str(COLLECTIONS_ROOT))

from khelpers import (
    CAPI_CLUSTER,
    FAKE_MACHINES,
    OPENSHIFT_MACHINES,
    capi_machine,
    capi_path,
    fake_node,
    kill_tree,
    node_ready,
    openshift_machine,
    put_fake_object,
    put_kubeconfig_secret,
    wait_for,
)

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

SHARED_STATE_DIR = REPO / ".cluster"


def private_control_planes() -> bool:
    """Whether this session starts control planes of its own instead of using the
    shared ones of ``make cluster-up``. LIFECYCLE_MACHINE_PRIVATE_CLUSTER=1 asks for
    it, so that two sessions never switch Cluster API generations (or Nodes) under
    each other; under pytest-xdist every worker starts its own, for the same reason."""
    return bool(os.environ.get("LIFECYCLE_MACHINE_PRIVATE_CLUSTER") or os.environ.get("PYTEST_XDIST_WORKER"))


def _control_plane(given: str, shared: Path, private: Path, workload: bool) -> Iterator[str]:
    """The kubeconfig of a control plane: ``given`` if set; the shared one if it runs
    and this session may use it; else one started in ``private`` and stopped when
    the session ends, pass or fail (a failed start included)."""
    if given:
        yield given
        return
    if not private_control_planes() and cluster_tool.is_running(shared):
        yield str(shared / "kubeconfig")
        return
    try:
        cluster_tool.up(private, quiet=True, workload=workload)
        yield str(private / "kubeconfig")
    finally:
        cluster_tool.down(private)


@pytest.fixture(scope="session")
def kubeconfig() -> Iterator[str]:
    """Path of an admin kubeconfig for a running (management) control plane."""
    private = REPO / ".tmp" / f"cluster-{os.getpid()}"
    yield from _control_plane(os.environ.get("LIFECYCLE_MACHINE_KUBECONFIG", ""), SHARED_STATE_DIR, private, workload=False)


@pytest.fixture(scope="session")
def workload_kubeconfig() -> Iterator[str]:
    """Path of an admin kubeconfig for a running workload control plane (no CRDs:
    the Nodes, Pods and PodDisruptionBudgets of a Cluster API cluster):
    ``LIFECYCLE_MACHINE_WORKLOAD_KUBECONFIG``; else ``.cluster/workload`` of
    ``make cluster-up`` when it runs and the session is not private; else one of
    this session's own, started on first use and stopped at its end."""
    private = REPO / ".tmp" / f"cluster-{os.getpid()}-workload"
    shared = SHARED_STATE_DIR / cluster_tool.WORKLOAD_SUBDIR
    yield from _control_plane(os.environ.get("LIFECYCLE_MACHINE_WORKLOAD_KUBECONFIG", ""), shared, private, workload=True)


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> KubeApi:
    """An admin KubeApi (the collection's own thin REST layer)."""
    return api_from_kubeconfig(kubeconfig)


@pytest.fixture(scope="session")
def workload_kube(workload_kubeconfig: str) -> KubeApi:
    """An admin KubeApi on the workload control plane."""
    return api_from_kubeconfig(workload_kubeconfig)


class WorkloadControlPlanes:
    """Private workload control planes started on demand under ``.tmp/``; ``stop()`` stops them all."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.state_dirs: list[Path] = []

    def start(self, count: int = 1) -> list[str]:
        """Start ``count`` more; their kubeconfig paths."""
        paths = []
        for _index in range(count):
            state_dir = REPO / ".tmp" / f"{self.prefix}-{len(self.state_dirs)}"
            self.state_dirs.append(state_dir)  # before the start: a half-started one is stopped too
            cluster_tool.up(state_dir, quiet=True, workload=True)
            paths.append(str(state_dir / "kubeconfig"))
        return paths

    def stop(self) -> None:
        for state_dir in reversed(self.state_dirs):
            cluster_tool.down(state_dir)


@pytest.fixture(scope="module")
def extra_workload_clusters() -> Iterator[Callable[[int], list[str]]]:
    """``extra_workload_clusters(n)``: start ``n`` more private workload control
    planes (for a Machine per workload cluster, say); their kubeconfig paths.
    Shared by the tests of one module, stopped after its last test, pass or fail."""
    planes = WorkloadControlPlanes(f"cluster-{os.getpid()}-extra-{uuid.uuid4().hex[:6]}")
    try:
        yield planes.start
    finally:
        planes.stop()


class CapiGeneration:
    """Which Cluster API generation the control plane serves; switched on demand
    (a v1beta1-only cluster as Cluster API 1.9/1.10, or v1beta1 + v1beta2 as 1.11+)."""

    def __init__(self, kubeconfig: str, kube: KubeApi):
        self.state = cluster_tool.state_from_kubeconfig(Path(kubeconfig))
        self.kube = kube
        self.current: str | None = None

    def use(self, generation: str) -> None:
        if generation != self.current:
            cluster_tool.set_capi_generation(self.state, generation)
            # The session's client caches discovery, which just changed.
            self.kube.discovery.invalidate()
            self.current = generation


@pytest.fixture(scope="session")
def capi_generation(kubeconfig: str, kube: KubeApi) -> CapiGeneration:
    return CapiGeneration(kubeconfig, kube)


@pytest.fixture(scope="session", params=["openshift", "v1beta1", "v1beta2"])
def flavour(request, capi_generation: CapiGeneration) -> str:
    """Each Machine flavour: OpenShift, Cluster API served as v1beta1 only, and Cluster API v1beta2.

    Session-scoped so pytest groups the tests by flavour and the control plane
    switches Cluster API generations as rarely as possible.
    """
    capi_generation.use("v1beta2" if request.param == "openshift" else request.param)
    return request.param


def machine_collection(flavour_name: str, namespace: str) -> str:
    if flavour_name == "openshift":
        return OPENSHIFT_MACHINES.format(ns=namespace)
    return capi_path(flavour_name, "machines", namespace)


@pytest.fixture
def make_machine(kube: KubeApi, flavour: str, capi_generation: CapiGeneration) -> Callable[..., dict]:
    """Create Machines of the current ``flavour``; released and deleted after the test.

    ``make_machine(namespace, name=None, node=None, hooks={"preDrain": [("n", "o")]}, ...)``:
    hooks become ``spec.lifecycleHooks`` (OpenShift) or hook annotations (Cluster API);
    ``node`` is written to ``status.nodeRef``.
    """
    created: list[str] = []

    def _make(namespace: str, name: str | None = None, node: str | None = None, hooks: dict | None = None, **extra) -> dict:
        capi_generation.use("v1beta2" if flavour == "openshift" else flavour)
        name = name or f"m-{uuid.uuid4().hex[:6]}"
        hooks = hooks or {}
        if flavour == "openshift":
            body = openshift_machine(name, {p: [{"name": n, "owner": o} for n, o in hs] for p, hs in hooks.items()}, **extra)
        else:
            annotations = dict(extra.pop("annotations", None) or {})
            prefixes = {"preDrain": "pre-drain", "preTerminate": "pre-terminate"}
            for point, point_hooks in hooks.items():
                for hook_name, owner in point_hooks:
                    annotations[f"{prefixes[point]}.delete.hook.machine.cluster.x-k8s.io/{hook_name}"] = owner
            with_infrastructure = extra.pop("infrastructure_object", True)
            body = capi_machine(name, flavour, annotations=annotations, **extra)
            if with_infrastructure:
                # Cluster API drains only while the InfraMachine exists: a Machine has one unless the test says otherwise.
                created.append(put_fake_object(kube, FAKE_MACHINES.format(ns=namespace), extra.get("infrastructure") or name))
        path = machine_collection(flavour, namespace)
        machine = kube.create(path, body)
        created.append(f"{path}/{name}")
        if node:
            node_ref = {"name": node} if flavour == "v1beta2" else {"apiVersion": "v1", "kind": "Node", "name": node}
            machine = kube.patch(f"{path}/{name}", {"status": {"nodeRef": node_ref}}, subresource_status=True)
        return machine

    yield _make
    _release_and_delete(kube, created)


def _release_and_delete(kube: KubeApi, paths: list[str]) -> None:
    """Drop the finalizers of the objects a fixture created and delete them, so
    their namespace can go away."""
    for path in paths:
        if kube.get(path) is not None:
            kube.patch(path, {"metadata": {"finalizers": None}})
            kube.delete(path)


@pytest.fixture
def capi_cluster(kube: KubeApi, flavour: str, make_machine) -> Callable[[str], str]:
    """For Cluster API flavours: create the Cluster ``lm-test`` in a namespace and
    one running control-plane Machine, so the Machine controller's skip rules
    (SPEC §2) do not apply to worker Machines. Returns the Cluster name.
    No-op for OpenShift."""

    created: list[str] = []

    def _make(namespace: str, deleting: bool = False) -> str:
        if flavour == "openshift":
            return "lm-test"
        # The finalizer keeps a Cluster marked for deletion in the API.
        metadata = {"name": CAPI_CLUSTER, "finalizers": ["lifecycle.machine.dev/test"]}
        kube.create(capi_path(flavour, "clusters", namespace), {"apiVersion": f"cluster.x-k8s.io/{flavour}", "kind": "Cluster", "metadata": metadata})
        created.append(capi_path(flavour, "clusters", namespace, CAPI_CLUSTER))
        make_machine(namespace, name="control-plane-0", labels={"cluster.x-k8s.io/control-plane": ""})
        if deleting:
            kube.delete(created[-1])
        return "lm-test"

    yield _make
    _release_and_delete(kube, created)


@pytest.fixture(scope="session")
def self_hosted_kubeconfig(kubeconfig: str) -> str:
    """The management cluster's own kubeconfig, self-contained (CA and token inline):
    what the Secret ``lm-test-kubeconfig`` of every ``namespace`` holds."""
    return cluster_tool.inline_kubeconfig(kubeconfig)


@pytest.fixture
def namespace(kube: KubeApi, self_hosted_kubeconfig: str) -> str:
    """A fresh namespace, deleted after the test (without waiting).

    It holds the Secret ``lm-test-kubeconfig`` (Cluster API's kubeconfig Secret of
    the cluster ``lm-test`` of ``capi_machine``) pointing at the management cluster
    itself, as a self-hosted management cluster has it: Cluster API Machines find
    their Nodes where the tests create them. A test of a separate workload cluster
    replaces it (``kubeconfig_secret``) or deletes it."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    put_kubeconfig_secret(kube, name, CAPI_CLUSTER, self_hosted_kubeconfig)
    yield name
    kube.delete(f"/api/v1/namespaces/{name}")


def _kubeconfig_text(kubeconfig_path_or_text: str | Path) -> str:
    """A kubeconfig's self-contained text: a path (a Path, or a one-line string naming
    an existing file) is read and its files inlined; anything else is kubeconfig text."""
    if isinstance(kubeconfig_path_or_text, Path):
        return cluster_tool.inline_kubeconfig(kubeconfig_path_or_text)
    text = str(kubeconfig_path_or_text)
    if "\n" not in text and not text.lstrip().startswith("{") and Path(text).expanduser().is_file():
        return cluster_tool.inline_kubeconfig(Path(text).expanduser())
    return text


@pytest.fixture
def kubeconfig_secret(kube: KubeApi) -> Callable[[str, str, str | Path], dict]:
    """``kubeconfig_secret(namespace, cluster_name, kubeconfig_path_or_text)``: create or
    replace Cluster API's Secret ``<cluster_name>-kubeconfig`` in ``namespace`` of the
    management cluster (``kube``), holding that kubeconfig (a path's files inlined);
    the Secret as stored. It goes with its namespace."""

    def _put(namespace: str, cluster_name: str, kubeconfig_path_or_text: str | Path) -> dict:
        return put_kubeconfig_secret(kube, namespace, cluster_name, _kubeconfig_text(kubeconfig_path_or_text))

    return _put


def _node_maker(kube: KubeApi) -> Iterator[Callable[..., str]]:
    """Create kwok-managed Nodes through ``kube``, wait until Ready, delete them afterwards."""
    created: list[str] = []

    def _make(name: str | None = None, labels: dict | None = None, wait_ready: bool = True) -> str:
        node_name = name or f"kwok-{uuid.uuid4().hex[:8]}"
        kube.create("/api/v1/nodes", fake_node(node_name, labels))
        created.append(node_name)
        if wait_ready:
            wait_for(lambda: node_ready(kube.get(f"/api/v1/nodes/{node_name}")), timeout=60, what=f"Node {node_name} Ready")
        return node_name

    yield _make
    for node_name in created:
        kube.delete(f"/api/v1/nodes/{node_name}")


@pytest.fixture
def make_node(kube: KubeApi) -> Iterator[Callable[..., str]]:
    """Create kwok-managed Nodes, wait until Ready, delete them after the test.
    ``make_node(name=None, labels=None, wait_ready=True)``; the Node's name."""
    yield from _node_maker(kube)


@pytest.fixture
def make_workload_node(workload_kube: KubeApi) -> Iterator[Callable[..., str]]:
    """``make_node`` in the workload cluster (``workload_kube``)."""
    yield from _node_maker(workload_kube)


def ansible_env(kubeconfig: str) -> dict:
    """The environment of an Ansible run a test starts (``cluster.ansible_environment``)."""
    return cluster_tool.ansible_environment(kubeconfig)


def run_module_with(
    kubeconfig: str, module: str, params: dict, *, check: bool = False, diff: bool = False, timeout: float = 600, env_extra: dict | None = None
) -> dict:
    """Run one of the collection's modules through ``ansible`` against ``kubeconfig`` (``K8S_AUTH_KUBECONFIG``);
    its result dict (``failed``/``msg`` on failure)."""
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,"]
    command += ["-m", f"lifecycle.machine.{module}", "-a", json.dumps(params)]
    if check:
        command.append("--check")
    if diff:
        command.append("--diff")
    env = ansible_env(kubeconfig)
    env["ANSIBLE_LOAD_CALLBACK_PLUGINS"] = "1"
    env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.posix.json"
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    env.update(env_extra or {})
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    try:
        # Progress rounds print where the work stands before the callback's JSON document.
        report = json.loads(proc.stdout[proc.stdout.index("{\n") if not proc.stdout.startswith("{") else 0 :])
        return report["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError(f"could not run {module}: rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}") from None


@pytest.fixture(scope="session")
def run_module(kubeconfig: str) -> Callable[..., dict]:
    """Run one of the collection's modules through ansible, as a playbook task would.

    ``run_module("machine_hook", {...}, check=False, diff=False)`` returns the
    module's result dict (``failed``/``msg`` on failure). Auth comes from
    ``K8S_AUTH_KUBECONFIG``, exactly as AWX credentials inject it
    (``via=`` another kubeconfig, say a fault proxy's).
    """

    def _run(
        module: str, params: dict, *, check: bool = False, diff: bool = False, timeout: float = 600, via: str | None = None, env_extra: dict | None = None
    ) -> dict:
        return run_module_with(via or kubeconfig, module, params, check=check, diff=diff, timeout=timeout, env_extra=env_extra)

    return _run


@pytest.fixture(scope="session")
def run_playbook(kubeconfig: str) -> Callable[..., subprocess.CompletedProcess]:
    """Run ``ansible-playbook`` on a playbook file with extra vars; returns the process."""

    def _run(
        playbook: str | Path, extra_vars: dict | None = None, check: bool = False, timeout: float = 900, env_extra: dict | None = None
    ) -> subprocess.CompletedProcess:
        command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
        if extra_vars:
            command += ["-e", json.dumps(extra_vars)]
        if check:
            command.append("--check")
        env = ansible_env(kubeconfig)
        env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
        env.update(env_extra or {})
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)

    return _run


def read_audit_log(
    path: Path, namespace: str | None = None, resource: str | None = None, subresource: str | None = None, verb: str | None = None
) -> list[dict]:
    """The events of an API server's audit log (hack/cluster.py's policy) that match every filter given."""
    events = []
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if namespace and ref.get("namespace") != namespace:
            continue
        if resource and ref.get("resource") != resource:
            continue
        if subresource is not None and ref.get("subresource", "") != subresource:
            continue
        if verb and event.get("verb") != verb:
            continue
        events.append(event)
    return events


@pytest.fixture(scope="session")
def audit_events(kubeconfig: str) -> Callable[..., list[dict]]:
    """The API server's own audit log (evictions, Pod and Node deletions; see
    hack/cluster.py): ``audit_events(namespace=..., subresource="eviction")``."""
    path = Path(kubeconfig).parent / "audit.log"
    if not path.exists():
        pytest.skip("this control plane keeps no audit log")

    def _read(namespace: str | None = None, resource: str | None = None, subresource: str | None = None, verb: str | None = None) -> list[dict]:
        return read_audit_log(path, namespace, resource, subresource, verb)

    return _read


# ---------------------------------------------------------------------------
# No test leaves a process behind

# Every process a test starts inherits this variable (ansible_env copies the
# environment), so the ones still alive when the session ends can be found even
# after their parent is gone.
SESSION_MARK = "LIFECYCLE_MACHINE_TEST_SESSION"
os.environ[SESSION_MARK] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"


def leftover_processes() -> list[tuple[int, str]]:
    """(pid, command) of processes still carrying this session's mark, but this process."""
    return cluster_tool.marked_processes(SESSION_MARK, os.environ[SESSION_MARK])


def pytest_collection_modifyitems(config, items) -> None:
    """A test file's ``EXTENDED_FLAVOURS`` names the flavours whose variants of its tests ``make test``
    leaves out, to stay within CI's hour: they are marked ``integration_extended``, which
    ``make integration INTEGRATION_ALL=1`` (and ``make integration-all``) runs too. The workflow tests
    name the Cluster API v1beta1-only flavour: what differs between the two generations (where hooks,
    conditions and the drain's records live) the per-module tests prove on every flavour. A test marked
    ``every_generation`` is about what differs between the Cluster API generations: make test keeps
    all of its variants."""
    for item in items:
        extended = () if item.get_closest_marker("every_generation") else getattr(item.module, "EXTENDED_FLAVOURS", ())
        callspec = getattr(item, "callspec", None)
        if extended and callspec is not None and callspec.params.get("flavour") in extended:
            item.add_marker(pytest.mark.integration_extended)


def pytest_sessionfinish(session, exitstatus) -> None:
    """Fail the run when a test left a process running (and stop it)."""
    if getattr(session.config.option, "numprocesses", None) and not hasattr(session.config, "workerinput"):
        return  # the pytest-xdist controller: its workers check what their own tests started
    left = leftover_processes()
    if not left:
        return
    for pid, _command in left:
        kill_tree(pid)
    lines = "\n".join(f"  {pid}: {command[:200]}" for pid, command in left)
    session.config.get_terminal_writer().line(f"\nProcesses started by the tests were still running at the end (now stopped):\n{lines}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def capi_plane(request: pytest.FixtureRequest) -> Iterator[dict]:
    """Management and workload control planes with the real Cluster API manager (watch
    filter ``real-capi``), stopped after the test; skips as ``realctl.binaries`` says."""
    import realctl  # noqa: PLC0415 - it imports this file

    yield from realctl.plane(request, "capi")


@pytest.fixture
def mapi_plane(request: pytest.FixtureRequest) -> Iterator[dict]:
    """A control plane with the real OpenShift machine controller, stopped after the test."""
    import realctl  # noqa: PLC0415 - it imports this file

    yield from realctl.plane(request, "mapi")


@pytest.fixture
def machine_node(kube: KubeApi, namespace: str, make_node, make_machine, capi_cluster):
    """A Machine of the current flavour (in a Cluster with a control plane, for Cluster API) and its kwok Node."""

    def _make(**extra) -> tuple[str, str]:
        capi_cluster(namespace)
        node = make_node()
        machine = make_machine(namespace, node=node, **extra)["metadata"]["name"]
        return machine, node

    return _make
