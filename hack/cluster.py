"""Start and stop the local Kubernetes control planes used by tests and the demo.

Real upstream components, built from the Go module proxy by hack/build-tools.sh:
etcd, kube-apiserver, kube-controller-manager, kube-scheduler (one multi-call
binary, each component its own process) and kwok acting as the kubelet of
simulated nodes (every Node annotated ``kwok.x-k8s.io/node: fake``).

Two control planes, as Cluster API lays them out: the management one (the
Machines, their CRDs) in ``<dir>`` and a workload one (the Nodes, Pods,
PodDisruptionBudgets, VolumeAttachments; no CRDs) in ``<dir>/workload``. A
Machine reaches its workload cluster through the Secret ``<cluster>-kubeconfig``
of its namespace (``kubeconfig_secret``, ``inline_kubeconfig``).

    python3 hack/cluster.py up [--dir .cluster] [--no-workload]
                                                    start both, write <dir>/kubeconfig and <dir>/workload/kubeconfig
    python3 hack/cluster.py down [--dir .cluster]   stop both (the workload first), leave no process behind
    python3 hack/cluster.py status [--dir .cluster]
    python3 hack/cluster.py collections             print the ANSIBLE_COLLECTIONS_PATH root

Only the standard library is used so that it runs before the venv exists.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

try:
    import yaml
except ImportError:  # the stdlib-only path: CRD names are then not awaited
    yaml = None

REPO = Path(__file__).resolve().parents[1]
HACK = REPO / "hack"
CRD_DIR = HACK / "crds"
STAGES_DIR = HACK / "kwok"
ADMIN_TOKEN = "lifecycle-machine-admin-token"  # local, loopback-only test cluster
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
CONTROLLERS = [
    "disruption",
    "garbagecollector",
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
    "replicaset",
    "deployment",
    "statefulset",
    "daemonset",
    "job",
    "root-ca-cert-publisher",
]
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        # Everything the AWX ServiceAccount of extensions/awx/rbac.yml asks, so a
        # test can prove that ClusterRole grants exactly what the jobs need.
        {"level": "Metadata", "users": ["system:serviceaccount:lifecycle-machine:lifecycle-machine-awx"]},
        {"level": "Metadata", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods/eviction"]}]},
        # Machine requests, so a test can prove whose identity (impersonated or not) acted on a Machine.
        {
            "level": "Metadata",
            "resources": [{"group": "machine.openshift.io", "resources": ["machines"]}, {"group": "cluster.x-k8s.io", "resources": ["machines"]}],
        },
        {"level": "Metadata", "verbs": ["delete"], "resources": [{"group": "", "resources": ["pods", "nodes"]}]},
        # Who cordoned a Node, and who deleted a Machine's infrastructure, bootstrap object or (the real
        # OpenShift controller's fake actuator) instance ConfigMap: so a test beside a live controller
        # can prove that only one of the two acted.
        {"level": "Metadata", "verbs": ["patch", "update"], "resources": [{"group": "", "resources": ["nodes"]}]},
        {"level": "Metadata", "verbs": ["delete"], "resources": [{"group": "", "resources": ["configmaps"]}]},
        {
            "level": "Metadata",
            "verbs": ["create", "update", "patch", "delete"],
            "resources": [{"group": "infrastructure.cluster.x-k8s.io"}, {"group": "bootstrap.cluster.x-k8s.io"}],
        },
        # Reads of Secrets (never their content), so a test can prove a workload cluster's kubeconfig Secret is read once.
        {"level": "Metadata", "verbs": ["get"], "resources": [{"group": "", "resources": ["secrets"]}]},
        {"level": "None"},
    ],
}
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
# Where `up` (the CLI) puts the workload control plane, under the management one's directory.
WORKLOAD_SUBDIR = "workload"
# Cluster API's kubeconfig Secret: <cluster>-kubeconfig, key "value", this type and label.
CAPI_SECRET_TYPE = "cluster.x-k8s.io/secret"
CAPI_CLUSTER_LABEL = "cluster.x-k8s.io/cluster-name"


def collections_root() -> Path:
    """A directory usable as ANSIBLE_COLLECTIONS_PATH that holds this checkout.

    ``<root>/ansible_collections/lifecycle/machine`` links to the repository;
    ``kubernetes/core`` links to the copy bundled in the venv's ``ansible`` package.
    """
    root = REPO / ".tmp" / "collections"
    target = root / "ansible_collections" / "lifecycle" / "machine"
    if not target.is_symlink():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(REPO, target_is_directory=True)
    return root


def restore_sigint() -> None:
    """Let SIGINT interrupt this process and the programs it starts again.

    A program started in the background of a non-interactive shell (a CI
    script's ``cmd &``) inherits SIGINT ignored, and hands that on to every
    ansible-playbook it starts: one interrupted before Ansible installs its own
    handler would carry on as if nothing happened, and a test or the soak that
    cancels runs with SIGINT would measure the shell, not the collection.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def kwok_node(name: str, labels: dict | None = None) -> dict:
    """A Node that kwok manages (annotation ``kwok.x-k8s.io/node: fake``), for the tests,
    benchmarks and the chaos soak: schedulable, Linux, labelled ``type: kwok`` and ``labels``."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", **(labels or {})},
        },
        "spec": {"taints": []},
    }


def poll(predicate, timeout: float, what: str, interval: float = 0.25, error: type[Exception] = TimeoutError):
    """Call ``predicate`` every ``interval`` seconds until it returns something
    truthy, and return that; raise ``error`` naming ``what`` after ``timeout`` s.
    The one wait of the tests, benchmarks and the soak."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise error(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def marked_processes(variable: str, value: str) -> list[tuple[int, str]]:
    """(pid, command) of the processes, but this one, whose environment holds
    ``variable=value``: how the tests and the soak find every process a run
    started, even after its parent is gone."""
    wanted = f"{variable}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if command:
            found.append((int(entry.name), command))
    return found


def ansible_environment(kubeconfig: str | Path, **extra: str) -> dict:
    """The environment of an Ansible run against the control plane of ``kubeconfig``
    (tests, benchmarks, the demo, the chaos soak): this checkout as the collection,
    the kubeconfig as kubernetes.core's ``K8S_AUTH_KUBECONFIG`` (no other
    ``K8S_AUTH_*`` variable of the caller's), the Python running this for the
    modules, plain output; ``extra`` on top."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("K8S_AUTH_")}
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": str(collections_root()),
            "K8S_AUTH_KUBECONFIG": str(kubeconfig),
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
            "ANSIBLE_LOCALHOST_WARNING": "false",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_RETRY_FILES_ENABLED": "false",
        }
    )
    env.update(extra)
    return env


def kubernetes_version() -> str:
    """The Kubernetes release the control plane is built from (tools/controlplane/go.mod)."""
    for line in (REPO / "tools" / "controlplane" / "go.mod").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("k8s.io/kubernetes", "require") and parts[-1].startswith("v1."):
            return parts[-1]
    raise RuntimeError("k8s.io/kubernetes version not found in tools/controlplane/go.mod")


_PORTS_HANDED_OUT: set[int] = set()
_PORTS_LOCK = threading.Lock()


def _free_port() -> int:
    """A loopback port free now, never one this process handed out before: the
    ports of one control plane are only bound once all are picked, and several
    control planes may start from one process (management, workload, extra ones)."""
    with _PORTS_LOCK:
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            if port not in _PORTS_HANDED_OUT:
                _PORTS_HANDED_OUT.add(port)
                return port


def _cached_script(script: str) -> Path:
    """Run a hack/ script that builds or fetches into the shared cache and prints its directory last.

    Sessions started together (pytest-xdist workers, molecule beside a test run)
    take turns: the scripts rewrite what they keep in the shared cache."""
    lock_dir = Path(os.environ.get("LIFECYCLE_MACHINE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lifecycle-machine")
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / "build.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = subprocess.run(["bash", str(HACK / script)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(result.stdout.strip().splitlines()[-1])


def build_tools() -> Path:
    """Build (or reuse from the cache) the binaries; return their directory."""
    return _cached_script("build-tools.sh")


def fetched_crds() -> Path:
    """The directory of the CRDs of the pinned releases the control plane serves besides hack/crds
    (Cluster API's MachineSet and MachineDeployment, OpenShift's MachineSet), fetched once (hack/fetch-crds.sh)."""
    return _cached_script("fetch-crds.sh")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def _read_state(state_dir: Path) -> dict:
    try:
        return json.loads((state_dir / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def is_running(state_dir: Path) -> bool:
    state = _read_state(state_dir)
    pids = state.get("pids") or {}
    if not pids or not all(_pid_alive(pid) for pid in pids.values()):
        return False
    return _readyz(state) is True


def _ssl_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _readyz(state: dict) -> bool | str:
    url = f"https://127.0.0.1:{state.get('apiserver_port')}/readyz"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    try:
        with urllib.request.urlopen(request, context=_ssl_context(), timeout=2) as response:
            return response.status == 200
    except urllib.error.HTTPError as exc:
        return exc.read().decode(errors="replace")[-400:]
    except (OSError, ValueError) as exc:
        return str(exc)


def _api(state: dict, method: str, path: str, body: dict | None = None, content_type: str = "application/json") -> tuple[int, dict]:
    url = f"{state.get('server') or 'https://127.0.0.1:' + str(state['apiserver_port'])}{path}"
    data = json.dumps(body).encode() if body is not None else None
    token = state.get("token") or ADMIN_TOKEN
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, context=_ssl_context(), timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {}


def _wait(predicate, timeout: float, what: str, log_hint: str = "") -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last is True:
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}: {last}\n{log_hint}")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _openssl_keypair(state_dir: Path) -> None:
    key = state_dir / "sa.key"
    if not key.exists():
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(state_dir / "sa.pub")], check=True, capture_output=True)


def _kubeconfig(server: str, token: str, ca_data: str | None, user: str = "admin") -> dict:
    """A self-contained kubeconfig: the CA inline (base64 PEM), a bearer token."""
    cluster: dict = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    else:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lifecycle-machine", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "lifecycle-machine", "context": {"cluster": "lifecycle-machine", "user": user}}],
        "current-context": "lifecycle-machine",
    }


def _write_kubeconfig(path: Path, port: int, token: str, ca_file: Path | None) -> None:
    ca_data = base64.b64encode(ca_file.read_bytes()).decode() if ca_file and ca_file.exists() else None
    path.write_text(json.dumps(_kubeconfig(f"https://127.0.0.1:{port}", token, ca_data), indent=2))
    path.chmod(0o600)


def _load_kubeconfig(path: Path) -> dict:
    """A kubeconfig file: JSON (as written here), else YAML when PyYAML is there."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except ValueError:
        if yaml is None:
            raise RuntimeError(f"{path} is not JSON, and PyYAML (for YAML kubeconfigs) is not installed") from None
        return yaml.safe_load(text)


# kubeconfig fields naming a file, and the inline field holding the same bytes (base64).
_FILE_FIELDS = {
    "clusters": (("cluster", "certificate-authority", "certificate-authority-data"),),
    "users": (("user", "client-certificate", "client-certificate-data"), ("user", "client-key", "client-key-data")),
}


def inline_kubeconfig(source: str | Path | dict) -> str:
    """A self-contained kubeconfig (JSON text) for a control plane: what Cluster
    API's ``<cluster>-kubeconfig`` Secret holds under ``value``.

    ``source`` is a state directory of this script (its ``kubeconfig``), a
    kubeconfig file (its CA, client certificate, key and token files are read
    in: ``certificate-authority`` becomes ``certificate-authority-data``, and so
    on; exec and auth-provider plugins are kept as they are), or a state as
    ``up`` returns it or ``state_from_kubeconfig`` reads it (server, token, CA).
    """
    if isinstance(source, dict):
        server, ca_data = _server_and_ca(source)
        return json.dumps(_kubeconfig(server, source.get("token") or ADMIN_TOKEN, ca_data), indent=2)
    path = Path(source)
    if path.is_dir():
        path = path / "kubeconfig"
    config = _load_kubeconfig(path)
    base = path.resolve().parent
    for section, fields in _FILE_FIELDS.items():
        for entry in config.get(section) or []:
            for key, file_field, data_field in fields:
                settings = entry.get(key) or {}
                if settings.get(file_field):
                    settings[data_field] = base64.b64encode((base / Path(settings.pop(file_field)).expanduser()).read_bytes()).decode()
    for entry in config.get("users") or []:
        user = entry.get("user") or {}
        if user.get("tokenFile"):
            user["token"] = (base / Path(user.pop("tokenFile")).expanduser()).read_text().strip()
    return json.dumps(config, indent=2)


def _server_and_ca(state: dict) -> tuple[str, str | None]:
    """The server of a state, and its CA (base64 PEM): read by ``state_from_kubeconfig``,
    or from the state directory ``up`` records."""
    server = state.get("server") or f"https://127.0.0.1:{state['apiserver_port']}"
    ca_data = state.get("ca_data")
    if not ca_data and state.get("state_dir"):
        ca_file = Path(state["state_dir"]) / "certs" / "apiserver.crt"
        ca_data = base64.b64encode(ca_file.read_bytes()).decode() if ca_file.exists() else None
    return server, ca_data


def kubeconfig_secret(cluster_name: str, namespace: str, kubeconfig_text: str | bytes) -> dict:
    """The Secret through which Cluster API reaches a cluster's workload API
    server, as Cluster API writes it: ``<cluster>-kubeconfig`` in the Machines'
    namespace, labelled with the cluster's name, of type ``cluster.x-k8s.io/secret``,
    the kubeconfig under ``data.value``. (Cluster API also makes the control
    plane object its owner; that is left out here, as an owner that does not
    exist would have the garbage collector delete the Secret.)"""
    raw = kubeconfig_text.encode() if isinstance(kubeconfig_text, str) else bytes(kubeconfig_text)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{cluster_name}-kubeconfig", "namespace": namespace, "labels": {CAPI_CLUSTER_LABEL: cluster_name}},
        "type": CAPI_SECRET_TYPE,
        "data": {"value": base64.b64encode(raw).decode()},
    }


def _as_state(source: str | Path | dict) -> dict:
    """A state (server, token, CA) from a state, a state directory or a kubeconfig file."""
    if isinstance(source, dict):
        return source
    path = Path(source)
    return state_from_kubeconfig(path / "kubeconfig" if path.is_dir() else path)


def service_account_kubeconfig(
    source: str | Path | dict, sa_name: str, namespace: str = "kube-system", expiration_seconds: int = 3600, timeout: float = 30
) -> str:
    """A self-contained kubeconfig for the control plane of ``source`` (a state,
    state directory or kubeconfig of this script) that authenticates as the
    ServiceAccount ``namespace/sa_name`` instead of the static admin token: the
    ServiceAccount is created and bound to cluster-admin (ClusterRoleBinding
    ``lm-<namespace>-<sa_name>``), a token is asked of the TokenRequest API
    (``expiration_seconds``), and the kubeconfig is returned once the token is
    accepted. The token is bound to the ServiceAccount: deleting it makes the
    API server answer 401 to that token (a rotated kubeconfig, in a test), but
    only once its cache of successful authentications lets go, 10 s later."""
    state = _as_state(source)
    objects = (
        ("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        ("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa_name}}),
        (
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"lm-{namespace}-{sa_name}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": namespace}],
            },
        ),
    )
    for method, path, body in objects:  # 409: there already
        status, answer = _api(state, method, path, body)
        if status not in (200, 201, 409):
            raise RuntimeError(f"{method} {path}: HTTP {status} {answer.get('message')}")
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": int(expiration_seconds)}}
    status, answer = _api(state, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa_name}/token", request)
    if status != 201:
        raise RuntimeError(f"TokenRequest for {namespace}/{sa_name}: HTTP {status} {answer.get('message')}")
    token = answer["status"]["token"]
    as_sa = {**state, "token": token}

    def accepted() -> bool | str:
        status = _api(as_sa, "GET", "/api/v1/namespaces/kube-system")[0]
        return status == 200 or f"HTTP {status}"

    _wait(accepted, timeout, f"the token of ServiceAccount {namespace}/{sa_name} to be accepted")
    server, ca_data = _server_and_ca(state)
    return json.dumps(_kubeconfig(server, token, ca_data, user=f"{namespace}-{sa_name}"), indent=2)


def _start(name: str, argv: list[str], state_dir: Path) -> int:
    # The child keeps its own copy of the log's file descriptor.
    with open(state_dir / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return proc.pid


def _load_yaml_documents(path: Path) -> list[dict]:
    """CRDs are kept as JSON-compatible YAML; use PyYAML when present, else kubectl."""
    if yaml is None:
        return []
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def install_crds(state: dict, bin_dir: Path, kubeconfig: Path) -> None:
    """hack/crds (written for this control plane) and the owners' CRDs exactly as their releases ship them."""
    files = sorted(CRD_DIR.glob("*.yaml")) + sorted(fetched_crds().glob("*.yaml"))
    if not files:
        return
    subprocess.run(
        [
            str(bin_dir / "kubectl"),
            "--kubeconfig",
            str(kubeconfig),
            "apply",
            "--server-side",
            "--force-conflicts",
            *[arg for f in files for arg in ("-f", str(f))],
        ],
        check=True,
        capture_output=True,
    )
    names = []
    for path in files:
        for doc in _load_yaml_documents(path):
            if doc.get("kind") == "CustomResourceDefinition":
                names.append(doc["metadata"]["name"])

    def established() -> bool | str:
        for crd in names:
            status, body = _api(state, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
            if status != 200:
                return f"{crd}: HTTP {status}"
            conditions = {c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") != "True":
                return f"{crd} not Established"
        return True

    _wait(established, 60, "CRDs to be established")


CAPI_GENERATIONS = ("v1beta1", "v1beta2")
CAPI_CRDS = ("machines", "clusters", "machinedrainrules", "machinesets", "machinedeployments")


def state_from_kubeconfig(kubeconfig: Path) -> dict:
    """Server, token and CA (``ca_data``, when inline) of a kubeconfig written by this script (JSON)."""
    config = json.loads(Path(kubeconfig).read_text())
    cluster = config["clusters"][0]["cluster"]
    state = {"server": cluster["server"], "token": config["users"][0]["user"]["token"]}
    if cluster.get("certificate-authority-data"):
        state["ca_data"] = cluster["certificate-authority-data"]
    return state


def set_capi_generation(state: dict, generation: str, timeout: float = 60) -> None:
    """Serve Cluster API as a v1beta1-only cluster (Cluster API 1.9/1.10) or as
    one that serves v1beta1 and v1beta2 (1.11+), and wait until discovery and
    the REST handlers agree. Objects keep the shape they were written in: there
    is no conversion webhook here, so a test uses one generation per object."""
    if generation not in CAPI_GENERATIONS:
        raise ValueError(f"unknown Cluster API generation {generation!r}; expected one of {CAPI_GENERATIONS}")
    for plural in CAPI_CRDS:
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.cluster.x-k8s.io"
        status, crd = _api(state, "GET", path)
        if status != 200:
            raise RuntimeError(f"CRD {plural}.cluster.x-k8s.io: HTTP {status}")
        changed = False
        for version in crd["spec"]["versions"]:
            served = version["name"] == "v1beta1" or generation == "v1beta2"
            storage = version["name"] == generation
            if version.get("served") != served or version.get("storage") != storage:
                version["served"], version["storage"] = served, storage
                changed = True
        if changed:
            status, body = _api(state, "PUT", path, crd)
            if status != 200:
                raise RuntimeError(f"could not update CRD {plural}.cluster.x-k8s.io: HTTP {status} {body.get('message')}")
    expected_v1beta2 = 200 if generation == "v1beta2" else 404

    def settled() -> bool | str:
        status, group = _api(state, "GET", "/apis/cluster.x-k8s.io")
        versions = sorted(v["version"] for v in group.get("versions") or []) if status == 200 else []
        want = ["v1beta1", "v1beta2"] if generation == "v1beta2" else ["v1beta1"]
        if versions != want:
            return f"discovery serves {versions}"
        for plural in CAPI_CRDS:
            status = _api(state, "GET", f"/apis/cluster.x-k8s.io/v1beta2/{plural}?limit=1")[0]
            if status != expected_v1beta2:
                return f"v1beta2 {plural}: HTTP {status}"
        return True

    _wait(settled, timeout, f"Cluster API {generation} to be served")


def up(state_dir: Path, quiet: bool = False, workload: bool = False) -> dict:
    """Start every component; return the state (ports, pids, paths).

    ``workload=True`` starts a workload cluster's control plane: the same
    components, but no CRDs (Machines live in the management cluster). Every
    port is picked free, so any number of control planes run side by side.
    A control plane already running in ``state_dir`` is kept; otherwise the
    directory is cleared, after stopping what runs from below it."""
    state_dir = Path(state_dir).resolve()
    what = "workload control plane" if workload else "control plane"
    if is_running(state_dir):
        if not quiet:
            print(f"{what} already running; kubeconfig: {state_dir / 'kubeconfig'}")
        return _read_state(state_dir)
    down(state_dir)
    started = time.monotonic()
    bin_dir = build_tools()
    if state_dir.exists():
        shutil.rmtree(state_dir)
    (state_dir / "certs").mkdir(parents=True)
    _openssl_keypair(state_dir)
    (state_dir / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
    (state_dir / "audit-policy.json").write_text(json.dumps(AUDIT_POLICY))
    state: dict = {
        "bin_dir": str(bin_dir),
        "state_dir": str(state_dir),
        "workload": workload,
        "etcd_port": _free_port(),
        "etcd_peer_port": _free_port(),
        "apiserver_port": _free_port(),
        "kcm_port": _free_port(),
        "scheduler_port": _free_port(),
        "kwok_port": _free_port(),
        "pids": {},
    }
    state["server"] = f"https://127.0.0.1:{state['apiserver_port']}"
    state["pids"]["etcd"] = _start(
        "etcd",
        [
            str(bin_dir / "etcd"),
            "--name=lm",
            f"--data-dir={state_dir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{state['etcd_port']}",
            f"--advertise-client-urls=http://127.0.0.1:{state['etcd_port']}",
            f"--listen-peer-urls=http://127.0.0.1:{state['etcd_peer_port']}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{state['etcd_peer_port']}",
            f"--initial-cluster=lm=http://127.0.0.1:{state['etcd_peer_port']}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        state_dir,
    )
    (state_dir / "state.json").write_text(json.dumps(state))
    state["pids"]["kube-apiserver"] = _start(
        "kube-apiserver",
        [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{state['etcd_port']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={state['apiserver_port']}",
            f"--cert-dir={state_dir / 'certs'}",
            "--endpoint-reconciler-type=none",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--token-auth-file={state_dir / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={state_dir / 'sa.pub'}",
            f"--service-account-signing-key-file={state_dir / 'sa.key'}",
            "--allow-privileged=true",
            # The node-lifecycle controller is not run (it would evict pods from
            # simulated nodes), so nothing would lift the not-ready taint this adds.
            "--disable-admission-plugins=TaintNodesByCondition",
            # Evictions and deletions are recorded, so tests can prove from the
            # server's own log that no Pod was evicted twice.
            f"--audit-policy-file={state_dir / 'audit-policy.json'}",
            f"--audit-log-path={state_dir / 'audit.log'}",
            "--audit-log-format=json",
            "--storage-media-type=application/vnd.kubernetes.protobuf",
            "--watch-cache=true",
            "--v=0",
        ],
        state_dir,
    )
    (state_dir / "state.json").write_text(json.dumps(state))
    _wait(lambda: _readyz(state), 90, "kube-apiserver /readyz", _tail(state_dir / "kube-apiserver.log"))

    kubeconfig = state_dir / "kubeconfig"
    ca_file = state_dir / "certs" / "apiserver.crt"
    # The self-signed serving bundle holds its own CA; trusting it keeps TLS verified.
    _write_kubeconfig(kubeconfig, state["apiserver_port"], ADMIN_TOKEN, ca_file)
    _write_kubeconfig(state_dir / "components.kubeconfig", state["apiserver_port"], ADMIN_TOKEN, ca_file)

    state["pids"]["kube-controller-manager"] = _start(
        "kube-controller-manager",
        [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={state_dir / 'components.kubeconfig'}",
            f"--authentication-kubeconfig={state_dir / 'components.kubeconfig'}",
            f"--authorization-kubeconfig={state_dir / 'components.kubeconfig'}",
            "--authentication-skip-lookup=true",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={state_dir / 'sa.key'}",
            f"--root-ca-file={state_dir / 'certs' / 'apiserver.crt'}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={state['kcm_port']}",
            f"--cluster-cidr={POD_CIDR}",
            "--concurrent-gc-syncs=5",
            "--v=0",
        ],
        state_dir,
    )
    state["pids"]["kube-scheduler"] = _start(
        "kube-scheduler",
        [
            str(bin_dir / "kube-scheduler"),
            f"--kubeconfig={state_dir / 'components.kubeconfig'}",
            f"--authentication-kubeconfig={state_dir / 'components.kubeconfig'}",
            f"--authorization-kubeconfig={state_dir / 'components.kubeconfig'}",
            "--authentication-skip-lookup=true",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={state['scheduler_port']}",
            "--v=0",
        ],
        state_dir,
    )
    state["pids"]["kwok"] = _start(
        "kwok",
        [
            str(bin_dir / "kwok"),
            f"--kubeconfig={state_dir / 'components.kubeconfig'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--cidr={POD_CIDR}",
            "--node-ip=127.0.0.2",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{state['kwok_port']}",
            *[arg for stage in sorted(STAGES_DIR.glob("*.yaml")) for arg in ("-c", str(stage))],
        ],
        state_dir,
    )
    (state_dir / "state.json").write_text(json.dumps(state))
    if not workload:
        install_crds(state, bin_dir, kubeconfig)
    _wait(
        lambda: _components_alive(state, state_dir) and _default_sa_ready(state),
        60,
        "the default ServiceAccount",
        _tail(state_dir / "kube-controller-manager.log"),
    )
    for name, pid in state["pids"].items():
        if not _pid_alive(pid):
            raise RuntimeError(f"{name} exited during start-up:\n{_tail(state_dir / f'{name}.log')}")
    state["startup_seconds"] = round(time.monotonic() - started, 1)
    (state_dir / "state.json").write_text(json.dumps(state))
    if not quiet:
        print(f"{what} up in {state['startup_seconds']} s; kubeconfig: {kubeconfig}")
    return state


def _components_alive(state: dict, state_dir: Path) -> bool:
    for name, pid in state["pids"].items():
        if not _pid_alive(pid):
            raise RuntimeError(f"{name} exited during start-up:\n{_tail(state_dir / f'{name}.log')}")
    return True


def _default_sa_ready(state: dict) -> bool | str:
    status = _api(state, "GET", "/api/v1/namespaces/default/serviceaccounts/default")[0]
    return status == 200 or f"HTTP {status}"


def _nested_state_dirs(state_dir: Path) -> list[Path]:
    """Control planes started from below ``state_dir`` (``<dir>/workload``)."""
    if not state_dir.is_dir():
        return []
    return sorted(sub for sub in state_dir.iterdir() if sub.is_dir() and (sub / "state.json").exists())


# The control plane's own components, stopped in stages, each waited for: an API
# server whose etcd went away in the same instant hangs in its shutdown until
# killed (some 15 s per control plane).
_STOP_STAGES = (("kwok", "kube-scheduler", "kube-controller-manager"), ("kube-apiserver",), ("etcd",))


def _stop(pids: list[int]) -> None:
    """SIGTERM each process group, wait up to 15 s for all, SIGKILL what is left."""
    running = [pid for pid in pids if _pid_alive(pid)]
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for pid in running:
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            killed = time.monotonic() + 5
            while _pid_alive(pid) and time.monotonic() < killed:
                time.sleep(0.05)


def down(state_dir: Path) -> None:
    """Stop every component started from ``state_dir``, after those of the
    control planes below it (``<dir>/workload``); no process is left behind.
    Components started beside it (hack/controllers.py's machine controllers)
    are stopped first of all, while every API server they talk to is still up."""
    state_dir = Path(state_dir)
    pids = _read_state(state_dir).get("pids") or {}
    _stop([pid for name, pid in pids.items() if not any(name in stage for stage in _STOP_STAGES)])
    for nested in _nested_state_dirs(state_dir):
        down(nested)
    for stage in _STOP_STAGES:
        _stop([pids[name] for name in stage if pids.get(name)])
    for pid in pids.values():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    if (state_dir / "state.json").exists():
        (state_dir / "state.json").unlink()


def peak_memory_kib(state_dir: Path) -> dict:
    """Resident memory (VmHWM, the peak) of each running component, in KiB."""
    result = {}
    for name, pid in (_read_state(state_dir).get("pids") or {}).items():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    result[name] = int(line.split()[1])
        except OSError:
            continue
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "collections", "build", "memory", "capi-generation"])
    parser.add_argument("generation", nargs="?", choices=CAPI_GENERATIONS, help="for capi-generation: v1beta1 (only) or v1beta2 (and v1beta1)")
    parser.add_argument("--dir", default=str(REPO / ".cluster"), help="state directory (kubeconfig, logs, etcd data); the workload's in <dir>/workload")
    parser.add_argument("--no-workload", action="store_true", help="for up: the management control plane alone, no workload one")
    args = parser.parse_args(argv)
    state_dir = Path(args.dir).resolve()
    workload_dir = state_dir / WORKLOAD_SUBDIR
    if args.command == "up":
        return _cli_up(state_dir, None if args.no_workload else workload_dir)
    elif args.command == "down":
        down(workload_dir)  # the workload first (down(state_dir) would stop it too)
        down(state_dir)
        print("control planes stopped (workload, management)")
    elif args.command == "status":
        return _cli_status(state_dir, workload_dir)
    elif args.command == "collections":
        print(collections_root())
    elif args.command == "build":
        print(build_tools())
    elif args.command == "capi-generation":
        if not args.generation:
            parser.error("capi-generation needs v1beta1 or v1beta2")
        set_capi_generation(_read_state(state_dir), args.generation)
        print(f"Cluster API served as {args.generation}")
    elif args.command == "memory":
        for label, directory in (("management", state_dir), ("workload", workload_dir)):
            memory = peak_memory_kib(directory)
            if not memory:
                continue
            print(f"{label} ({directory}):")
            for name, kib in memory.items():
                print(f"  {name}: {kib / 1024:.0f} MiB")
            print(f"  total: {sum(memory.values()) / 1024:.0f} MiB")
    return 0


def _cli_up(state_dir: Path, workload_dir: Path | None) -> int:
    """`up`: the management control plane in ``state_dir``, then (unless
    ``workload_dir`` is None) a workload one below it; started after the
    management one, since starting that clears its directory. On a failure,
    what this command started is stopped again."""
    planes = [(state_dir, False)] + ([(workload_dir, True)] if workload_dir else [])
    started: list[Path] = []
    for directory, workload in planes:
        was_running = is_running(directory)
        try:
            up(directory, workload=workload)
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"{'workload ' if workload else ''}control plane failed to start: {exc}", file=sys.stderr)
            if isinstance(exc, subprocess.CalledProcessError) and exc.stderr:
                print(exc.stderr if isinstance(exc.stderr, str) else exc.stderr.decode(errors="replace"), file=sys.stderr)
            for directory_started in [directory, *reversed(started)]:
                down(directory_started)
            return 1
        if not was_running:
            started.append(directory)
    return 0


def _cli_status(state_dir: Path, workload_dir: Path) -> int:
    """`status`: one line per control plane; 0 when the management one runs and
    the workload one runs too, or was never started (``up --no-workload``)."""
    ok = True
    for label, directory, required in (("management", state_dir, True), ("workload", workload_dir, False)):
        state = _read_state(directory)
        if not state:
            print(f"{label}: {'stopped' if required else 'not running'} ({directory})")
            ok = ok and not required
            continue
        running = is_running(directory)
        ok = ok and running
        server = state.get("server") or f"https://127.0.0.1:{state.get('apiserver_port')}"
        print(f"{label}: {'running' if running else 'stopped'} ({server}, kubeconfig {directory / 'kubeconfig'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
