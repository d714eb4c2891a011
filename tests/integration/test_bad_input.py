"""Every row of docs/bad_input.md, proven against the real control plane.

The page is the only list: each row becomes one test (its ID is the test's id)
that creates what the row's Given says, runs its module, role or playbook with
its Input, and asserts that

- the task fails, with a message that contains the row's Message;
- no traceback reached the user;
- nothing changed: the resourceVersion of every object the test created (Node,
  Pod, Machines, Cluster, Alive) and of the Namespaces and Nodes the Input names
  (absent ones stay absent) is the same afterwards, and the API server's
  audit log holds no write (create, update, patch, delete) by the user the
  modules run as since the task started, other than the control plane's own
  (the log records every request on Machines, evictions and Pod and Node deletions).

A row added to the page is tested without touching this file, as long as its
Given is one of the legend's (tests/unit/docs/test_bad_input_page.py checks that).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from khelpers import pod_is_ready, wait_for

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit" / "docs"))

from bad_input_table import (
    ALIVE,
    DELETING_ALIVE,
    DELETING_MACHINE,
    MACHINE,
    NODE,
    NOTHING,
    PAUSED_DELETING_MACHINE,
    PAUSED_MACHINE,
    TIMESTAMP,
    BadInput,
    catalogue,
)

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

ROWS = catalogue()
ALIVE_API = "lifecycle.machine.dev/v1alpha1"
HOLDER = "keep.example.com/hold"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
ADMIN = "admin"  # the user of the test kubeconfig, and so of the modules (hack/cluster.py)
# The control plane's components use that user too (the namespace controller empties the namespaces of earlier tests).
COMPONENTS = ("kube-controller-manager/", "kube-scheduler/", "kwok/")
TRACEBACK = "Traceback (most recent call last)"
JSON_OUTPUT = {"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}


def alive_path(namespace: str, name: str = "cluster") -> str:
    return f"/apis/{ALIVE_API}/namespaces/{namespace}/alives/{name}"


@dataclass
class World:
    """What a row starts from: the names its placeholders stand for and the objects that must not change."""

    names: dict[str, str]
    paths: list[str] = field(default_factory=list)

    def substitute(self, value):
        if isinstance(value, str):
            for placeholder, name in self.names.items():
                value = value.replace(placeholder, name)
            return value
        if isinstance(value, list):
            return [self.substitute(item) for item in value]
        if isinstance(value, dict):
            return {key: self.substitute(item) for key, item in value.items()}
        return value

    def pattern(self, message: str) -> re.Pattern:
        """The row's Message as a regular expression: placeholders are the names, ``<timestamp>`` any time."""
        text = re.escape(message)
        for placeholder, name in self.names.items():
            text = text.replace(re.escape(placeholder), re.escape(name))
        return re.compile(text.replace(re.escape(TIMESTAMP), r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"))

    def track(self, options: dict) -> None:
        """Also watch the Namespaces and Nodes the options name, whether they exist or not: a typo must not create them."""
        for key, value in options.items():
            if isinstance(value, str) and value.strip() and (key == "node" or key.endswith("namespace")):
                path = f"/api/v1/nodes/{value}" if key == "node" else f"/api/v1/namespaces/{value}"
                if path not in self.paths:
                    self.paths.append(path)

    def versions(self, kube: KubeApi) -> dict[str, str | None]:
        return {path: ((kube.get(path) or {}).get("metadata") or {}).get("resourceVersion") for path in self.paths}


@pytest.fixture
def alive_cleanup(kube: KubeApi, namespace: str):
    """Strip the finalizers of the test's Alive object afterwards, so that its namespace can go."""
    yield
    path = alive_path(namespace)
    if kube.get(path) is not None:
        kube.patch(path, {"metadata": {"finalizers": None}})
        kube.delete(path)


def build_world(row: BadInput, *, kube: KubeApi, namespace: str, make_node, make_machine, capi_cluster) -> World:
    """Create what the row's Given says (docs/bad_input.md, legend)."""
    suffix = uuid.uuid4().hex[:6]
    world = World({"<namespace>": namespace, "<node>": f"bi-node-{suffix}", "<machine>": f"bi-machine-{suffix}"})
    scenario = row.scenario
    paused = scenario in (PAUSED_MACHINE, PAUSED_DELETING_MACHINE)
    scenario = {PAUSED_MACHINE: MACHINE, PAUSED_DELETING_MACHINE: DELETING_MACHINE}.get(scenario, scenario)
    if scenario in (NODE, MACHINE, DELETING_MACHINE):
        node = make_node(world.names["<node>"])
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
        }
        pods = f"/api/v1/namespaces/{namespace}/pods"
        kube.create(pods, pod)
        wait_for(lambda: pod_is_ready(kube.get(f"{pods}/web") or {}), 60, what="the Pod on the Node")
        world.paths += [f"/api/v1/nodes/{node}", f"{pods}/web"]
    if scenario in (MACHINE, DELETING_MACHINE):
        if row.flavour != "openshift":
            cluster = capi_cluster(namespace)
            capi = f"/apis/cluster.x-k8s.io/{row.flavour}/namespaces/{namespace}"
            world.paths += [f"{capi}/clusters/{cluster}", f"{capi}/machines/control-plane-0"]
        # A paused Machine carries Cluster API's pause annotation (Cluster API Machines only: docs/behaviour.md, "Hands off").
        extra = {"annotations": {"cluster.x-k8s.io/paused": ""}} if paused else {}
        machine = make_machine(namespace, name=world.names["<machine>"], node=world.names["<node>"], **extra)
        path = f"/apis/{machine['apiVersion']}/namespaces/{namespace}/machines/{machine['metadata']['name']}"
        if scenario == DELETING_MACHINE:
            kube.delete(path)  # the finalizer keeps it, being deleted
        world.paths.append(path)
    if scenario in (ALIVE, DELETING_ALIVE):
        body = {"apiVersion": ALIVE_API, "kind": "Alive", "metadata": {"name": "cluster", "finalizers": [HOLDER]}, "spec": {}}
        kube.create(f"/apis/{ALIVE_API}/namespaces/{namespace}/alives", body)
        if scenario == DELETING_ALIVE:
            kube.delete(alive_path(namespace))
        world.paths.append(alive_path(namespace))
    assert scenario == NOTHING or world.paths, f"{row.id}: Given {row.given!r} created nothing"
    return world


@dataclass
class Outcome:
    failed: bool
    msg: str
    text: str  # everything the user saw (for tracebacks)
    traceback: bool


def run_row(row: BadInput, world: World, run_module, run_playbook, tmp_path: Path) -> Outcome:
    options = world.substitute(row.input)
    if row.kind == "module":
        result = run_module(row.name, options)
        text = json.dumps(result)
        # ansible-core 2.19 puts "exception": "(traceback unavailable)" into every failed result: no traceback in it.
        traceback = crashed(result) or TRACEBACK in text
        return Outcome(bool(result.get("failed")), str(result.get("msg", "")), text, traceback)
    if row.kind == "role":
        play = [
            {
                "name": f"Bad input {row.id}",
                "hosts": "localhost",
                "gather_facts": False,
                "tasks": [{"name": f"Run role {row.name}", "ansible.builtin.include_role": {"name": f"lifecycle.machine.{row.name}"}, "vars": options}],
            }
        ]
        playbook = tmp_path / "play.yml"
        playbook.write_text(yaml.safe_dump(play))
        proc = run_playbook(playbook, env_extra=JSON_OUTPUT)
    else:
        proc = run_playbook(REPO / "playbooks" / row.name, options, env_extra=JSON_OUTPUT)
    return playbook_outcome(proc)


def crashed(result: dict) -> bool:
    """Whether a module died instead of failing with a message (its stderr, a traceback, MODULE FAILURE)."""
    return "module_stderr" in result or str(result.get("msg", "")).startswith("MODULE FAILURE") or TRACEBACK in str(result.get("exception", ""))


def playbook_outcome(proc: subprocess.CompletedProcess) -> Outcome:
    """The first failed task of a playbook run (ansible.posix.json output)."""
    text = proc.stdout + proc.stderr
    traceback = TRACEBACK in text
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return Outcome(proc.returncode != 0, "", text, traceback)
    for play in report.get("plays") or []:
        for task in play.get("tasks") or []:
            for result in (task.get("hosts") or {}).values():
                results = [result, *(result.get("results") or [])]
                failed = [entry for entry in results if entry.get("failed")]
                if failed:
                    traceback = traceback or any(crashed(entry) for entry in failed)
                    return Outcome(proc.returncode != 0, str(failed[-1].get("msg", "")), text, traceback)
    return Outcome(proc.returncode != 0, "", text, traceback)


class AuditLog:
    """The API server's audit log, read from where the test started."""

    def __init__(self, kubeconfig: str):
        self.path = Path(kubeconfig).parent / "audit.log"
        if not self.path.exists():
            pytest.skip("this control plane keeps no audit log")
        self.offset = self.path.stat().st_size

    def writes(self) -> list[str]:
        """``verb requestURI`` of every write by the modules' user since the log was opened."""
        with self.path.open() as handle:
            handle.seek(self.offset)
            events = [json.loads(line) for line in handle if line.strip()]
        return [
            f"{e['verb']} {e.get('requestURI')}"
            for e in events
            if e.get("verb") in WRITES and (e.get("user") or {}).get("username") == ADMIN and not (e.get("userAgent") or "").startswith(COMPONENTS)
        ]


@pytest.mark.parametrize(("row", "flavour"), [pytest.param(row, row.flavour or "v1beta2", id=row.id) for row in ROWS], indirect=["flavour"])
def test_bad_input_fails_clearly_and_changes_nothing(
    *,
    row: BadInput,
    flavour: str,
    kube: KubeApi,
    kubeconfig: str,
    namespace: str,
    make_node,
    make_machine,
    capi_cluster,
    alive_cleanup,
    run_module,
    run_playbook,
    tmp_path,
) -> None:
    world = build_world(row, kube=kube, namespace=namespace, make_node=make_node, make_machine=make_machine, capi_cluster=capi_cluster)
    world.track(world.substitute(row.input))
    before = world.versions(kube)
    audit = AuditLog(kubeconfig)

    outcome = run_row(row, world, run_module, run_playbook, tmp_path)

    assert outcome.failed, f"{row.id} (docs/bad_input.md:{row.line}) did not fail:\n{outcome.text[-3000:]}"
    assert world.pattern(row.message).search(outcome.msg), f"{row.id} (docs/bad_input.md:{row.line}): the message is\n{outcome.msg}"
    assert not outcome.traceback, f"{row.id}: a traceback reached the user:\n{outcome.text[-3000:]}"
    assert world.versions(kube) == before, f"{row.id}: an object changed"
    assert audit.writes() == [], f"{row.id}: the task wrote to the API"
