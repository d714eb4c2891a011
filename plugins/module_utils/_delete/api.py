# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What check mode reads, once per task, to answer for the chosen Machines
together (``_delete/preflight.py``): per cluster where their Nodes are, one
list of the Nodes and one of the PodDisruptionBudgets, one of the Pods that
have not ended (what they request is what the Nodes have no longer free, for
the room the replacements need; only when a Pod the drains would evict has a
controller to recreate it), and one GET of each controller (ReplicaSet,
StatefulSet, ReplicationController) of a Pod the drains would evict, for its
replicas. Nothing waits: a read that fails leaves
that part uncounted, and the answer says so."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import DRAIN
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.paths import BUDGETS, NODES, resource_path
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.api import node_api, workload_of
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import WorkloadSettings

# The Pods that hold room on their Node (those that ended do not).
NOT_ENDED = "status.phase!=Succeeded,status.phase!=Failed"
# The controllers whose replicas the preflight reads, by kind: (apiVersion, plural).
CONTROLLERS = {
    "ReplicaSet": ("apps/v1", "replicasets"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "ReplicationController": ("v1", "replicationcontrollers"),
}


def _listed(api: KubeApi, path: str, errors: list[str], what: str, field_selector: str | None = None) -> list[dict] | None:
    try:
        return api.list(path, field_selector=field_selector)
    except ApiError as exc:
        errors.append(f"cannot list {what}: {exc.describe()}")
        return None


def _controllers(api: KubeApi, pods: list[dict], errors: list[str]) -> dict[str, dict]:
    """Controller UID -> its kind, name, replicas and owner, for the controllers of ``pods``. A kind the identity may
    not read (403) is said once in ``errors`` and not asked again: its replicas are not judged."""
    found: dict[str, dict] = {}
    forbidden: set[str] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") is not True or ref.get("kind") not in CONTROLLERS or ref.get("uid") in found or ref["kind"] in forbidden:
                continue
            api_version, plural = CONTROLLERS[ref["kind"]]
            try:
                controller = api.get(resource_path(api_version, plural, meta.get("namespace"), ref.get("name")))
            except ApiError as exc:
                if exc.status == 403:
                    forbidden.add(ref["kind"])
                    errors.append(f"cannot read {ref['kind']}s (get {plural}, API group {api_version.rpartition('/')[0] or 'core'}): {exc.describe()}")
                else:
                    errors.append(f"cannot read {ref['kind']} {meta.get('namespace')}/{ref.get('name')}: {exc.describe()}")
                controller = None
            if controller is None or (controller.get("metadata") or {}).get("uid") != ref.get("uid"):
                continue
            owner = next((o for o in (controller["metadata"].get("ownerReferences") or []) if o.get("controller") is True), None)
            found[ref["uid"]] = {
                "kind": ref["kind"],
                "name": ref.get("name"),
                "replicas": (controller.get("spec") or {}).get("replicas", 1),
                "owner": {"kind": owner.get("kind"), "name": owner.get("name")} if owner else None,
            }
    return found


def _recreated(pod: dict) -> bool:
    return any(ref.get("controller") is True for ref in (pod.get("metadata") or {}).get("ownerReferences") or [])


def _drained(machine: dict, pod: dict) -> bool:
    """Whether the Machine's drain decided to evict ``pod``."""
    meta = pod.get("metadata") or {}
    return any(d.get("behavior") == DRAIN and (d.get("namespace"), d.get("name")) == (meta.get("namespace"), meta.get("name")) for d in machine["decisions"])


def read_batch(api: KubeApi, settings: WorkloadSettings, previews: list[tuple[str, dict | None, dict | None]]) -> dict:
    """The facts :func:`preflight.batch_findings` takes, from ``previews`` - (Machine key, the Machine as
    the run last read it, its drain preview: ``node``, ``pods``, ``decisions``) - and one list of Nodes
    and of budgets per cluster where their Nodes are, and of the Pods there when some evicted Pod comes back."""
    machines: list[dict] = []
    apis: dict[str, KubeApi] = {}
    errors: dict[str, list[str]] = {}
    for key, machine, preview in previews:
        if machine is None or not preview or not preview.get("node"):
            continue
        try:
            flavour = flavour_for(machine)
            where = workload_of(machine, flavour)
            side = node_api(api, machine, settings, flavour)
        except (MachineError, ApiError):
            continue  # its drain preview failed the same way: the Machine's own outcome says so
        cluster = f"{where[0]}/{where[1]}" if where is not None and side is not api else ""
        apis.setdefault(cluster, side)
        node = (preview["node"].get("metadata") or {}).get("name")
        machines.append({"key": key, "cluster": cluster, "node": node, "pods": preview.get("pods") or [], "decisions": preview.get("decisions") or []})
    clusters: dict[str, dict] = {}
    for cluster, side in sorted(apis.items()):
        problems = errors.setdefault(cluster, [])
        pods = [pod for machine in machines if machine["cluster"] == cluster for pod in machine["pods"] if _drained(machine, pod)]
        clusters[cluster] = {
            "nodes": _listed(side, NODES, problems, "Nodes"),
            "budgets": _listed(side, BUDGETS, problems, "PodDisruptionBudgets"),
            "controllers": _controllers(side, pods, problems),
            **({"pods": _listed(side, resource_path("v1", "pods"), problems, "Pods", NOT_ENDED)} if any(_recreated(pod) for pod in pods) else {}),
            "errors": problems,
        }
    return {"machines": machines, "clusters": clusters}
