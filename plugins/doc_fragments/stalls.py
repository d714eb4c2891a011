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
      - When a live Machine controller carries out the deletion and M(lifecycle.machine.machine_delete) follows it,
        V(fail) stops following that Machine once the controller's drain is held by something that can never clear
        (judged from the budgets of the Pods its report names); the task writes nothing then - no Event - and the
        deletion stays with the controller.
      - O(stall_timeout) fails a drain that makes no progress for a while, whatever O(on_stall) says.
    type: str
    choices: [wait, fail]
    default: wait
  stall_timeout:
    description:
      - Fail the drain (for M(lifecycle.machine.machine_delete), that Machine) once it has made no progress for this long -
        whole seconds or a Go duration (V(30m), V(2h)); at least a second. Unset (the default), the drain never fails for that.
      - Setting it is enough; it applies with O(on_stall=wait) as with O(on_stall=fail).
      - Progress is any of - an eviction the API server granted (or a Pod deleted as O(escalations) asked), a Pod the drain
        evicts or waits for gone from the Node, the next batch (a higher drain order) started. The drain's first pass starts
        the count. Refusals, retries, Pods still terminating and new Pods on the Node are no progress.
      - The failure names what holds the drain (the result's C(blockers)), and a Warning Event C(DrainStalled) is recorded on
        the Machine. Nothing is overridden - no budget, no hook - and the Machine stays marked for deletion, so a later run goes on.
      - M(lifecycle.machine.machine_delete) counts the time across calls and rounds (the last progress is kept in its result's C(clock), as C(drain_progress));
        M(lifecycle.machine.machine_drain) counts it across the rounds of one task (its result's C(stall)).
    type: raw
  escalations:
    description:
      - What to do instead of evicting, after a deadline, for the Pods you choose - an explicit override, on the record.
        The machine controllers never override a PodDisruptionBudget; by default neither does this collection.
      - After O(escalations[].after) (counted from the drain's start, which a Machine being deleted keeps across runs),
        each Pod of the drain's current batch still on the Node that matches O(escalations[].namespaces) and
        O(escalations[].pod_selector) is deleted with its grace period (or O(grace_period)) instead of evicted -
        its PodDisruptionBudget is not asked. The first matching entry applies.
      - Each deletion is recorded in the result's C(escalations) and as a Warning Event C(DrainEscalated) on the
        Machine naming O(escalations[].reason). Pods the drain skips (DaemonSet, static, skip label or rule) are never
        touched. In check mode nothing is deleted; C(escalations) says what would be.
    type: list
    elements: dict
    default: []
    suboptions:
      after:
        description:
          - How long after the drain started the escalation applies - whole seconds or a Go duration (V(30m), V(2h)); V(0) at once.
        type: raw
        required: true
      action:
        description:
          - V(delete_pod) deletes the Pod (with its grace period) instead of evicting it.
        type: str
        choices: [delete_pod]
        default: delete_pod
      reason:
        description:
          - Who asked for it and why (a change number, say); recorded in the Event on the Machine and in the result.
        type: str
        required: true
      namespaces:
        description:
          - Only Pods in these namespaces; empty for every namespace.
        type: list
        elements: str
        default: []
      pod_selector:
        description:
          - Only Pods this label selector (C(matchLabels), C(matchExpressions)) selects; unset for every Pod.
        type: dict
      drain_rules:
        description:
          - Only Pods whose drain behaviour and order one of these MachineDrainRules decided (by name); empty for any Pod,
            whatever decided it.
          - Each name must be one of the task's rules - O(rules), or the cluster's MachineDrainRules in the Machine's
            namespace with O(use_cluster_rules) - or the task fails before anything is touched.
        type: list
        elements: str
        default: []
"""
