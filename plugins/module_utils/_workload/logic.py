# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Where a Machine's Node lives (pure; docs/topology.md).

A Cluster API Machine lives in the management cluster; its Node, the Node's
Pods, PodDisruptionBudgets and VolumeAttachments live in the Machine's
workload cluster, which Cluster API's controllers reach through the Secret
``<cluster>-kubeconfig`` (key ``value``) in the Machine's namespace. An
OpenShift Machine and its Node live in one cluster.

The ``workload_cluster`` option says how a task reaches a workload cluster:
from that Secret (the default), through the task's own connection (a
self-hosted cluster, whose Machines and Nodes live together), or from a
kubeconfig the user gives, for every cluster or per cluster name.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError

try:
    import yaml
except ImportError:  # pragma: no cover - the kubernetes client requires PyYAML
    yaml = None

SECRET, MANAGEMENT, KUBECONFIG = "secret", "management", "kubeconfig"
SOURCES = (SECRET, MANAGEMENT, KUBECONFIG)
OPTION = "workload_cluster"
ENTRY_KEYS = ("source", "kubeconfig", "context")
SECRET_KEY = "value"
SECRET_SUFFIX = "-kubeconfig"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"


@dataclass(frozen=True)
class WorkloadEntry:
    """How to reach one workload cluster (or, as the default, every one)."""

    source: str = SECRET
    kubeconfig: Any = None  # a path, or a kubeconfig as a mapping
    context: str | None = None


@dataclass(frozen=True)
class WorkloadSettings:
    """The ``workload_cluster`` option, checked: the default entry and the
    entries per cluster (keyed ``namespace/name`` or ``name``)."""

    default: WorkloadEntry = field(default_factory=WorkloadEntry)
    clusters: dict[str, WorkloadEntry] = field(default_factory=dict)

    def entry(self, namespace: str, cluster: str) -> WorkloadEntry:
        return self.clusters.get(f"{namespace}/{cluster}") or self.clusters.get(cluster) or self.default

    def as_option(self) -> dict:
        """Back to the option's shape (what a task passes on to another task)."""

        def one(entry: WorkloadEntry) -> dict:
            return {key: value for key, value in (("source", entry.source), ("kubeconfig", entry.kubeconfig), ("context", entry.context)) if value}

        option = one(self.default)
        if self.clusters:
            option["clusters"] = {key: one(entry) for key, entry in self.clusters.items()}
        return option


def _entry(value: Any, where: str, errors: list[str]) -> WorkloadEntry:
    if isinstance(value, str):
        # A cluster given as just a source ("management"), or as a kubeconfig path.
        value = {"source": value} if value in SOURCES else {"kubeconfig": value}
    if not isinstance(value, dict):
        errors.append(f"{where} must be a mapping with {', '.join(ENTRY_KEYS)}, not {type(value).__name__}")
        return WorkloadEntry()
    unknown = sorted(set(value) - set(ENTRY_KEYS) - ({"clusters"} if where == OPTION else set()))
    if unknown:
        errors.append(f"{where} has unknown key(s) {', '.join(unknown)} (known: {', '.join(ENTRY_KEYS + (('clusters',) if where == OPTION else ()))})")
    kubeconfig, context = value.get("kubeconfig"), value.get("context")
    source = value.get("source") or (KUBECONFIG if kubeconfig else SECRET)
    if source not in SOURCES:
        errors.append(f"{where}.source must be one of {', '.join(SOURCES)}, not {source!r}")
    elif source == KUBECONFIG and not kubeconfig:
        errors.append(f"{where}.source is kubeconfig but {where}.kubeconfig is not given")
    elif source != KUBECONFIG and (kubeconfig or context):
        given = "kubeconfig" if kubeconfig else "context"
        errors.append(f"{where}.{given} is given but {where}.source is {source}: a {given} is only used with source kubeconfig")
    if kubeconfig is not None and not isinstance(kubeconfig, (str, dict)):
        errors.append(f"{where}.kubeconfig must be a path or a mapping, not {type(kubeconfig).__name__}")
    if context is not None and not isinstance(context, str):
        errors.append(f"{where}.context must be a string")
    return WorkloadEntry(source=source, kubeconfig=kubeconfig or None, context=context or None)


def workload_settings(value: Any, errors: list[str] | None = None) -> WorkloadSettings:
    """The ``workload_cluster`` option, checked; MachineError naming every mistake
    (or, given ``errors``, the mistakes are added to it and the caller raises)."""
    own = errors is None
    errors = [] if errors is None else errors
    if value in (None, {}):
        return WorkloadSettings()
    default = _entry(value, OPTION, errors)
    clusters: dict[str, WorkloadEntry] = {}
    given = value.get("clusters") if isinstance(value, dict) else None
    if given is not None and not isinstance(given, dict):
        errors.append(f"{OPTION}.clusters must map cluster names (or namespace/name) to how each is reached")
        given = None
    for name, entry in (given or {}).items():
        key = str(name)
        parts = key.split("/")
        if not all(parts) or len(parts) > 2:
            errors.append(f"{OPTION}.clusters: {key!r} is not a cluster name nor namespace/name")
            continue
        clusters[key] = _entry(entry, f"{OPTION}.clusters[{key}]", errors)
    if own and errors:
        raise MachineError("Invalid workload_cluster: " + "; ".join(errors))
    return WorkloadSettings(default=default, clusters=clusters)


def secret_name(cluster: str) -> str:
    return cluster + SECRET_SUFFIX


def cluster_label(namespace: str, cluster: str) -> str:
    """How messages name a workload cluster."""
    return f"the workload cluster {namespace}/{cluster}"


def cluster_key(namespace: str, cluster: str, entry: WorkloadEntry) -> str:
    """One connection per workload cluster per run: the key it is shared under."""
    if entry.source == KUBECONFIG:
        kubeconfig = entry.kubeconfig if isinstance(entry.kubeconfig, str) else json.dumps(entry.kubeconfig, sort_keys=True)
        return f"kubeconfig:{kubeconfig}:{entry.context or ''}"
    return f"secret:{namespace}/{cluster}"


def fix_hint(cluster: str) -> str:
    return (
        f"or say how to reach it with the option workload_cluster (clusters: {{{cluster}: {{kubeconfig: <path>}}}}, "
        "or source: management for a self-hosted cluster whose Nodes are in the management cluster)"
    )


def no_cluster_message(machine_label: str) -> str:
    return (
        f"Cannot tell which workload cluster Machine {machine_label} belongs to: it has neither spec.clusterName "
        f"nor the label {CLUSTER_NAME_LABEL}; its Node is not touched. Set the option workload_cluster "
        "(source: management for a self-hosted cluster, or a kubeconfig)"
    )


def missing_secret_message(machine_label: str, namespace: str, cluster: str) -> str:
    return (
        f"Cannot reach the workload cluster of Machine {machine_label}: the Secret {namespace}/{secret_name(cluster)} "
        f"(its kubeconfig) does not exist in the management cluster; its Node is not touched. Create it as Cluster API does, " + fix_hint(cluster)
    )


def unreadable(exc: Exception) -> str:
    """Why a kubeconfig's text cannot be read, without quoting it (a YAML error quotes the line, which may hold a token)."""
    if isinstance(exc, binascii.Error):
        return "not base64"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"not YAML: {getattr(exc, 'problem', None) or type(exc).__name__}{where}"


def kubeconfig_from_secret(secret: dict, namespace: str, cluster: str) -> dict:
    """The kubeconfig a Cluster API kubeconfig Secret holds (key ``value``), as a
    mapping; MachineError saying what is wrong with the Secret."""
    name = f"{namespace}/{secret_name(cluster)}"
    encoded = (secret.get("data") or {}).get(SECRET_KEY)
    if not encoded:
        raise MachineError(
            f"Cannot reach {cluster_label(namespace, cluster)}: the Secret {name} has no key {SECRET_KEY!r} "
            f"(keys: {', '.join(sorted(secret.get('data') or {})) or 'none'}); Cluster API keeps the kubeconfig there. Fix the Secret, " + fix_hint(cluster)
        )
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
        config = yaml.safe_load(text) if yaml is not None else json.loads(text)
    except (binascii.Error, UnicodeDecodeError, ValueError, getattr(yaml, "YAMLError", ValueError)) as exc:
        raise MachineError(
            f"Cannot reach {cluster_label(namespace, cluster)}: {SECRET_KEY!r} in the Secret {name} is not a kubeconfig ({unreadable(exc)}). Fix the Secret, "
            + fix_hint(cluster)
        ) from None
    if not isinstance(config, dict) or not config.get("clusters"):
        raise MachineError(
            f"Cannot reach {cluster_label(namespace, cluster)}: {SECRET_KEY!r} in the Secret {name} is not a kubeconfig (no clusters in it). Fix the Secret, "
            + fix_hint(cluster)
        )
    return config


def provider_id_conflict(machine: dict, node: dict | None, where: str) -> str | None:
    """Why ``node`` is not the Machine's own Node although it has the name the
    Machine's nodeRef gives: both carry a providerID and they differ (a Node name
    reused by another machine, or the wrong cluster). None when nothing says so."""
    if not node:
        return None
    machine_id = (machine.get("spec") or {}).get("providerID")
    node_id = (node.get("spec") or {}).get("providerID")
    if not machine_id or not node_id or machine_id == node_id:
        return None
    metadata = machine.get("metadata") or {}
    return (
        f"Refusing to touch Node {node['metadata']['name']} in {where}: its spec.providerID is {node_id!r} but Machine "
        f"{metadata.get('namespace')}/{metadata.get('name')} has {machine_id!r}, so it is another machine's Node "
        "(a Node name reused, or the wrong cluster); it is neither drained nor deleted"
    )
