# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What the modules do with a paused Machine, and the override (docs/behaviour.md, "Hands off")."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  override_pause:
    description:
      - Act on Cluster API Machines that are paused - whose Cluster has C(spec.paused) true, or which carry the annotation
        C(cluster.x-k8s.io/paused) - saying who asked and why (a change number, an approval). Meant for a teardown with the
        controllers stopped.
      - Unset (the default), a paused Machine is left alone, as Cluster API's controllers leave it - nothing is marked,
        cordoned, drained, terminated or released - and the task says so with a blocker of kind C(paused)
        (verdict V(needs someone to act)). M(lifecycle.machine.machine_delete) holds such a Machine in progress, and with
        O(ignore:on_stall=fail) fails it at once; the other modules refuse it, changing nothing.
      - Set, the task acts as if the Machine were not paused, and records a Warning Event C(PauseOverridden) on it naming the
        user the API server knows the task as and this text (none in check mode). With O(ignore:machine_controller=auto) the
        collection carries the deletion out itself - a paused controller does nothing.
      - Never lets the collection act on the non-authoritative side of OpenShift's move to Cluster API, nor while it migrates.
      - An empty value is unset; at most 512 characters.
    type: str
    version_added: 0.3.0
"""
