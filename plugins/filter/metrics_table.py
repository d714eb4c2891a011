# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The ``metrics_table`` filter: machine_delete's ``metrics`` as a short table for people."""

from __future__ import annotations

DOCUMENTATION = r"""
name: metrics_table
author: lifecycle.machine contributors
version_added: 0.3.0
short_description: Each Machine's deletion figures as a short table
description:
  - Gives the C(metrics) of M(lifecycle.machine.machine_delete) (the C(delete_machine_metrics) of the
    C(lifecycle.machine.delete_machine) role) as lines of a table, a line per Machine - its status (from O(report) when
    given, else its outcome), the seconds spent draining and terminating, the Pods its deletion evicted, and what holds
    it now, by verdict.
  - The P(lifecycle.machine.prometheus_text#filter) filter gives the same figures for Prometheus.
positional: report
options:
  _input:
    description:
      - The figures by Machine, C({"namespace/name" - {name, namespace, cluster_name, outcome, phase_seconds, evicted,
        blockers_by_kind, blockers_by_verdict}}).
    type: dict
    required: true
  report:
    description: The Machines' entries by C(namespace/name) (the role's C(delete_machine_report)), for their status.
    type: dict
"""

EXAMPLES = r"""
- name: Print the figures as a table
  ansible.builtin.debug:
    msg: "{{ delete_machine_metrics | lifecycle.machine.metrics_table(delete_machine_report) }}"
"""

RETURN = r"""
_value:
  description: The table's lines, a header first.
  type: list
  elements: str
"""

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.metrics import summary_table


def to_metrics_table(value: Any, report: Any = None) -> list[str]:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"metrics_table expects machine_delete's metrics (a mapping by Machine), not {type(value).__name__}")
    return summary_table(value, report if isinstance(report, Mapping) else None)


class FilterModule:
    def filters(self) -> dict:
        return {"metrics_table": to_metrics_table}
