# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The flavour adapter: the only place that knows where an OpenShift Machine
API or a Cluster API Machine keeps its hooks, conditions, timeouts, Node and
infrastructure references, and what each API allows. Callers get a flavour
from :func:`flavour_for` and ask it; they never branch on apiVersion.

Everything here is pure: Machine dicts as the API returns them in, values or
patch bodies out.
"""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.base import (
    CAPI_CLUSTER_NAME_LABEL,
    CAPI_CONTROL_PLANE_LABEL,
    CAPI_DEFAULT_NODE_DELETION_TIMEOUT,
    CAPI_GROUP,
    CAPI_HOOK_PREFIXES,
    CLUSTERAPI,
    HOOK_POINTS,
    OPENSHIFT,
    OPENSHIFT_GROUP,
    PAST_DRAIN_REASONS,
    PRE_CREATE,
    PRE_DRAIN,
    PRE_TERMINATE,
    Flavour,
    Hook,
    ObjectRef,
    hooks_summary,
    hooks_text,
    is_deleting,
    machine_label,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.capi import ClusterAPIFlavour
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour.openshift import OpenShiftFlavour

__all__ = [
    "CAPI_CLUSTER_NAME_LABEL",
    "CAPI_CONTROL_PLANE_LABEL",
    "CAPI_DEFAULT_NODE_DELETION_TIMEOUT",
    "CAPI_GROUP",
    "CAPI_HOOK_PREFIXES",
    "CLUSTERAPI",
    "HOOK_POINTS",
    "OPENSHIFT",
    "OPENSHIFT_GROUP",
    "PAST_DRAIN_REASONS",
    "PRE_CREATE",
    "PRE_DRAIN",
    "PRE_TERMINATE",
    "ClusterAPIFlavour",
    "Flavour",
    "Hook",
    "ObjectRef",
    "OpenShiftFlavour",
    "flavour_for",
    "hooks_summary",
    "hooks_text",
    "is_deleting",
    "machine_label",
]


def flavour_for(machine_or_api_version: dict | str) -> Flavour:
    """The flavour of a Machine (or of an apiVersion string)."""
    api_version = machine_or_api_version if isinstance(machine_or_api_version, str) else machine_or_api_version.get("apiVersion", "")
    group = api_version.rpartition("/")[0]
    if group == OPENSHIFT_GROUP:
        return OpenShiftFlavour(api_version)
    if group == CAPI_GROUP:
        return ClusterAPIFlavour(api_version)
    raise MachineError(f"Unsupported Machine apiVersion {api_version!r}: expected {OPENSHIFT_GROUP}/v1beta1 or {CAPI_GROUP}/v1beta1 or v1beta2")
