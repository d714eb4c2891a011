# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The ``prometheus_text`` filter: machine_delete's ``metrics`` in the Prometheus text format."""

from __future__ import annotations

DOCUMENTATION = r"""
name: prometheus_text
author: lifecycle.machine contributors
version_added: 0.3.0
short_description: Each Machine's deletion figures in the Prometheus text format
description:
  - Writes the C(metrics) of M(lifecycle.machine.machine_delete) (the C(delete_machine_metrics) of the
    C(lifecycle.machine.delete_machine) role) in the Prometheus text exposition format, for node_exporter's textfile
    collector - gauges C(lifecycle_machine_phase_seconds) (by C(phase)), C(lifecycle_machine_blockers) (by C(kind)),
    C(lifecycle_machine_blockers_by_verdict) (by C(verdict)), C(lifecycle_machine_evicted_pods) and
    C(lifecycle_machine_outcome) (by C(outcome) - V(done), V(failed), V(waiting) - 1 for the Machine's own, 0 for the
    others), each labelled with the Machine's C(name), C(namespace) and C(cluster_name), the labels Cluster API's own
    Machine metrics (C(capi_machine_*) from kube-state-metrics) carry, so the two join.
  - And C(lifecycle_machine_metrics_written_timestamp_seconds), when they were written.
  - The P(lifecycle.machine.metrics_table#filter) filter gives the same figures as a short table.
positional: timestamp
options:
  _input:
    description:
      - The figures by Machine, C({"namespace/name" - {name, namespace, cluster_name, outcome, phase_seconds, evicted,
        blockers_by_kind, blockers_by_verdict}}).
    type: dict
    required: true
  timestamp:
    description:
      - When they were written (Unix time, seconds since the epoch, which no time zone changes).
      - By default the controller's clock when the filter runs. Do not pass C(now(utc=true\).timestamp(\)) - C(now(utc=true\))
        is a naive date that C(timestamp(\)) reads as local time, off by the controller's UTC offset.
    type: float
"""

EXAMPLES = r"""
- name: Write the figures where node_exporter's textfile collector reads them
  ansible.builtin.copy:
    content: "{{ delete_machine_metrics | lifecycle.machine.prometheus_text }}"
    dest: /var/lib/node_exporter/textfile/lifecycle_machine.prom
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The Prometheus text, a line per sample, ending with a newline.
  type: str
"""

import time
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.metrics import prometheus_text


def _figures(value: Any, name: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"{name} expects machine_delete's metrics (a mapping by Machine), not {type(value).__name__}")
    return value


def to_prometheus_text(value: Any, timestamp: float | None = None) -> str:
    return prometheus_text(_figures(value, "prometheus_text"), timestamp=time.time() if timestamp is None else float(timestamp))


class FilterModule:
    def filters(self) -> dict:
        return {"prometheus_text": to_prometheus_text}
