# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the drain reads of a Pod (pure): its key, its controller, whether it
still runs, its volumes and the claims they use."""

from __future__ import annotations

FINISHED_PHASES = ("Succeeded", "Failed")


def meta(obj: dict | None) -> dict:
    """``metadata`` of any object (``{}`` when there is none)."""
    return ((obj or {}).get("metadata")) or {}


def pod_key(pod: dict) -> str:
    """``namespace/name`` of a Pod (or of any namespaced object)."""
    pod_meta = meta(pod)
    return f"{pod_meta.get('namespace', '')}/{pod_meta.get('name', '')}"


def controller_of(pod: dict) -> dict | None:
    """Like metav1.GetControllerOf: the first ownerReference with controller=true."""
    for ref in meta(pod).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return ref
    return None


def phase(pod: dict) -> str:
    return ((pod.get("status") or {}).get("phase")) or ""


def is_running(pod: dict) -> bool:
    """Not Succeeded or Failed: Pending and unknown phases count as running, as upstream."""
    return phase(pod) not in FINISHED_PHASES


def volumes(pod: dict) -> list[dict]:
    return ((pod.get("spec") or {}).get("volumes")) or []


def claim_names(pod: dict) -> list[str]:
    """The PersistentVolumeClaims the Pod's volumes use (names in the Pod's namespace)."""
    names = []
    for volume in volumes(pod):
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            names.append(claim)
    return names
