# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Pure logic of the volume-detach wait (docs/behaviour.md §4).

Before the Node of a deleted Machine goes away, Cluster API waits until the
volumes attached to it are detached, so that a cloud disk is not destroyed with
the VM it was still attached to. This module decides, from plain API dicts,
whether there is anything left to wait for and builds the progress message in
Cluster API's exact wording. It makes no API calls: the caller lists the Node,
VolumeAttachments, PersistentVolumes and the Pods the drain skipped.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.nodes import is_node_unreachable
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339

# How kubelet names a CSI volume in node.status.volumesAttached: the plugin name,
# then "<driver>^<volumeHandle>".
CSI_UNIQUE_NAME_PREFIX = "kubernetes.io/csi/"
CSI_UNIQUE_NAME_SEPARATOR = "^"

# Cluster API lists at most this many names per message line.
MAX_NAMES_PER_LINE = 5

MESSAGE_HEADER = "Waiting for Node volumes to be detached (started at {started_at})"
LINE_PVCS = "* PersistentVolumeClaims: "
LINE_PVS_WITHOUT_CLAIM = "* PersistentVolumes without a .spec.claimRef to a PersistentVolumeClaim: "
LINE_UNMATCHED_ATTACHED = "* Node with .status.volumesAttached entries not matching a PersistentVolume: "
LINE_UNMATCHED_ATTACHMENTS = "* VolumeAttachment with .spec.source.persistentVolumeName not matching a PersistentVolume: "

# Cluster API v1.14.2 stops each look of its wait with an error while a VolumeAttachment of the Node names no
# PersistentVolume (an inline or CSI-migrated volume): its Deleting message and the error (its Event says it).
VOLUME_ERROR_MESSAGE = "Error waiting for volumes to be detached from Node, please check controller logs for errors"
NO_PV_NAME_ERROR = "spec.source.persistentVolumeName for VolumeAttachment {name} is not set"

SKIP_NODE_GONE = "Node not found, skip waiting for volume detachment"
SKIP_NODE_UNREACHABLE = "Node is unreachable, skip waiting for volume detachment"


def _get(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...`` or ``None`` when any step is missing."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _namespaced(namespace: str | None, name: str | None) -> str:
    return f"{namespace or ''}/{name or ''}"


@dataclass
class AttachedVolumes:
    """The two views of what is attached to a Node.

    ``volume_names``: ``node.status.volumesAttached[].name`` (sorted, unique).
    ``attachments``: VolumeAttachment name -> ``spec.source.persistentVolumeName``
    (``None`` for an attachment without one, e.g. an inline volume), only for
    attachments of this Node with ``status.attached`` true.
    """

    volume_names: list[str] = field(default_factory=list)
    attachments: dict[str, str | None] = field(default_factory=dict)

    @property
    def pv_names(self) -> set[str]:
        return {pv_name for pv_name in self.attachments.values() if pv_name}

    @property
    def empty(self) -> bool:
        return not self.volume_names and not self.attachments

    def as_dict(self) -> dict:
        return {"volume_names": list(self.volume_names), "attachments": dict(sorted(self.attachments.items()))}


def attached_volumes(node: dict | None, volume_attachments: list[dict]) -> AttachedVolumes:
    """What the Node reports attached plus the VolumeAttachments still attached to it.

    ``volume_attachments`` may be the cluster-wide list: attachments for other
    Nodes and attachments not (or no longer) attached are ignored.
    """
    if node is None:
        return AttachedVolumes()
    node_name = _get(node, "metadata", "name")
    names = {entry.get("name") for entry in _get(node, "status", "volumesAttached") or [] if entry.get("name")}
    attachments: dict[str, str | None] = {}
    for attachment in volume_attachments:
        if _get(attachment, "status", "attached") is not True:
            continue
        if _get(attachment, "spec", "nodeName") != node_name:
            continue
        attachments[_get(attachment, "metadata", "name") or ""] = _get(attachment, "spec", "source", "persistentVolumeName") or None
    return AttachedVolumes(volume_names=sorted(names), attachments=attachments)


def unique_volume_name(pv: dict) -> str | None:
    """How ``pv`` appears in ``node.status.volumesAttached``; ``None`` when not a CSI volume.

    Only CSI volumes are mapped, as in Cluster API: ``kubernetes.io/csi/<driver>^<volumeHandle>``.
    An in-tree volume's entry therefore stays unmatched (and keeps the wait going)
    unless a VolumeAttachment names its PersistentVolume.
    """
    csi = _get(pv, "spec", "csi")
    if not isinstance(csi, dict) or not csi.get("driver") or not csi.get("volumeHandle"):
        return None
    return f"{CSI_UNIQUE_NAME_PREFIX}{csi['driver']}{CSI_UNIQUE_NAME_SEPARATOR}{csi['volumeHandle']}"


def claims_of_pods(pods: list[dict]) -> set[str]:
    """``namespace/name`` of every PersistentVolumeClaim the pods use.

    Besides ``persistentVolumeClaim`` volumes this includes generic ephemeral
    volumes, whose claim Kubernetes names ``<pod name>-<volume name>``.
    """
    claims: set[str] = set()
    for pod in pods:
        namespace = _get(pod, "metadata", "namespace")
        pod_name = _get(pod, "metadata", "name")
        for volume in _get(pod, "spec", "volumes") or []:
            claim_name = _get(volume, "persistentVolumeClaim", "claimName")
            if claim_name:
                claims.add(_namespaced(namespace, claim_name))
            elif isinstance(volume.get("ephemeral"), dict) and pod_name and volume.get("name"):
                claims.add(_namespaced(namespace, f"{pod_name}-{volume['name']}"))
    return claims


@dataclass
class VolumeWaitStatus:
    """What the volume-detach wait is still waiting for (every list sorted).

    ``pvcs``: ``namespace/name`` of attached claims not used by a skipped pod.
    ``pvs_without_claim``: attached PersistentVolumes whose ``spec.claimRef`` is
    absent or not a PersistentVolumeClaim.
    ``unmatched_attached``: ``node.status.volumesAttached`` names matching no PersistentVolume.
    ``unmatched_attachments``: names of attached VolumeAttachments whose
    ``spec.source.persistentVolumeName`` matches no PersistentVolume (or is unset).
    ``ignored_pvcs``: attached claims not waited for because a pod the drain
    skipped uses them (reported, never blocking).
    ``skipped``: why the wait does not apply at all (Node gone or unreachable), else ``None``.
    ``without_pv``: names of attached VolumeAttachments of the Node that name no PersistentVolume;
    while there is one, ``error`` is Cluster API's (the first by name, as it lists them) and the
    wait goes on as its controller's does, each look ending in that error.
    """

    pvcs: list[str] = field(default_factory=list)
    pvs_without_claim: list[str] = field(default_factory=list)
    unmatched_attached: list[str] = field(default_factory=list)
    unmatched_attachments: list[str] = field(default_factory=list)
    ignored_pvcs: list[str] = field(default_factory=list)
    skipped: str | None = None
    without_pv: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        return NO_PV_NAME_ERROR.format(name=self.without_pv[0]) if self.without_pv else None

    @property
    def waiting(self) -> bool:
        return bool(self.pvcs or self.pvs_without_claim or self.unmatched_attached or self.unmatched_attachments or self.without_pv)

    def as_dict(self) -> dict:
        return {
            "waiting": self.waiting,
            "pvcs": list(self.pvcs),
            "pvs_without_claim": list(self.pvs_without_claim),
            "unmatched_attached": list(self.unmatched_attached),
            "unmatched_attachments": list(self.unmatched_attachments),
            "ignored_pvcs": list(self.ignored_pvcs),
            "skipped": self.skipped,
            "without_pv": list(self.without_pv),
            "error": self.error,
        }


def volumes_to_wait_for(
    node: dict | None,
    volume_attachments: list[dict],
    persistent_volumes: list[dict],
    skipped_pods: list[dict],
) -> VolumeWaitStatus:
    """Decide what the detach wait is still waiting for.

    ``node`` is the Machine's Node (``None`` when it no longer exists);
    ``volume_attachments`` and ``persistent_volumes`` are cluster-wide lists;
    ``skipped_pods`` are the pods the drain Skipped on this Node (DaemonSet,
    mirror, skip label or rule): their claims stay attached until the Node goes
    away, so waiting for them would only ever end at the timeout.
    """
    if node is None:
        return VolumeWaitStatus(skipped=SKIP_NODE_GONE)
    if is_node_unreachable(node):
        # Nothing can detach from a Node whose kubelet does not answer.
        return VolumeWaitStatus(skipped=SKIP_NODE_UNREACHABLE)

    attached = attached_volumes(node, volume_attachments)
    if attached.empty:
        return VolumeWaitStatus()
    without_pv = sorted(name for name, pv_name in attached.attachments.items() if not pv_name)
    if without_pv:
        # As Cluster API v1.14.2: an error before anything else is looked at, which holds the wait while it lasts.
        return VolumeWaitStatus(without_pv=without_pv)

    claims_to_ignore = claims_of_pods(skipped_pods)
    attached_volume_names = set(attached.volume_names)
    attached_pv_names = attached.pv_names
    matched_volume_names: set[str] = set()
    matched_pv_names: set[str] = set()
    pvcs: set[str] = set()
    ignored: set[str] = set()
    pvs_without_claim: set[str] = set()

    for pv in persistent_volumes:
        pv_name = _get(pv, "metadata", "name")
        volume_name = unique_volume_name(pv)
        found = False
        if volume_name in attached_volume_names:
            matched_volume_names.add(volume_name)
            found = True
        if pv_name in attached_pv_names:
            matched_pv_names.add(pv_name)
            found = True
        if not found:
            continue
        claim_ref = _get(pv, "spec", "claimRef")
        # Only a reference of kind PersistentVolumeClaim can be mapped to a claim (and so to a skipped pod).
        if not isinstance(claim_ref, dict) or claim_ref.get("kind") != "PersistentVolumeClaim":
            pvs_without_claim.add(pv_name or "")
            continue
        claim = _namespaced(claim_ref.get("namespace"), claim_ref.get("name"))
        (ignored if claim in claims_to_ignore else pvcs).add(claim)

    return VolumeWaitStatus(
        pvcs=sorted(pvcs),
        pvs_without_claim=sorted(pvs_without_claim),
        unmatched_attached=sorted(attached_volume_names - matched_volume_names),
        unmatched_attachments=sorted(name for name, pv_name in attached.attachments.items() if pv_name not in matched_pv_names),
        ignored_pvcs=sorted(ignored),
    )


def names_to_string(names: list[str], limit: int = MAX_NAMES_PER_LINE) -> str:
    """``a, b, c, d, e, ... (N more)``: at most ``limit`` names, in the order given."""
    shown = list(names[:limit])
    if len(names) > limit:
        shown.append(f"... ({len(names) - limit} more)")
    return ", ".join(shown)


def volume_detach_message(started_at: _dt.datetime, status: VolumeWaitStatus) -> str:
    """Cluster API's progress message of the wait, one ``* `` line per non-empty list.

    ``started_at`` must be timezone-aware (it is printed in UTC). With nothing to
    list the message is the header alone.
    """
    lines = [MESSAGE_HEADER.format(started_at=rfc3339(started_at))]
    for prefix, names in (
        (LINE_PVCS, status.pvcs),
        (LINE_PVS_WITHOUT_CLAIM, status.pvs_without_claim),
        (LINE_UNMATCHED_ATTACHED, status.unmatched_attached),
        (LINE_UNMATCHED_ATTACHMENTS, status.unmatched_attachments),
    ):
        if names:
            lines.append(prefix + names_to_string(sorted(names)))
    return "\n".join(lines)
