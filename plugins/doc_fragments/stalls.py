# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What a drain does once something holds it that can never clear (docs/stalls.md)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  on_stall:
    description:
      - What the drain does once something holds it that can never clear as things stand (a result's C(blockers)
        entry with the verdict V(can never clear as things stand) - a PodDisruptionBudget that allows no eviction
        at all, a Pod two budgets select).
      - V(wait) (the default) keeps waiting, as the machine controllers do, and says so in every result and progress line.
      - V(fail) fails at once (for M(lifecycle.machine.machine_delete), that Machine), naming what holds it, and
        records a Warning Event C(DrainStalled) on the Machine. Nothing is overridden - no budget, no hook - and the
        Machine stays marked for deletion, so a later run goes on once what holds it is fixed.
    type: str
    choices: [wait, fail]
    default: wait
"""
