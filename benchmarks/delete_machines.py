"""Benchmark (a script, not a test): delete 1, 20, 100 (and, asked for, 1000)
Cluster API Machines (3 Pods each, on their own kwok Nodes, with infrastructure
and bootstrap objects) with playbooks/delete_machine.yml, one run per size, and
print one table row per size:

- the wall time of the run (ansible-playbook, start to end) and its ratio to
  deleting one Machine (target at 20: at most 1.5);
- the concurrency it ran at (the role's ``delete_machine_concurrency``: the
  size, capped by ``--concurrency``);
- every request the collection sent during the run, from the control plane's
  audit log (user agent ``lifecycle.machine...``, all verbs and resources):
  per Machine (those naming one of the run's Machines or its Node, Pods,
  infrastructure / bootstrap objects or Events), evictions apart, and the
  shared ones (lists, watches, discovery, Clusters, Secrets, control-plane
  Machines), in total;
- of those per Machine, the GETs by resource (a Machine's Node, InfraMachine, bootstrap config,
  the Machine itself), one line per size under the table;
- the control plane's latency on those requests (audit log,
  requestReceivedTimestamp to stageTimestamp of ResponseComplete; watches
  left out): median and p99, and the CPU seconds kube-apiserver and etcd
  spent during the run, so that where the control plane is the limit, it shows;
- the module's peak memory: the largest VmHWM (peak resident set) of the
  AnsiballZ module processes, read from /proc while the playbook runs (every
  0.2 s; a process's last sample is its peak up to then), and beside it
  ru_maxrss of the whole playbook (wait4), which is the largest process of the
  tree - the controller or a module, whichever is bigger - not the module's.

The largest size is spread over ``--clusters`` Cluster objects (default 10) in
``--namespaces`` namespaces (default 5), each Cluster with its own
``<cluster>-kubeconfig`` Secret and control-plane Machine; the smaller sizes use
one Cluster in one namespace. Every Secret points at the same API server, this
control plane itself (self-hosted, as the Nodes live there too): the collection
opens one connection per Cluster as it would to ten workload clusters, but ten
API servers on two cores would measure the machine, not the collection.

The collection runs as a ServiceAccount of its own (cluster-admin), so the audit
log tells its requests from the benchmark's set-up. On the private control plane
the audit policy logs every request of that ServiceAccount; with
``--kubeconfig`` only what that control plane's policy logs is counted.

    python benchmarks/delete_machines.py [--sizes 1,20,100] [--concurrency 100]
                                         [--clusters 10] [--namespaces 5] [--kubeconfig PATH]

Without --kubeconfig a private control plane is started under .tmp/ and stopped
at the end, pass or fail. With one, the objects it creates are deleted at the end.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import copy
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "hack"))

import cluster as cluster_tool
import controllers

sys.path.insert(0, str(cluster_tool.collections_root()))

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

CAPI = "cluster.x-k8s.io/v1beta2"
PODS_PER_MACHINE = 3
GRACE_SECONDS = 2
# The set-up's threads (object creation over the KubeApi).
SETUP_WORKERS = 16
# The identity the collection runs as, so the audit log tells its requests from the set-up's.
IDENTITY_NAMESPACE = "lm-bench-identity"
IDENTITY_NAME = "lifecycle-machine"
COLLECTION_USER = f"system:serviceaccount:{IDENTITY_NAMESPACE}:{IDENTITY_NAME}"
# Beside Cluster API (--beside capi): the real manager runs as a ServiceAccount of its own, as the collection
# does (both go through Priority and Fairness alike), and reconciles only the Clusters labelled with this filter.
CAPI_IDENTITY_NAME = "capi-manager"
CAPI_USER = f"system:serviceaccount:{IDENTITY_NAMESPACE}:{CAPI_IDENTITY_NAME}"
CAPI_WATCH_FILTER = "lm-bench-capi"
# The benchmark's own client: not the collection's user agent.
SETUP_USER_AGENT = "lm-bench-setup"
SAMPLE_SECONDS = 0.2
# The audit log's verbs that change something (the rest read: get, list, watch).
WRITE_VERBS = ("create", "patch", "update", "delete", "deletecollection")
# What of the checkout the collection needs to run (measured as committed unless --worktree).
COLLECTION_PATHS = ("plugins", "roles", "playbooks", "meta", "galaxy.yml")


def log(text: str) -> None:
    print(text, flush=True)


def node_ready(node: dict | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in ((node or {}).get("status") or {}).get("conditions") or [])


def machine_body(name: str, cluster: str, run: str, control_plane: bool = False) -> dict:
    labels = {"cluster.x-k8s.io/cluster-name": cluster}
    if control_plane:
        labels["cluster.x-k8s.io/control-plane"] = ""
    else:
        labels["lm-bench"] = run
    refs = {
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": name}},
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": name},
    }
    return {
        "apiVersion": CAPI,
        "kind": "Machine",
        "metadata": {"name": name, "labels": labels, "finalizers": ["machine.cluster.x-k8s.io"]},
        "spec": {"clusterName": cluster, **refs},
    }


@dataclass
class Layout:
    """Where one size's Machines go: ``clusters`` (namespace, cluster) pairs, Machines dealt round-robin."""

    run: str
    size: int
    clusters: list[tuple[str, str]]

    @property
    def namespaces(self) -> list[str]:
        return sorted({namespace for namespace, _cluster in self.clusters})

    @property
    def machine_prefix(self) -> str:
        return f"{self.run}-m"

    def machines(self) -> list[tuple[str, str, str]]:
        """(namespace, cluster, name) of each worker Machine; its Node, Pods and infrastructure objects share the name."""
        return [(*self.clusters[index % len(self.clusters)], f"{self.machine_prefix}{index:04d}") for index in range(self.size)]


def layout_for(run: str, size: int, clusters: int, namespaces: int) -> Layout:
    clusters = max(1, min(clusters, size))
    namespaces = max(1, min(namespaces, clusters))
    return Layout(run, size, [(f"{run}-ns{index % namespaces}", f"{run}-c{index}") for index in range(clusters)])


def in_pool(work, items, what: str) -> None:
    """Run ``work(item)`` for each item on SETUP_WORKERS threads; the first failure is raised."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=SETUP_WORKERS) as pool:
        for future in concurrent.futures.as_completed([pool.submit(work, item) for item in items]):
            try:
                future.result()
            except Exception as exc:
                raise RuntimeError(f"setting up {what}: {exc}") from exc


def setup(kube: KubeApi, layout: Layout, secret_kubeconfig: str, *, capi: bool = False, watched: bool = False) -> None:
    """Each worker Machine on a kwok Node with 3 Pods; each Cluster with its kubeconfig Secret and a
    control-plane Machine. Objects are created concurrently; then kwok is waited for (Nodes Ready, Pods Running).

    ``capi``: the objects as the real Cluster API manager needs them (hack/controllers.py), the same for the
    collection's runs and the manager's so that both delete the same Machines: a Cluster with its endpoint, its
    control-plane Machine's FakeMachine provisioned, each worker's FakeMachine and FakeBootstrapConfig provisioned,
    a providerID on its FakeMachine and Node. ``watched``: labelled for the manager, which then sets each
    Machine's providerID and nodeRef (waited for); otherwise the set-up writes them, as no controller does."""
    if capi:
        setup_capi_shaped(kube, layout, secret_kubeconfig, watched=watched)
        return
    make_namespaces(kube, layout)

    def make_cluster(pair: tuple[str, str]) -> None:
        namespace, cluster = pair
        api = kube.fork()
        api.create(f"/api/v1/namespaces/{namespace}/secrets", cluster_tool.kubeconfig_secret(cluster, namespace, secret_kubeconfig), exists_ok=True)
        api.create(f"/apis/{CAPI}/namespaces/{namespace}/clusters", {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": cluster}}, exists_ok=True)
        api.create(f"/apis/{CAPI}/namespaces/{namespace}/machines", machine_body(f"{cluster}-cp", cluster, layout.run, control_plane=True), exists_ok=True)

    def make_machine(entry: tuple[str, str, str]) -> None:
        namespace, cluster, name = entry
        api = kube.fork()
        api.create("/api/v1/nodes", cluster_tool.kwok_node(name, {"lm-bench": layout.run}))
        for kind, plural, group in (("FakeMachine", "fakemachines", "infrastructure"), ("FakeBootstrapConfig", "fakebootstrapconfigs", "bootstrap")):
            api.create(
                f"/apis/{group}.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/{plural}",
                {"apiVersion": f"{group}.cluster.x-k8s.io/v1beta1", "kind": kind, "metadata": {"name": name}},
            )
        api.create(f"/apis/{CAPI}/namespaces/{namespace}/machines", machine_body(name, cluster, layout.run))
        api.patch(f"/apis/{CAPI}/namespaces/{namespace}/machines/{name}", {"status": {"nodeRef": {"name": name}}}, subresource_status=True)
        for pod_index in range(PODS_PER_MACHINE):
            api.create(f"/api/v1/namespaces/{namespace}/pods", bench_pod(f"{name}-p{pod_index}", name, layout.run))

    in_pool(make_cluster, layout.clusters, "the Clusters")
    in_pool(make_machine, layout.machines(), "the Machines")
    wait_ready(kube, layout)


def make_namespaces(kube: KubeApi, layout: Layout) -> None:
    """The layout's namespaces, each once its default ServiceAccount exists (Pods need it)."""
    for namespace in layout.namespaces:
        kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}}, exists_ok=True)
    for namespace in layout.namespaces:
        cluster_tool.poll(lambda ns=namespace: kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60, "the namespace's default ServiceAccount")


FAKE_BOOTSTRAP_READY = {"status": {"initialization": {"dataSecretCreated": True}, "dataSecretName": "lm-bench-bootstrap"}}


def setup_capi_shaped(kube: KubeApi, layout: Layout, secret_kubeconfig: str, *, watched: bool) -> None:
    """:func:`setup` with the objects the real Cluster API manager needs (see there)."""
    watch_filter = CAPI_WATCH_FILTER if watched else ""
    fake_machines = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{}/fakemachines"
    make_namespaces(kube, layout)

    def make_cluster(pair: tuple[str, str]) -> None:
        namespace, cluster = pair
        api = kube.fork()
        for body in controllers.capi_cluster_objects(cluster, namespace, secret_kubeconfig, watch_filter):
            api.create(collection_of(body, namespace), body, exists_ok=True)
        api.patch(f"{fake_machines.format(namespace)}/{cluster}-control-plane-0", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)

    def make_machine(entry: tuple[str, str, str]) -> None:
        namespace, cluster, name = entry
        api = kube.fork()
        provider_id = f"fake://{namespace}/{name}"
        node = cluster_tool.kwok_node(name, {"lm-bench": layout.run})
        node["spec"]["providerID"] = provider_id
        api.create("/api/v1/nodes", node)
        fake_machine, machine = controllers.capi_machine_objects(name, namespace, cluster, watch_filter, provider_id=provider_id)
        machine["metadata"]["labels"]["lm-bench"] = layout.run
        machine["metadata"]["finalizers"] = ["machine.cluster.x-k8s.io"]
        machine["spec"]["bootstrap"] = {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": name}}
        if not watched:
            machine["spec"]["providerID"] = provider_id
        api.create(f"{fake_machines.format(namespace)}", fake_machine)
        api.patch(f"{fake_machines.format(namespace)}/{name}", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)
        bootstrap = f"/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakebootstrapconfigs"
        api.create(bootstrap, {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "FakeBootstrapConfig", "metadata": {"name": name}})
        api.patch(f"{bootstrap}/{name}", FAKE_BOOTSTRAP_READY, subresource_status=True)
        api.create(f"/apis/{CAPI}/namespaces/{namespace}/machines", machine)
        if not watched:
            api.patch(f"/apis/{CAPI}/namespaces/{namespace}/machines/{name}", {"status": {"nodeRef": {"name": name}}}, subresource_status=True)
        for pod_index in range(PODS_PER_MACHINE):
            api.create(f"/api/v1/namespaces/{namespace}/pods", bench_pod(f"{name}-p{pod_index}", name, layout.run))

    in_pool(make_cluster, layout.clusters, "the Clusters")
    in_pool(make_machine, layout.machines(), "the Machines")
    wait_ready(kube, layout)
    if watched:

        def linked() -> bool:
            machines = kube.list(f"/apis/{CAPI}/machines", label_selector=f"lm-bench={layout.run}")
            return sum(1 for m in machines if ((m.get("status") or {}).get("nodeRef") or {}).get("name")) >= layout.size

        cluster_tool.poll(linked, 300 + layout.size, "Cluster API to set every Machine's nodeRef", interval=2)


def collection_of(body: dict, namespace: str) -> str:
    """The REST collection an object of hack/controllers.py's goes to."""
    group_version, plural = body["apiVersion"], f"{body['kind'].lower()}s"
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{prefix}/namespaces/{namespace}/{plural}"


def bench_pod(name: str, node: str, run: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench", "lm-bench": run}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": GRACE_SECONDS, "containers": [{"name": "c", "image": "bench"}]},
    }


def wait_ready(kube: KubeApi, layout: Layout) -> None:
    """kwok has made every Node of the layout Ready and every Pod Running."""
    timeout = 120 + layout.size * 0.5

    def nodes_ready() -> bool:
        return sum(1 for n in kube.list("/api/v1/nodes", label_selector=f"lm-bench={layout.run}") if node_ready(n)) >= layout.size

    def pods_running() -> bool:
        pods = kube.list("/api/v1/pods", label_selector=f"lm-bench={layout.run}")
        return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") >= layout.size * PODS_PER_MACHINE

    cluster_tool.poll(nodes_ready, timeout, "Nodes Ready", interval=1)
    cluster_tool.poll(pods_running, timeout, "Pods Running", interval=1)


class ModuleMemory:
    """The peak resident set (VmHWM) of each AnsiballZ module process of one playbook run, read from /proc
    every SAMPLE_SECONDS; the run's processes are told from anyone else's by a variable in their environment."""

    def __init__(self, marker: str):
        self.marker = f"LM_BENCH_RUN={marker}".encode()
        self.peaks: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._ours: dict[int, bool] = {}

    def __enter__(self) -> ModuleMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    self._read(int(entry.name), entry)
            self._stop.wait(SAMPLE_SECONDS)

    def _read(self, pid: int, entry: Path) -> None:
        try:
            if pid not in self._ours:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                # The Python running the module, not the shells that chmod or start it.
                found = re.search(rb"AnsiballZ_(\w+)\.py", b" ".join(argv)) if Path(argv[0].decode(errors="replace")).name.startswith("python") else None
                ours = bool(found) and self.marker in (entry / "environ").read_bytes().split(b"\0")
                self._ours[pid] = ours
                if ours:
                    self.peaks[pid] = (found.group(1).decode(), 0)
            if not self._ours[pid]:
                return
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    module, peak = self.peaks[pid]
                    self.peaks[pid] = (module, max(peak, int(line.split()[1])))
        except OSError:
            return

    def by_module(self) -> dict[str, tuple[int, int]]:
        """module -> (processes, largest peak in KiB)."""
        result: dict[str, tuple[int, int]] = {}
        for module, peak in self.peaks.values():
            count, best = result.get(module, (0, 0))
            result[module] = (count + 1, max(best, peak))
        return result


def cpu_seconds(pid: int | None) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, IndexError, ValueError):
        return 0.0


@dataclass
class Run:
    wall: float
    stdout: str
    exit_code: int
    tree_maxrss_kib: int
    tree_cpu: float
    modules: dict[str, tuple[int, int]]


def delete(kubeconfig: str, layout: Layout, concurrency: int, collection: Path) -> Run:
    """Run playbooks/delete_machine.yml of the collection under ``collection`` (an ANSIBLE_COLLECTIONS_PATH) on the layout's Machines."""
    marker = uuid.uuid4().hex
    env = cluster_tool.ansible_environment(kubeconfig, LM_BENCH_RUN=marker, ANSIBLE_COLLECTIONS_PATH=str(collection))
    namespace = layout.namespaces[0] if len(layout.namespaces) == 1 else ""  # several: all namespaces
    extra = {"machine_label_selector": f"lm-bench={layout.run}", "machine_namespace": namespace, "concurrency": concurrency, "drain_timeout": 1800}
    playbook = collection / "ansible_collections" / "lifecycle" / "machine" / "playbooks" / "delete_machine.yml"
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
    command += ["-e", json.dumps(extra)]
    with tempfile.TemporaryFile("w+") as out, ModuleMemory(marker) as memory:
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        # Anything the playbook left in its process group (nothing, normally) goes with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out.seek(0)
        stdout = out.read()
    return Run(wall, stdout, proc.returncode, usage.ru_maxrss, usage.ru_utime + usage.ru_stime, memory.by_module())


@dataclass
class Requests:
    """The collection's requests during one run: ``named`` name one Machine of the run or its Node, Pods,
    infrastructure or bootstrap objects (in the path or in a field selector), evictions apart; ``unnamed``
    name none (lists, watches, discovery, Clusters, Secrets, control-plane Machines, Events made with
    generateName). Which unnamed ones come once per Machine is told after the runs (:func:`repeated`)."""

    named: collections.Counter = field(default_factory=collections.Counter)
    evictions: int = 0
    unnamed: collections.Counter = field(default_factory=collections.Counter)
    machines: set = field(default_factory=set)
    latencies_ms: list = field(default_factory=list)
    errors: collections.Counter = field(default_factory=collections.Counter)

    def per_machine(self, repeated: set[str]) -> float:
        return (sum(self.named.values()) + sum(n for what, n in self.unnamed.items() if what in repeated)) / max(1, len(self.machines))

    def writes_per_machine(self, repeated: set[str]) -> float:
        """Of :meth:`per_machine`, the writes (create, patch, update, delete); evictions apart."""
        counted = list(self.named.items()) + [(what, n) for what, n in self.unnamed.items() if what in repeated]
        return sum(n for what, n in counted if what.split(" ", 1)[0] in WRITE_VERBS) / max(1, len(self.machines))

    def shared(self, repeated: set[str]) -> int:
        return sum(n for what, n in self.unnamed.items() if what not in repeated)


def _stamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def audit_mark(audit_log: Path) -> tuple[int, int, float]:
    """Where the audit log stands now (its inode, its size, the time), for :func:`audit_since`."""
    if not audit_log.exists():
        return 0, 0, time.time()
    stat = audit_log.stat()
    return stat.st_ino, stat.st_size, time.time()


def audit_since(audit_log: Path, mark: tuple[int, int, float]) -> bytes:
    """The audit log's lines written since ``mark``. kube-apiserver rotates its log at 100 MB (a 1000-Machine
    run writes more), renaming the file to ``audit-<time>.log``: the file the mark was taken on is read from the
    mark's offset whatever its name now, and every log file begun since is read whole, oldest first."""
    inode, offset, since = mark
    chunks = []
    logs = sorted(audit_log.parent.glob(f"{audit_log.stem}*{audit_log.suffix}"), key=lambda path: path.stat().st_mtime)
    for path in logs:
        stat = path.stat()
        if stat.st_ino == inode:
            start = offset
        elif stat.st_mtime >= since:
            start = 0
        else:
            continue
        with path.open("rb") as handle:
            handle.seek(start)
            chunks.append(handle.read())
    return b"".join(chunks)


def audit_requests(audit_log: Path, mark: tuple[int, int, float], layout: Layout, user: str = COLLECTION_USER) -> Requests:
    """The requests of ``user`` (the collection's identity, or the Cluster API manager's) in the audit log
    since ``mark`` (:func:`audit_mark`), by what they name."""
    result = Requests()
    for line in audit_since(audit_log, mark).splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (event.get("user") or {}).get("username") != user or event.get("stage") not in (None, "ResponseComplete", "Panic"):
            continue
        ref = event.get("objectRef") or {}
        verb = event.get("verb", "?")
        code = (event.get("responseStatus") or {}).get("code") or 0
        if ref.get("resource"):
            what = f"{verb} {ref['resource']}{'/' + ref['subresource'] if ref.get('subresource') else ''}"
        else:
            path = (event.get("requestURI") or "").split("?")[0]
            what = f"{verb} {'/apis (discovery)' if path.startswith(('/api', '/apis')) else path}"
        if code >= 400:
            result.errors[f"{what} {code}"] += 1
        if verb != "watch" and event.get("requestReceivedTimestamp") and event.get("stageTimestamp"):
            delta = _stamp(event["stageTimestamp"]) - _stamp(event["requestReceivedTimestamp"])
            result.latencies_ms.append(delta.total_seconds() * 1000)
        name = str(ref.get("name") or "")
        selected = re.search(rf"%3D{re.escape(layout.machine_prefix)}(\d+)", event.get("requestURI") or "")
        if name.startswith(layout.machine_prefix) or selected:
            result.machines.add(selected.group(1) if selected and not name else re.split(r"[-.]", name[len(layout.machine_prefix) :], maxsplit=1)[0])
            if ref.get("subresource") == "eviction":
                result.evictions += 1
            else:
                result.named[what] += 1
        else:
            result.unnamed[what] += 1
    return result


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def rounds_of(stdout: str) -> int:
    """How many machine_delete calls (rounds) the playbook made: one progress report each."""
    return max(1, stdout.count(" Machines after ") + stdout.count(" Machine after "))


def snapshot(scratch: Path) -> tuple[Path, str]:
    """The collection as committed (HEAD's plugins, roles, playbooks, meta), extracted under ``scratch``: other
    people's uncommitted edits in the checkout are not measured. Its ANSIBLE_COLLECTIONS_PATH and a description."""
    target = scratch / "collections" / "ansible_collections" / "lifecycle" / "machine"
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "HEAD", "--", *COLLECTION_PATHS], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return scratch / "collections", f"commit {commit} (HEAD, as committed)"


def worktree() -> tuple[Path, str]:
    """The checkout as it is, uncommitted edits and all."""
    edited = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", *COLLECTION_PATHS], capture_output=True, text=True, check=False)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
    return cluster_tool.collections_root(), f"the working tree at commit {commit}{' with uncommitted edits' if edited.stdout.strip() else ''}"


def machine_info() -> str:
    memory = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        memory = int(next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")).split()[1])
    return (
        f"{os.cpu_count()} cores, {memory / 1048576:.1f} GiB RAM, Python {platform.python_version()}, "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load {load()}"
    )


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Row:
    size: int
    layout: Layout
    concurrency: int
    run: Run
    requests: Requests
    apiserver_cpu: float
    load_before: str
    # Who deleted the Machines: the collection, or Cluster API's manager with its workers.
    actor: str = "collection"
    load_after: str = ""


def measure(
    kube: KubeApi,
    kubeconfig: str,
    layout: Layout,
    *,
    collection_kubeconfig: str,
    collection: Path,
    state_pids: dict,
    concurrency: int,
    capi_shaped: bool = False,
) -> Row:
    size = layout.size
    audit_log = Path(kubeconfig).parent / "audit.log"
    log(f"setting up {size} Machine(s), {PODS_PER_MACHINE} Pods each, {len(layout.clusters)} Cluster(s) in {len(layout.namespaces)} namespace(s) ...")
    started = time.monotonic()
    setup(kube, layout, Path(collection_kubeconfig).read_text(), capi=capi_shaped)
    log(f"  set up in {time.monotonic() - started:.1f} s; deleting them at concurrency {concurrency} ...")
    time.sleep(2)  # the set-up's last audit lines are written
    mark = audit_mark(audit_log)
    load_before = load()
    cpu_before = sum(cpu_seconds(state_pids.get(name)) for name in ("kube-apiserver", "etcd"))
    run = delete(collection_kubeconfig, layout, concurrency, collection)
    apiserver_cpu = sum(cpu_seconds(state_pids.get(name)) for name in ("kube-apiserver", "etcd")) - cpu_before
    if os.environ.get("LM_BENCH_VERBOSE"):
        log(run.stdout[-2500:])
    if run.exit_code != 0:
        raise SystemExit(f"the deletion of {size} Machine(s) failed (rc {run.exit_code}):\n{run.stdout[-4000:]}")
    left = kube.list(f"/apis/{CAPI}/machines", label_selector=f"lm-bench={layout.run}")
    if left:
        raise SystemExit(f"{len(left)} of {size} Machines were not deleted: {', '.join(m['metadata']['name'] for m in left[:10])}")
    time.sleep(2)
    requests = audit_requests(audit_log, mark, layout)
    row = Row(size, layout, concurrency, run, requests, apiserver_cpu, load_before, load_after=load())
    describe(row)
    return row


def process_peak_kib(pid: int | None) -> int:
    try:
        return next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0


def measure_capi(kube: KubeApi, kubeconfig: str, layout: Layout, *, capi_kubeconfig: str, state_dir: Path, built: Path, workers: int) -> Row:
    """The same Machines deleted by the real Cluster API manager (``--machine-concurrency=workers``), started
    for this run: set up under Clusters it watches, its nodeRefs waited for, then every Machine is deleted
    (a DELETE each, 16 at a time, as ``kubectl delete machines -l`` sends them) and the time is taken until
    the last is gone; the manager's requests from the audit log, its CPU and peak memory from /proc."""
    size = layout.size
    audit_log = Path(kubeconfig).parent / "audit.log"
    state = controllers.start_capi_manager(
        state_dir, built, watch_filter=CAPI_WATCH_FILTER, verbosity=0, kubeconfig=Path(capi_kubeconfig), args=(f"--machine-concurrency={workers}",)
    )
    pids = state.get("pids") or {}
    manager = pids.get(controllers.BINARY["capi"])
    try:
        log(f"setting up {size} Machine(s) for Cluster API ({workers} workers), {len(layout.clusters)} Cluster(s) in {len(layout.namespaces)} namespace(s) ...")
        started = time.monotonic()
        setup(kube, layout, Path(capi_kubeconfig).read_text(), capi=True, watched=True)
        log(f"  set up in {time.monotonic() - started:.1f} s; Cluster API deletes them ...")
        time.sleep(2)
        mark = audit_mark(audit_log)
        load_before = load()
        cpu_before = sum(cpu_seconds(pids.get(name)) for name in ("kube-apiserver", "etcd"))
        manager_before = cpu_seconds(manager)
        started = time.monotonic()
        in_pool(lambda entry: kube.fork().delete(f"/apis/{CAPI}/namespaces/{entry[0]}/machines/{entry[2]}"), layout.machines(), "the deletions")

        def gone() -> bool:
            return not kube.list(f"/apis/{CAPI}/machines", label_selector=f"lm-bench={layout.run}")

        cluster_tool.poll(gone, 3600, f"Cluster API to delete {size} Machine(s)", interval=0.5)
        wall = time.monotonic() - started
        apiserver_cpu = sum(cpu_seconds(pids.get(name)) for name in ("kube-apiserver", "etcd")) - cpu_before
        run = Run(wall, "", 0, process_peak_kib(manager), cpu_seconds(manager) - manager_before, {})
    finally:
        controllers.stop_capi_manager(state_dir)
    time.sleep(2)
    requests = audit_requests(audit_log, mark, layout, user=CAPI_USER)
    row = Row(size, layout, workers, run, requests, apiserver_cpu, load_before, actor=f"capi {workers}w", load_after=load())
    log(
        f"Cluster API ({workers} workers) deleted {size} Machine(s) in {wall:.1f} s; "
        f"manager CPU {run.tree_cpu:.1f} s, peak {run.tree_maxrss_kib / 1024:.0f} MiB"
    )
    describe(row)
    return row


def describe(row: Row) -> None:
    r = row.requests
    if row.actor == "collection":
        log(f"deleted {row.size} Machine(s) in {row.run.wall:.1f} s (ansible-playbook, start to end), {rounds_of(row.run.stdout)} round(s)")
    touched = max(1, len(r.machines))
    if len(r.machines) != row.size:
        log(f"  note: the audit log shows requests on {len(r.machines)} of {row.size} Machines")
    named = ", ".join(f"{what} {n / touched:.2f}" for what, n in sorted(r.named.items()))
    log(f"  naming one Machine's objects, per Machine ({touched}): {named or 'none'}; evictions {r.evictions / touched:.2f}")
    log(f"  naming none, in total: {', '.join(f'{what} {n}' for what, n in sorted(r.unnamed.items())) or 'none'}")
    if r.errors:
        log(f"  answered with an error: {', '.join(f'{what} x{n}' for what, n in sorted(r.errors.items()))}")
    if row.actor == "collection":
        modules = ", ".join(f"{module} {count} process(es), peak {peak / 1024:.0f} MiB" for module, (count, peak) in sorted(row.run.modules.items()))
        log(f"  module processes: {modules or 'none seen'}; whole playbook ru_maxrss {row.run.tree_maxrss_kib / 1024:.0f} MiB, CPU {row.run.tree_cpu:.1f} s")


def repeated(rows: list[Row]) -> set[str]:
    """The requests naming no Machine that came at least once per Machine in the largest run of 10 or more
    Machines (a cluster-wide list made for each Machine's drain, an Event per Machine): per Machine, not shared."""
    largest = max((row for row in rows if len(row.requests.machines) >= 10), key=lambda row: row.size, default=None)
    if largest is None:
        return set()
    return {what for what, n in largest.requests.unnamed.items() if n >= len(largest.requests.machines)}


def print_table(rows: list[Row], own_plane: bool) -> None:
    once_each = {actor: repeated([row for row in rows if row.actor == actor]) for actor in {row.actor for row in rows}}
    one = next((row.run.wall for row in rows if row.size == 1 and row.actor == "collection"), None)
    header = (
        f"{'who':>10} {'Machines':>8} {'clusters/ns':>11} {'conc.':>5} {'wall s':>7} {'x one':>6} {'s/Machine':>9} {'req/Machine':>11} {'writes/M':>8} "
        f"{'evict/M':>7} {'shared req':>10} {'all req/M':>9} {'API p50 ms':>10} {'API p99 ms':>10} {'API CPU s':>9} {'API CPU/M':>9} "
        f"{'client CPU':>10} {'module MiB':>10} {'playbook MiB':>12} {'load before':>15} {'load after':>15}"
    )
    log("")
    log(header)
    for row in rows:
        r, each = row.requests, once_each[row.actor]
        collection = row.actor == "collection"
        module_peak = max((peak for _name, peak in row.run.modules.values()), default=0) if collection else row.run.tree_maxrss_kib
        ratio = f"{row.run.wall / one:.2f}" if one and collection else "-"
        cpu = f"{row.apiserver_cpu:.1f}" if own_plane else "-"
        cpu_each = f"{row.apiserver_cpu / row.size:.3f}" if own_plane else "-"
        every = (sum(r.named.values()) + r.evictions + sum(r.unnamed.values())) / row.size
        playbook = f"{row.run.tree_maxrss_kib / 1024:.0f}" if collection else "-"
        log(
            f"{row.actor:>10} {row.size:>8} {f'{len(row.layout.clusters)}/{len(row.layout.namespaces)}':>11} {row.concurrency:>5} "
            f"{row.run.wall:>7.1f} {ratio:>6} "
            f"{row.run.wall / row.size:>9.3f} {r.per_machine(each):>11.2f} {r.writes_per_machine(each):>8.2f} {r.evictions / max(1, len(r.machines)):>7.2f} "
            f"{r.shared(each):>10} {every:>9.2f} "
            f"{statistics.median(r.latencies_ms) if r.latencies_ms else 0:>10.1f} {percentile(r.latencies_ms, 0.99):>10.1f} {cpu:>9} {cpu_each:>9} "
            f"{row.run.tree_cpu:>10.1f} {module_peak / 1024:>10.0f} {playbook:>12} {row.load_before:>15} {row.load_after:>15}"
        )
    log("")
    log(
        f"{PODS_PER_MACHINE} Pods per Machine (grace {GRACE_SECONDS} s); who: the collection (playbooks/delete_machine.yml) or Cluster API's "
        "manager with its Machine workers (capi Nw, --machine-concurrency); conc. = delete_machine_concurrency, or the workers; "
        "clusters/ns = Cluster objects "
        "(each with its own kubeconfig Secret) and namespaces; every Secret points at this same API server (self-hosted), not at "
        "separate workload API servers. req/Machine: the requests (all verbs and resources, audit log) naming one "
        "Machine or its Node, Pods, infrastructure and bootstrap objects, evictions apart, plus those naming none that came once "
        "or more per Machine; writes/M: the writes (create, patch, update, delete) among them; "
        "shared req: the rest (discovery, Clusters, Secrets, the Machine and whole-cluster lists and watches), in total; "
        "all req/M: every request, evictions and shared ones too, per Machine. "
        "API p50/p99: the control plane's time on those requests (requestReceivedTimestamp to stageTimestamp, "
        "watches left out); API CPU s: kube-apiserver + etcd CPU during the run (and per Machine). client CPU: the playbook's "
        "(modules too) or the manager's CPU seconds in the run. module MiB: the largest VmHWM of the AnsiballZ "
        "module processes (sampled every 0.2 s), or the manager's peak; playbook MiB: ru_maxrss of the whole playbook tree (wait4), "
        "the largest of its processes, controller or module. Wall: ansible-playbook start to end, or the first DELETE to the last "
        "Machine gone."
    )
    for actor, each in sorted(once_each.items()):
        if each:
            largest = max((row for row in rows if row.actor == actor), key=lambda row: row.size)
            touched = max(1, len(largest.requests.machines))
            named = ", ".join(f"{what} {largest.requests.unnamed[what] / touched:.2f}" for what in sorted(each))
            log(f"{actor}: naming no Machine but once or more per Machine ({largest.size} Machines), counted in req/Machine: {named}")
    for row in rows:
        touched = max(1, len(row.requests.machines))
        gets = sorted((what.split(" ", 1)[1], n) for what, n in row.requests.named.items() if what.startswith("get "))
        log(f"{row.actor}: GETs per Machine ({row.size} Machines), by resource: {', '.join(f'{what} {n / touched:.2f}' for what, n in gets) or 'none'}")
    if not own_plane:
        log("With --kubeconfig the requests are what that control plane's audit policy logs, which may be a part of them.")


def cleanup(kube: KubeApi, layouts: list[Layout]) -> None:
    """Delete what the runs created (on a control plane of the caller's)."""
    for layout in layouts:
        for namespace in layout.namespaces:
            for plural in ("machines", "clusters"):
                path = f"/apis/{CAPI}/namespaces/{namespace}/{plural}"
                with contextlib.suppress(Exception):
                    for item in kube.list(path):
                        kube.patch(f"{path}/{item['metadata']['name']}", {"metadata": {"finalizers": None}})
            with contextlib.suppress(Exception):
                kube.delete(f"/api/v1/namespaces/{namespace}")
        with contextlib.suppress(Exception):
            for node in kube.list("/api/v1/nodes", label_selector=f"lm-bench={layout.run}"):
                kube.delete(f"/api/v1/nodes/{node['metadata']['name']}")
    with contextlib.suppress(Exception):
        kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/lm-{IDENTITY_NAMESPACE}-{IDENTITY_NAME}")
    with contextlib.suppress(Exception):
        kube.delete(f"/api/v1/namespaces/{IDENTITY_NAMESPACE}")


def plan(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """(Machines, Clusters, concurrency) of each run. One concurrency and one layout: each size once, the largest
    spread over the Clusters, the others in one; several: every size at every concurrency in every layout."""
    if len(args.concurrencies) == 1 and len(args.layouts) == 1:
        largest = max(args.sizes)
        return [(size, args.layouts[0] if size == largest and size > 1 else 1, max(1, min(size, args.concurrencies[0]))) for size in args.sizes]
    runs = []
    for size in args.sizes:
        for clusters in args.layouts:
            for concurrency in args.concurrencies:
                runs.append((size, min(size, clusters), max(1, min(size, concurrency))))
    return list(dict.fromkeys(runs))


def benchmark(kubeconfig: str, args: argparse.Namespace, state_pids: dict, own_plane: bool) -> int:
    kube = api_from_kubeconfig(kubeconfig, user_agent=SETUP_USER_AGENT)
    built = None
    if args.beside:
        # Cluster API's own CRDs (v1beta2 served and stored) on the private control plane, for both: its manager owns them.
        built = controllers.build_controllers(("capi",), build=False)["capi"]
        controllers.apply_crds(cluster_tool._read_state(Path(kubeconfig).parent), built / "crds")
    else:
        cluster_tool.set_capi_generation(cluster_tool.state_from_kubeconfig(Path(kubeconfig)), "v1beta2")
    kube.discovery.invalidate()
    suffix = uuid.uuid4().hex[:5]
    layouts: list[Layout] = []
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="lm-bench-") as scratch:
        try:
            collection, what = worktree() if args.worktree else snapshot(Path(scratch))
            log(f"machine: {machine_info()}; collection: {what}")
            collection_kubeconfig = Path(scratch) / "kubeconfig"
            collection_kubeconfig.write_text(
                cluster_tool.service_account_kubeconfig(kubeconfig, IDENTITY_NAME, IDENTITY_NAMESPACE, expiration_seconds=12 * 3600)
            )
            for size, clusters, concurrency in plan(args):
                layout = layout_for(f"r{size}-c{concurrency}-k{clusters}-{suffix}", size, clusters, args.namespaces if clusters > 1 else 1)
                layouts.append(layout)
                rows.append(
                    measure(
                        kube,
                        kubeconfig,
                        layout,
                        collection_kubeconfig=str(collection_kubeconfig),
                        collection=collection,
                        state_pids=state_pids,
                        concurrency=concurrency,
                        capi_shaped=bool(args.beside),
                    )
                )
                if not own_plane:  # a private control plane goes as a whole
                    cleanup(kube, [layout])
            for size, clusters in dict.fromkeys((size, clusters) for size, clusters, _concurrency in plan(args)) if args.beside else []:
                capi_kubeconfig = Path(scratch) / "capi-kubeconfig"
                if not capi_kubeconfig.exists():
                    capi_kubeconfig.write_text(
                        cluster_tool.service_account_kubeconfig(kubeconfig, CAPI_IDENTITY_NAME, IDENTITY_NAMESPACE, expiration_seconds=12 * 3600)
                    )
                for workers in args.capi_workers:
                    layout = layout_for(f"r{size}-w{workers}-k{clusters}-{suffix}", size, clusters, args.namespaces if clusters > 1 else 1)
                    layouts.append(layout)
                    rows.append(
                        measure_capi(
                            kube, kubeconfig, layout, capi_kubeconfig=str(capi_kubeconfig), state_dir=Path(kubeconfig).parent, built=built, workers=workers
                        )
                    )
            print_table(rows, own_plane)
            return 0
        finally:
            if not own_plane:
                cleanup(kube, layouts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="a running control plane (default: start a private one)")
    parser.add_argument("--sizes", default="1,20,100", help="the numbers of Machines, one run each (default 1,20,100; the fleet: 1,20,100,1000)")
    parser.add_argument(
        "--concurrency",
        default="100",
        help="the most Machines deleted side by side (delete_machine_concurrency): min(size, this); several (10,100,1000): each size at each",
    )
    parser.add_argument(
        "--clusters", default="10", help="Cluster objects the largest size is spread over (default 10); several (1,10): each size in each layout"
    )
    parser.add_argument("--namespaces", type=int, default=5, help="namespaces those Clusters are in (default 5)")
    parser.add_argument("--worktree", action="store_true", help="measure the checkout as it is, not HEAD as committed")
    parser.add_argument("--keep", action="store_true", help="keep the private control plane's directory (its audit log) once stopped")
    parser.add_argument(
        "--beside",
        choices=["capi"],
        help="also delete the same Machines with the real Cluster API manager (v1.14.2, built by hack/build-controllers.sh), each size in each layout",
    )
    parser.add_argument("--capi-workers", default="10,100", help="with --beside capi: its --machine-concurrency values, one run each (default 10,100)")
    parser.add_argument("--machines", type=int, help=argparse.SUPPRESS)  # the old option: --sizes 1,N
    args = parser.parse_args(argv)
    try:
        args.sizes = sorted({int(size) for size in (f"1,{args.machines}" if args.machines else args.sizes).split(",") if size.strip()})
    except ValueError:
        args.sizes = []
    try:
        args.concurrencies = [int(value) for value in str(args.concurrency).split(",") if value.strip()]
        args.layouts = [int(value) for value in str(args.clusters).split(",") if value.strip()]
        args.capi_workers = [int(value) for value in str(args.capi_workers).split(",") if value.strip()]
    except ValueError:
        args.concurrencies = args.layouts = []
    if args.beside and args.kubeconfig:
        parser.error("--beside runs on a private control plane of its own (no --kubeconfig)")
    if not args.sizes or args.sizes[0] < 1 or not args.concurrencies or min(args.concurrencies) < 1 or not args.layouts or min(args.layouts) < 1:
        parser.error("--sizes, --concurrency and --clusters take positive numbers")
    cluster_tool.restore_sigint()
    if args.kubeconfig:
        return benchmark(str(Path(args.kubeconfig).resolve()), args, {}, own_plane=False)
    # The private control plane's audit policy also logs every request of the collection's identity.
    policy = copy.deepcopy(cluster_tool.AUDIT_POLICY)
    policy["rules"].insert(0, {"level": "Metadata", "users": [COLLECTION_USER, CAPI_USER]})
    cluster_tool.AUDIT_POLICY = policy
    state_dir = REPO / ".tmp" / f"bench-{os.getpid()}"
    log("starting a private control plane ...")
    try:
        state = cluster_tool.up(state_dir, quiet=True)
        return benchmark(str(state_dir / "kubeconfig"), args, state.get("pids") or {}, own_plane=True)
    finally:
        cluster_tool.down(state_dir)
        if args.keep:
            log(f"the control plane's directory (audit.log) is kept: {state_dir}")
        else:
            shutil.rmtree(state_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
