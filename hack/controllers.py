"""Run the real machine controllers beside a local control plane of hack/cluster.py.

The collection imitates two controllers; this starts either one, built from the
Go module proxy by hack/build-controllers.sh, next to a control plane of its own:

- ``capi``: the Cluster API core manager (sigs.k8s.io/cluster-api, the version
  pinned in tools/capi/go.mod) on a management control plane in ``<dir>``, with
  a workload one in ``<dir>/workload`` (unless ``--no-workload``). The CAPI CRDs
  of hack/crds are replaced by the release's own (server-side apply); the
  webhook server gets a self-signed certificate (nothing calls it: the webhooks
  are not registered, so there is no defaulting, validation or conversion; write
  v1beta2 objects, with the defaults set by hand); ``--watch-filter`` limits it
  to the Clusters and Machines labelled ``cluster.x-k8s.io/watch-filter=<value>``.
- ``mapi``: OpenShift's generic Machine API machine controller (machine, drain
  and nodelink controllers of github.com/openshift/machine-api-operator, tools/mapi)
  with a fake actuator (a ConfigMap ``<machine>-fake-instance`` per instance), on
  one control plane in ``<dir>`` with the real Machine CRD of openshift/api.

    python3 hack/controllers.py up capi [--dir .tmp/capi] [--watch-filter real-capi] [--no-workload]
    python3 hack/controllers.py up mapi [--dir .tmp/mapi] [--namespace NS]
    python3 hack/controllers.py down capi|mapi [--dir DIR]    stop the controller and its control planes
    python3 hack/controllers.py status capi|mapi [--dir DIR]
    python3 hack/controllers.py build [capi] [mapi]          build (or find in the cache) the binaries

The controller's log is ``<dir>/capi-manager.log`` or ``<dir>/mapi-controller.log``;
kubeconfigs and audit logs are where hack/cluster.py puts them. Traps and the
objects a Machine needs: docs/controllers.md. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cluster as cluster_tool  # hack/ is not a package

REPO = cluster_tool.REPO
BUILD_SCRIPT = cluster_tool.HACK / "build-controllers.sh"
BINARY = {"capi": "capi-manager", "mapi": "mapi-controller"}
DEFAULT_DIR = {"capi": REPO / ".tmp" / "capi", "mapi": REPO / ".tmp" / "mapi"}
DEFAULT_WATCH_FILTER = "real-capi"
WATCH_FILTER_LABEL = "cluster.x-k8s.io/watch-filter"
BUILD_COMMAND = "bash hack/build-controllers.sh"  # or `make conformance`, which runs it


class NotBuilt(RuntimeError):
    """A controller binary is not in the cache (``build_controllers(build=False)``)."""


def build_controllers(names: tuple[str, ...] = ("capi", "mapi"), build: bool = True) -> dict[str, Path]:
    """The cache directory of each controller (binary, ``crds/``, ``version``),
    building what is missing when ``build``; without it, raise ``NotBuilt``
    naming the command that builds them."""
    command = ["bash", str(BUILD_SCRIPT), *([] if build else ["--check"]), *names]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        if not build:
            raise NotBuilt(f"the real controller binaries are not built ({', '.join(names)}); build them with `{BUILD_COMMAND}`")
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    found = {}
    for line in result.stdout.splitlines():
        name, _space, directory = line.partition(" ")
        if name in BINARY and directory:
            found[name] = Path(directory)
    return found


def _kubectl(state: dict, *args: str) -> subprocess.CompletedProcess:
    kubeconfig = Path(state["state_dir"]) / "kubeconfig"
    return subprocess.run([str(Path(state["bin_dir"]) / "kubectl"), "--kubeconfig", str(kubeconfig), *args], check=True, capture_output=True, text=True)


def apply_crds(state: dict, crd_dir: Path, timeout: float = 90) -> list[str]:
    """Server-side apply every CRD of ``crd_dir`` (as field manager ``kubectl``, the
    one that applied hack/crds, so fields the release's CRDs do not have go away)
    and wait until each is Established; their names."""
    files = sorted(crd_dir.glob("*.yaml"))
    result = _kubectl(state, "apply", "--server-side", "--force-conflicts", "-o", "name", *[arg for f in files for arg in ("-f", str(f))])
    names = [line.split("/", 1)[1] for line in result.stdout.split() if "/" in line]

    def established() -> bool | str:
        for name in names:
            status, body = cluster_tool._api(state, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conditions = {c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []} if status == 200 else {}
            if conditions.get("Established") != "True":
                return f"{name} not Established (HTTP {status})"
        return True

    cluster_tool._wait(established, timeout, "the controller's CRDs to be established")
    return names


def _webhook_cert(directory: Path) -> None:
    """A self-signed serving certificate for 127.0.0.1: Cluster API's webhook
    server will not start without one, though nothing calls it here."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / "tls.crt").exists():
        return
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "7",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(directory / "tls.key"),
            "-out",
            str(directory / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )


def _http_ok(url: str) -> bool | str:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}: {exc.read().decode(errors='replace')[-300:]}"
    except OSError as exc:
        return str(exc)


def _log_has(path: Path, *needles: str) -> bool:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return any(all(needle in line for needle in needles) for line in text.splitlines())


def _start_controller(state_dir: Path, name: str, argv: list[str], *, ready, timeout: float, extra: dict) -> dict:
    """Start ``argv`` as component ``name`` of the control plane in ``state_dir``
    (so hack/cluster.py's ``down`` stops it first), wait until ``ready()`` is True."""
    state = cluster_tool._read_state(state_dir)
    state["pids"][name] = cluster_tool._start(name, argv, state_dir)
    state.setdefault("controller", {}).update({"name": name, **extra})
    (state_dir / "state.json").write_text(json.dumps(state))
    log = state_dir / f"{name}.log"

    def up() -> bool | str:
        if not cluster_tool._pid_alive(state["pids"][name]):
            raise RuntimeError(f"{name} exited during start-up:\n{cluster_tool._tail(log, 40)}")
        return ready()

    started = time.monotonic()
    cluster_tool._wait(up, timeout, f"{name} to be ready", f"(log: {log})")
    state["controller"]["startup_seconds"] = round(time.monotonic() - started, 1)
    (state_dir / "state.json").write_text(json.dumps(state))
    return state


def controller_running(state_dir: Path, name: str) -> bool:
    state = cluster_tool._read_state(Path(state_dir))
    pid = (state.get("pids") or {}).get(name)
    return bool(pid) and cluster_tool.is_running(Path(state_dir))


_TITLE = {"capi": "Cluster API controller", "mapi": "OpenShift machine controller"}


def _already_running(state_dir: Path, kind: str, quiet: bool) -> bool:
    """Whether ``kind``'s controller already runs from ``state_dir`` (then ``up`` starts nothing)."""
    running = controller_running(state_dir, BINARY[kind])
    if running and not quiet:
        print(f"{_TITLE[kind]} already running; kubeconfig: {state_dir / 'kubeconfig'}")
    return running


def up_capi(
    state_dir: Path, watch_filter: str = DEFAULT_WATCH_FILTER, *, workload: bool = True, build: bool = True, verbosity: int = 4, quiet: bool = False
) -> dict:
    """A management control plane in ``state_dir`` (and a workload one in
    ``<state_dir>/workload`` when ``workload``) with the Cluster API core manager
    running against the management one; its state, with ``controller`` (version,
    watch filter, ports) and, when started, ``workload_kubeconfig``. Stop it all
    with ``down``; on a failed start, what was started is stopped again."""
    state_dir = Path(state_dir).resolve()
    if _already_running(state_dir, "capi", quiet):
        return cluster_tool._read_state(state_dir)
    built = build_controllers(("capi",), build=build)["capi"]
    try:
        state = cluster_tool.up(state_dir, quiet=True)
        if workload:
            cluster_tool.up(state_dir / cluster_tool.WORKLOAD_SUBDIR, quiet=True, workload=True)
        # The release's CRDs replace hack/crds' three (and bring the ten others its
        # informers and CRD migrator expect). Never set_capi_generation() here: the
        # manager's CRD migrator owns these CRDs now.
        apply_crds(state, built / "crds")
        state = start_capi_manager(state_dir, built, watch_filter=watch_filter, verbosity=verbosity)
    except BaseException:
        down(state_dir)
        raise
    if workload:
        state["workload_kubeconfig"] = str(state_dir / cluster_tool.WORKLOAD_SUBDIR / "kubeconfig")
    if not quiet:
        print(f"Cluster API {state['controller']['version']} running (watch filter {watch_filter or 'none'}); log: {state_dir / 'capi-manager.log'}")
        print(f"management kubeconfig: {state_dir / 'kubeconfig'}")
        if workload:
            print(f"workload kubeconfig:   {state['workload_kubeconfig']}")
    return state


def start_capi_manager(
    state_dir: Path, built: Path, *, watch_filter: str = DEFAULT_WATCH_FILTER, verbosity: int = 4, kubeconfig: Path | None = None, args: tuple[str, ...] = ()
) -> dict:
    """Start the Cluster API core manager of ``built`` (a directory of :func:`build_controllers`) against the
    control plane in ``state_dir``, whose CRDs are the release's already (:func:`apply_crds`): as the identity of
    ``kubeconfig`` (default the components' admin one), with ``args`` added (``--machine-concurrency=100``, say).
    Returns the state once the Machine controller has started its workers; :func:`stop_capi_manager` stops it."""
    state_dir = Path(state_dir).resolve()
    _webhook_cert(state_dir / "capi-certs")
    ports = {"webhook": cluster_tool._free_port(), "health": cluster_tool._free_port()}
    argv = [
        str(built / BINARY["capi"]),
        f"--kubeconfig={kubeconfig or state_dir / 'components.kubeconfig'}",
        "--leader-elect=false",
        f"--webhook-port={ports['webhook']}",
        f"--webhook-cert-dir={state_dir / 'capi-certs'}",
        f"--health-addr=127.0.0.1:{ports['health']}",
        "--diagnostics-address=0",
        "--logging-format=json",
        f"--v={verbosity}",
        *args,
    ]
    if watch_filter:
        argv.append(f"--watch-filter={watch_filter}")
    log = state_dir / "capi-manager.log"
    if log.exists():
        log.unlink()  # a manager started again is ready when its own workers start

    def ready() -> bool | str:
        healthy = _http_ok(f"http://127.0.0.1:{ports['health']}/readyz")
        if healthy is not True:
            return f"/readyz: {healthy}"
        # /readyz is only the webhook server: wait for the Machine controller's workers too.
        return _log_has(log, '"Starting workers"', '"controller":"machine"') or "the machine controller has not started its workers"

    version = (built / "version").read_text().split()[-1]
    extra = {"version": version, "watch_filter": watch_filter, "ports": ports, "binary_dir": str(built), "args": list(args)}
    return _start_controller(state_dir, BINARY["capi"], argv, ready=ready, timeout=180, extra=extra)


def stop_capi_manager(state_dir: Path) -> None:
    """Stop the Cluster API manager started from ``state_dir``, leaving its control plane running."""
    state = cluster_tool._read_state(Path(state_dir))
    pid = (state.get("pids") or {}).pop(BINARY["capi"], None)
    if pid:
        cluster_tool._stop([pid])
    (Path(state_dir) / "state.json").write_text(json.dumps(state))


def up_mapi(state_dir: Path, namespace: str = "", *, build: bool = True, verbosity: int = 3, quiet: bool = False) -> dict:
    """A control plane in ``state_dir`` with OpenShift's machine controller (and
    drain and nodelink controllers) running against it, reconciling the Machines
    of ``namespace`` (every namespace when empty); its state. Stop it with ``down``."""
    state_dir = Path(state_dir).resolve()
    if _already_running(state_dir, "mapi", quiet):
        return cluster_tool._read_state(state_dir)
    built = build_controllers(("mapi",), build=build)["mapi"]
    try:
        state = cluster_tool.up(state_dir, quiet=True)
        apply_crds(state, built / "crds")  # openshift/api's Machine CRD replaces hack/crds' one
        ports = {"health": cluster_tool._free_port()}
        argv = [
            str(built / BINARY["mapi"]),
            f"--kubeconfig={state_dir / 'components.kubeconfig'}",
            f"--health-addr=127.0.0.1:{ports['health']}",
            f"--v={verbosity}",
        ]
        if namespace:
            argv.append(f"--namespace={namespace}")
        versions = dict(line.split() for line in (built / "version").read_text().splitlines() if line.strip())
        version = versions.get("github.com/openshift/machine-api-operator", "unknown")
        state = _start_controller(
            state_dir,
            BINARY["mapi"],
            argv,
            ready=lambda: _http_ok(f"http://127.0.0.1:{ports['health']}/readyz"),
            timeout=120,
            extra={"version": version, "namespace": namespace, "ports": ports, "binary_dir": str(built)},
        )
    except BaseException:
        down(state_dir)
        raise
    if not quiet:
        print(f"OpenShift machine controller (machine-api-operator {version}) running; log: {state_dir / 'mapi-controller.log'}")
        print(f"kubeconfig: {state_dir / 'kubeconfig'}")
    return state


def down(state_dir: Path) -> None:
    """Stop the controller, then the workload control plane, then the management
    one: hack/cluster.py's ``down`` stops the components it did not start itself
    first, before the control planes below ``state_dir``."""
    cluster_tool.down(Path(state_dir).resolve())


# ---------------------------------------------------------------------------
# Objects the real controllers need (v1beta2 for Cluster API: no webhooks, so no
# conversion and no defaulting; every default the webhooks would set is set here).


def capi_cluster_objects(name: str, namespace: str, workload_kubeconfig_text: str, watch_filter: str = DEFAULT_WATCH_FILTER) -> list[dict]:
    """A Cluster API cluster the real manager reconciles: the Secret
    ``<name>-kubeconfig`` (created first: a failed connection is retried only
    after 30 s), the Cluster (no infrastructureRef, so the manager marks its
    infrastructure provisioned itself) and one control-plane Machine with its
    FakeMachine. Without an active control-plane Machine, Cluster API skips the
    pre-drain hooks, the drain and the volume wait of every Machine it deletes."""
    # The endpoint a provider would report: the workload API server (kubeconfigs of hack/cluster.py are JSON).
    host, _colon, port = json.loads(workload_kubeconfig_text)["clusters"][0]["cluster"]["server"].removeprefix("https://").partition(":")
    secret = cluster_tool.kubeconfig_secret(name, namespace, workload_kubeconfig_text)
    labels = {WATCH_FILTER_LABEL: watch_filter} if watch_filter else {}
    cluster = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        # spec needs one property; the endpoint is what a provider would report.
        "spec": {"controlPlaneEndpoint": {"host": host, "port": int(port or 443)}},
    }
    return [
        secret,
        cluster,
        *capi_machine_objects(f"{name}-control-plane-0", namespace, name, watch_filter, control_plane=True),
    ]


def capi_machine_objects(
    name: str,
    namespace: str,
    cluster: str,
    watch_filter: str = DEFAULT_WATCH_FILTER,
    *,
    provider_id: str | None = None,
    control_plane: bool = False,
    annotations: dict | None = None,
    node_deletion_timeout: int = 10,
) -> list[dict]:
    """A worker (or control-plane) Machine and its FakeMachine, provisioned with
    ``provider_id`` (default ``fake://<namespace>/<name>``): the Node whose
    ``spec.providerID`` matches in the workload cluster becomes its ``status.nodeRef``.
    Mark the FakeMachine provisioned afterwards (``fake_machine_provisioned``):
    the status subresource ignores it on create."""
    labels = {"cluster.x-k8s.io/cluster-name": cluster, **({WATCH_FILTER_LABEL: watch_filter} if watch_filter else {})}
    if control_plane:
        labels["cluster.x-k8s.io/control-plane"] = ""
    provider_id = provider_id or f"fake://{namespace}/{name}"
    fake_machine = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "FakeMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"providerID": provider_id},
    }
    machine = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": dict(annotations or {})},
        "spec": {
            "clusterName": cluster,
            # A data secret name stands for a finished bootstrap; the Secret need not exist.
            "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": name},
            "deletion": {"nodeDeletionTimeoutSeconds": node_deletion_timeout},
        },
    }
    return [fake_machine, machine]


FAKE_MACHINE_PROVISIONED = {"status": {"initialization": {"provisioned": True}, "ready": True}}


def mapi_machine(name: str, namespace: str, cluster_id: str = "lm-real", hooks: dict | None = None, provider_id: str | None = None) -> dict:
    """An OpenShift Machine the fake actuator "creates": the cluster-id label and a
    non-null ``spec.providerSpec.value`` the machine controller insists on;
    ``hooks`` ({"preDrain": [{"name", "owner"}], ...}) as ``spec.lifecycleHooks``.
    The actuator sets ``spec.providerID`` (``provider_id`` or ``fake://<namespace>/<name>``)."""
    value: dict = {"kind": "FakeProviderSpec"}
    if provider_id:
        value["providerID"] = provider_id
    machine = {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {"name": name, "namespace": namespace, "labels": {"machine.openshift.io/cluster-api-cluster": cluster_id}},
        "spec": {"providerSpec": {"value": value}},
    }
    if hooks:
        machine["spec"]["lifecycleHooks"] = hooks
    return machine


# ---------------------------------------------------------------------------
# Owners of Machines (MachineSets, a MachineDeployment), and the cloud behind them


POOL_LABEL = "lifecycle.machine.dev/pool"


def capi_machine_set_objects(
    name: str,
    namespace: str,
    cluster: str,
    replicas: int,
    watch_filter: str = DEFAULT_WATCH_FILTER,
    *,
    deployment: bool = False,
    annotations: dict | None = None,
) -> list[dict]:
    """A FakeMachineTemplate and a Cluster API (v1beta2) MachineSet - or, with ``deployment``, a MachineDeployment
    (RollingUpdate, maxSurge 1, maxUnavailable 0) - of ``replicas`` Machines of ``cluster``, every default the
    webhooks would set written out. Its Machines carry the watch filter (the manager reconciles them) and the label
    ``lifecycle.machine.dev/pool: <name>`` its selector picks; the test bed's ``FakeCloud`` provisions them."""
    labels = {"cluster.x-k8s.io/cluster-name": cluster, POOL_LABEL: name, **({WATCH_FILTER_LABEL: watch_filter} if watch_filter else {})}
    if deployment:
        labels["cluster.x-k8s.io/deployment-name"] = name
    template = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "FakeMachineTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {}}},
    }
    spec = {
        "clusterName": cluster,
        "replicas": replicas,
        "selector": {"matchLabels": {key: value for key, value in labels.items() if key != WATCH_FILTER_LABEL}},
        "template": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "clusterName": cluster,
                # A data secret name stands for a finished bootstrap; the Secret need not exist.
                "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachineTemplate", "name": name},
                "deletion": {"nodeDeletionTimeoutSeconds": 10},
            },
        },
    }
    if deployment:
        spec["rollout"] = {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}
    owner = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineDeployment" if deployment else "MachineSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels), "annotations": dict(annotations or {})},
        "spec": spec,
    }
    return [template, owner]


def mapi_machine_set(name: str, namespace: str, replicas: int, cluster_id: str = "lm-real", *, annotations: dict | None = None) -> dict:
    """An OpenShift MachineSet of ``replicas`` Machines (the label ``machine.openshift.io/cluster-api-machineset``
    its selector picks, the cluster-id label and the non-null providerSpec the machine controller insists on)."""
    labels = {"machine.openshift.io/cluster-api-cluster": cluster_id, "machine.openshift.io/cluster-api-machineset": name}
    return {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels), "annotations": dict(annotations or {})},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": {"providerSpec": {"value": {"kind": "FakeProviderSpec"}}}},
        },
    }


class FakeCloud:
    """The cloud behind the test bed's Machines: every new instance boots and its Node joins its cluster, as a
    provider and a kubelet would make them, so that a MachineSet's new Machine gets a Ready Node.

    ``capi``: each FakeMachine of ``namespace`` a MachineSet created (from its FakeMachineTemplate) gets its
    ``spec.providerID`` (``fake://<namespace>/<name>``), is marked provisioned, and a kwok Node of that name and
    providerID is created in the workload cluster (``node_state``). ``mapi``: each OpenShift Machine of
    ``namespace`` the fake actuator gave a providerID gets such a Node in the same cluster. Each instance gets its
    Node once: a Node its controller deleted is not brought back. Polls every ``interval`` s in a thread of its
    own; ``stop()`` (or leaving the ``with`` block) stops it, pass or fail."""

    def __init__(self, kind: str, state: dict, namespace: str, node_state: dict | None = None, interval: float = 0.3):
        self.kind = kind
        self.state = state
        self.node_state = node_state or state
        self.namespace = namespace
        self.interval = interval
        self.booted: dict[str, float] = {}  # instance name -> when its Node was created (time.time())
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"fake-cloud-{namespace}", daemon=True)

    def __enter__(self) -> FakeCloud:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._once()
            except (OSError, ValueError, KeyError) as exc:  # a control plane going down at the end of a test
                self.errors.append(str(exc))

    def _once(self) -> None:
        if self.kind == "capi":
            path = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{self.namespace}/fakemachines"
        else:
            path = f"/apis/machine.openshift.io/v1beta1/namespaces/{self.namespace}/machines"
        status, listed = cluster_tool._api(self.state, "GET", path)
        for item in listed.get("items") or [] if status == 200 else []:
            meta = item["metadata"]
            name = meta["name"]
            if name in self.booted or meta.get("deletionTimestamp"):
                continue
            provider_id = (item.get("spec") or {}).get("providerID")
            if self.kind == "capi":
                if provider_id and not (item.get("status") or {}).get("initialization"):
                    continue  # a FakeMachine a test made and provisions itself
                if not provider_id:
                    provider_id = f"fake://{self.namespace}/{name}"
                    cluster_tool._api(self.state, "PATCH", f"{path}/{name}", {"spec": {"providerID": provider_id}}, "application/merge-patch+json")
                    cluster_tool._api(self.state, "PATCH", f"{path}/{name}/status", FAKE_MACHINE_PROVISIONED, "application/merge-patch+json")
            elif not provider_id or self._node_exists(provider_id):
                continue
            node = cluster_tool.kwok_node(name)
            node["spec"]["providerID"] = provider_id
            status = cluster_tool._api(self.node_state, "POST", "/api/v1/nodes", node)[0]
            if status in (201, 409):
                self.booted[name] = time.time()

    def _node_exists(self, provider_id: str) -> bool:
        status, nodes = cluster_tool._api(self.node_state, "GET", "/api/v1/nodes")
        return status == 200 and any((node.get("spec") or {}).get("providerID") == provider_id for node in nodes.get("items") or [])


# ---------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "build"])
    parser.add_argument("controllers", nargs="*", metavar="capi|mapi", help="capi or mapi (build: either or both)")
    parser.add_argument("--dir", help="state directory (default .tmp/capi or .tmp/mapi)")
    parser.add_argument("--watch-filter", default=DEFAULT_WATCH_FILTER, help="capi: the cluster.x-k8s.io/watch-filter value it reconciles ('' for all)")
    parser.add_argument("--no-workload", action="store_true", help="capi: no workload control plane (a self-hosted cluster)")
    parser.add_argument("--namespace", default="", help="mapi: reconcile the Machines of this namespace only")
    parser.add_argument("--v", type=int, default=None, help="the controller's log verbosity (capi 4, mapi 3)")
    args = parser.parse_args(argv)
    if set(args.controllers) - set(BINARY):
        parser.error(f"unknown controller(s): {' '.join(sorted(set(args.controllers) - set(BINARY)))}; expected capi or mapi")
    if args.command == "build":
        for name, directory in build_controllers(tuple(args.controllers) or ("capi", "mapi")).items():
            print(f"{name} {directory}")
        return 0
    if len(args.controllers) != 1:
        parser.error(f"{args.command} needs one controller: capi or mapi")
    name = args.controllers[0]
    state_dir = Path(args.dir).resolve() if args.dir else DEFAULT_DIR[name]
    if args.command == "up":
        try:
            if name == "capi":
                up_capi(state_dir, args.watch_filter, workload=not args.no_workload, verbosity=4 if args.v is None else args.v)
            else:
                up_mapi(state_dir, args.namespace, verbosity=3 if args.v is None else args.v)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"failed to start the {name} controller: {exc}", file=sys.stderr)
            if isinstance(exc, subprocess.CalledProcessError) and exc.stderr:
                print(exc.stderr if isinstance(exc.stderr, str) else exc.stderr.decode(errors="replace"), file=sys.stderr)
            return 1
    elif args.command == "down":
        down(state_dir)
        print(f"{BINARY[name]} and its control planes stopped ({state_dir})")
    else:
        running = controller_running(state_dir, BINARY[name])
        controller = cluster_tool._read_state(state_dir).get("controller") or {}
        print(f"{BINARY[name]}: {'running' if running else 'stopped'} ({state_dir}; version {controller.get('version', '?')})")
        return 0 if running else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
