# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Each Machine's figures (``machine_delete``'s ``metrics``), for graphs and for people (pure).

:func:`prometheus_text` writes them in the Prometheus text exposition format, for
node_exporter's textfile collector (the ``delete_machine`` role's
``delete_machine_metrics_file``); :func:`summary_table` as the short table a role
run ends with.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "lifecycle_machine"
# The labels of every Machine's samples, named as Cluster API's own Machine metrics name them (kube-state-metrics'
# configuration for Cluster API: capi_machine_* by name, namespace and cluster_name), so the two join.
MACHINE_LABELS = ("name", "namespace", "cluster_name")
# (metric, help, the figure's key in a Machine's metrics, the label its keys become)
FAMILIES = (
    ("phase_seconds", "Seconds a Machine's deletion has spent in each phase so far.", "phase_seconds", "phase"),
    ("blockers", "What holds a Machine's deletion now, by kind.", "blockers_by_kind", "kind"),
    ("blockers_by_verdict", "What holds a Machine's deletion now, by verdict.", "blockers_by_verdict", "verdict"),
)
SCALARS = (("evicted_pods", "Pods the deletion evicted from the Machine's Node, over every round and call of the run.", "evicted"),)
# The outcome as a state set: one sample per outcome, 1 for the Machine's own and 0 for the others.
OUTCOME = ("outcome", "A Machine's deletion outcome: 1 for done, failed or waiting (still under way), 0 for the others.", "outcome")
OUTCOME_DONE, OUTCOME_FAILED, OUTCOME_WAITING = "done", "failed", "waiting"
OUTCOMES = (OUTCOME_DONE, OUTCOME_FAILED, OUTCOME_WAITING)
# Figures only some Machines have (replacement none or first): a Machine without one has no sample.
SOME = (
    (
        "replacement_ready_seconds",
        "Seconds from the surge until the Machine's replacement had a Ready Node (replacement: first).",
        "replacement_ready_seconds",
    ),
    (
        "pool_short_seconds",
        "Seconds the pool ran short of the Machine while it was deleted (0 when it was replaced first or removed for good).",
        "pool_short_seconds",
    ),
)
TABLE_PHASES = ("drain", "terminate")


def _escape(value: object) -> str:
    """A label value as the exposition format writes it: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(key: str, figures: Mapping, extra: tuple[str, object] | None = None) -> str:
    namespace, _slash, name = key.partition("/")
    values = {"name": name, "namespace": namespace, "cluster_name": "", **{label: figures[label] for label in MACHINE_LABELS if figures.get(label)}}
    pairs = [(label, values[label]) for label in MACHINE_LABELS] + ([extra] if extra else [])
    return "{" + ",".join(f'{label}="{_escape(value)}"' for label, value in pairs) + "}"


def _number(value: object) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))  # type: ignore[arg-type]


def prometheus_text(metrics: Mapping[str, Mapping], *, timestamp: float | None = None) -> str:
    """``metrics`` (machine_delete's: ``{"namespace/name": {name, namespace, cluster_name, outcome, phase_seconds,
    evicted, blockers_by_kind, blockers_by_verdict}}``) as Prometheus text: one gauge family per figure, a sample
    per Machine (and phase, kind, verdict, outcome), each labelled ``name``, ``namespace`` and ``cluster_name``,
    and ``lifecycle_machine_metrics_written_timestamp_seconds`` when ``timestamp`` is given."""
    lines: list[str] = []
    keys = sorted(metrics)
    for metric, text, field, label in FAMILIES:
        samples = [(key, name, value) for key in keys for name, value in sorted(((metrics[key] or {}).get(field) or {}).items()) if value is not None]
        lines += [f"# HELP {PREFIX}_{metric} {text}", f"# TYPE {PREFIX}_{metric} gauge"]
        lines += [f"{PREFIX}_{metric}{_labels(key, metrics[key] or {}, (label, name))} {_number(value)}" for key, name, value in samples]
    for metric, text, field in SCALARS:
        lines += [f"# HELP {PREFIX}_{metric} {text}", f"# TYPE {PREFIX}_{metric} gauge"]
        lines += [f"{PREFIX}_{metric}{_labels(key, metrics[key] or {})} {_number((metrics[key] or {}).get(field) or 0)}" for key in keys]
    metric, text, field = OUTCOME
    lines += [f"# HELP {PREFIX}_{metric} {text}", f"# TYPE {PREFIX}_{metric} gauge"]
    lines += [
        f"{PREFIX}_{metric}{_labels(key, metrics[key] or {}, (field, outcome))} {int((metrics[key] or {}).get(field) == outcome)}"
        for key in keys
        if (metrics[key] or {}).get(field) in OUTCOMES
        for outcome in OUTCOMES
    ]
    for metric, text, field in SOME:
        samples = [(key, (metrics[key] or {}).get(field)) for key in keys if (metrics[key] or {}).get(field) is not None]
        if samples:
            lines += [f"# HELP {PREFIX}_{metric} {text}", f"# TYPE {PREFIX}_{metric} gauge"]
            lines += [f"{PREFIX}_{metric}{_labels(key, metrics[key] or {})} {_number(value)}" for key, value in samples]
    if timestamp is not None:
        metric = f"{PREFIX}_metrics_written_timestamp_seconds"
        lines += [f"# HELP {metric} When these figures were written (Unix time).", f"# TYPE {metric} gauge", f"{metric} {float(timestamp)!r}"]
    return "\n".join(lines) + "\n"


def summary_table(metrics: Mapping[str, Mapping], report: Mapping[str, Mapping] | None = None) -> list[str]:
    """The figures as a short table, a line per Machine: its status (from ``report``, the role's
    ``delete_machine_report``, when given; else its outcome), seconds draining and terminating, Pods
    evicted, and what holds it now by verdict."""
    report = report or {}
    # The replacement's columns when some Machine was replaced first or removed for good (replacement: none or first).
    replaced = any("pool_short_seconds" in (figures or {}) for figures in metrics.values())
    extra = ("replacement ready s", "short s") if replaced else ()
    rows = [("Machine", "status", "drain s", "terminate s", *extra, "evicted", "holds it now")]
    for key in sorted(metrics):
        figures = metrics[key] or {}
        phases = figures.get("phase_seconds") or {}
        holds = ", ".join(f"{count} {verdict}" for verdict, count in sorted((figures.get("blockers_by_verdict") or {}).items())) or "-"
        seconds = [f"{phases[phase]:g}" if phase in phases else "-" for phase in TABLE_PHASES]
        if replaced:
            seconds += [f"{figures[name]:g}" if figures.get(name) is not None else "-" for name in ("replacement_ready_seconds", "pool_short_seconds")]
        status = (report.get(key) or {}).get("status") or figures.get("outcome") or "-"
        rows.append((key, str(status), *seconds, str(figures.get("evicted") or 0), holds))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
