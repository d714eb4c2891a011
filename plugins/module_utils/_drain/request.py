# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What one ``machine_drain`` task is asked to do, as plain values (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import normalize_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stall_policy import StallPolicy, progress_since
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import AUTO, DEFAULT_GRACE
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import override_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options, empty_names, invalid_names, seconds
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now as utc_now
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import WorkloadSettings, workload_settings

DRAINED, CORDONED, UNCORDONED = "drained", "cordoned", "uncordoned"
# The verb of each state, as skip messages say it ("Drain skipped: ...").
ACTIONS = {DRAINED: "Drain", CORDONED: "Cordon", UNCORDONED: "Uncordon"}
# wait_sleep 0 counts as 1 (docs of the option); progress_interval 0 drains until done; grace_period 0 kills at once.
BOUNDS = seconds("wait_timeout", "wait_sleep", "progress_interval", "grace_period", "controller_grace") + seconds("stall_timeout", least=1)


@dataclass
class DrainRequest:
    """The module's options, as plain values."""

    node: str | None = None
    machine: str | None = None
    namespace: str | None = None
    api_version: str | None = None
    state: str = DRAINED
    rules: Sequence[dict] = field(default_factory=list)
    use_cluster_rules: bool = True
    wait: bool = True
    wait_timeout: int = 600
    wait_sleep: int = 2
    grace_period: int | None = None
    disable_eviction: bool = False
    progress_interval: int = 0
    check_mode: bool = False
    # How the Node of a Cluster API Machine is reached (its workload cluster).
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)
    # Who drains a Machine being deleted: its live controller (followed) or the collection (_machine/controller.py).
    machine_controller: str = AUTO
    controller_grace: int = DEFAULT_GRACE
    # on_stall, stall_timeout, escalations and the last progress an earlier call saw (stall_policy.py).
    stall: StallPolicy = field(default_factory=StallPolicy)
    # Who asked to act on a paused Machine, and why (_machine/pause.py); None: a paused Machine is left alone.
    override_pause: str | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any], check_mode: bool) -> DrainRequest:
        """The request of a task, from the module's parameters; MachineError naming every option out of range."""
        errors = empty_names(params, ("node", "machine")) + invalid_names(params, ("node", "machine"), ("namespace",))
        workload = workload_settings(params.get("workload_cluster"), errors)
        since = progress_since(params.get("progress_since"), utc_now().timestamp())
        if params.get("progress_since") is not None and since is None:
            errors.append(f"progress_since must be epoch seconds no later than now, as a result's stall.progress_since says (got {params['progress_since']!r})")
        errors += override_errors(params.get("override_pause"))
        check_options("machine_drain", params, BOUNDS, errors=errors)
        rules = normalize_rules(params["rules"] or [])  # validated once, here; bad rules fail before anything is read
        stall = StallPolicy.from_params(params, since=since)  # so are escalations
        return cls(
            node=params["node"],
            machine=params["machine"],
            namespace=params["namespace"],
            api_version=params["api_version"],
            state=params["state"],
            rules=rules,
            use_cluster_rules=params["use_cluster_rules"],
            wait=params["wait"],
            wait_timeout=params["wait_timeout"],
            wait_sleep=params["wait_sleep"],
            grace_period=params["grace_period"],
            disable_eviction=params["disable_eviction"],
            progress_interval=params.get("progress_interval") or 0,
            check_mode=check_mode,
            workload=workload,
            machine_controller=params.get("machine_controller") or AUTO,
            controller_grace=DEFAULT_GRACE if params.get("controller_grace") is None else params["controller_grace"],
            stall=stall,
            override_pause=params.get("override_pause") or None,
        )

    @property
    def waits(self) -> bool:
        """Whether the task waits (at the preDrain gate, between passes): never in check mode."""
        return self.wait and not self.check_mode
