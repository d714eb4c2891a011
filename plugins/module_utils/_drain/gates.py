# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Whether a Machine lets its Node be drained, and what to say when it does
not (pure; docs/behaviour.md §2): the preDrain hooks, the exclude-node-draining
annotation, and the Machine's own drain timeout, which counts from the
recorded start of the drain."""

from __future__ import annotations

import datetime as _dt

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, Flavour, Hook, hooks_text, machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339


def pre_drain_hooks(flavour: Flavour, machine: dict | None) -> list[Hook]:
    """The preDrain hooks holding the drain (none once the Machine is gone)."""
    return (flavour.hooks(machine).get(PRE_DRAIN) or []) if machine is not None else []


def held_message(node_name: str | None, machine: dict, hooks: list[Hook]) -> str:
    return f"Node {node_name} of Machine {machine_label(machine)} is held by preDrain hooks: {hooks_text(hooks)}"


def gate_timeout_message(wait_timeout: int, machine: dict, hooks: list[Hook]) -> str:
    return f"Timed out after {wait_timeout} s waiting for the preDrain hooks of Machine {machine_label(machine)} to be removed: {hooks_text(hooks)}"


def drain_skip_reason(flavour: Flavour, machine: dict, *, deleting: bool, now: _dt.datetime) -> str | None:
    """Why the drain is skipped: the exclude annotation, or (while the Machine is
    being deleted) its drain timeout having passed since the drain started."""
    if flavour.drain_excluded(machine):
        return f"Machine {machine_label(machine)} has the {flavour.exclude_drain_annotation} annotation"
    if deleting:
        timeout = flavour.drain_timeout(machine)
        started = flavour.drain_started_at(machine)
        if timeout and started is not None and (now - started).total_seconds() >= timeout:
            return f"the node drain timeout of Machine {machine_label(machine)} ({timeout} s) has passed since the drain started at {rfc3339(started)}"
    return None


def drain_timeout_left(flavour: Flavour, machine: dict, *, started_at: _dt.datetime, now: _dt.datetime) -> float | None:
    """Seconds until the pass that finds the Machine's drain timeout passed (one
    second after it); None when the Machine sets no drain timeout."""
    timeout = flavour.drain_timeout(machine)
    if not timeout:
        return None
    return timeout - (now - started_at).total_seconds() + 1
