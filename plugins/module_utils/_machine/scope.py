# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""One Machine as one round of ``machine_delete`` sees it (pure).

The round reads the Machine once and decides about it once: who carries out
its deletion and why, and when each phase's share of this round ends. Each
step (the drain, the termination, the follow of a live controller) takes the
scope instead of reading the Machine and deciding again, and leaves in it the
Machine as it last saw or wrote it, for the next step. Cluster API's Machine
controller keeps one scope per reconcile for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import Actor
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Flavour, flavour_for


class CachedMachines(Protocol):
    """What a task's watch-fed Machines and Clusters answer (``_machine/feed.py`` ``MachineFeeds``), as Cluster
    API asks its cache before each Node step: (whether the cache knows, the object or None) for a Cluster,
    the control-plane Machines of a Cluster (None when the cache cannot answer), a Machine as now known."""

    def cluster(self, api_version: str, namespace: str, name: str) -> tuple[bool, dict | None]: ...

    def control_plane_machines(self, api_version: str, namespace: str, cluster_name: str) -> list[dict] | None: ...

    def read(self, machine: dict) -> dict | None: ...


@dataclass
class MachineScope:
    """A Machine this round, and what was decided about it."""

    # The Machine as last read or written this round (each step leaves its last view here).
    machine: dict
    # Who carries out its deletion (the collection or its live controller), and why.
    actor: Actor
    # When this task marked it (epoch seconds; None when it was marked before).
    marked_at: float | None = None
    # Each phase's end in this round, an instant on the transport's clock (the step's fork has it as its deadline).
    ends: dict[str, float] = field(default_factory=dict)
    # It went while the round looked at it (its live controller finished the deletion).
    gone: bool = False
    # How the round reads the Machine again (the task's watch-fed feed: no request); None: a GET.
    reread: Callable[[dict], dict | None] | None = None
    # The task's watch-fed Clusters and control-plane Machines (_machine/feed.py MachineFeeds); None: read them.
    view: CachedMachines | None = None
    flavour: Flavour = field(init=False)

    def __post_init__(self) -> None:
        self.flavour = flavour_for(self.machine)

    def seen(self, machine: dict | None) -> None:
        """A step's last view of the Machine (kept unless the step saw none)."""
        if machine is not None:
            self.machine = machine
