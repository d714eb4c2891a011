# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Deleting many Machines at once (pure): what a ``machine_delete`` task is
asked, where each Machine stands, its time budgets, and the progress lines an
operator reads while it runs.

Each Machine goes through the whole workflow (docs/behaviour.md §2) on its
own: marked, the preDrain gate and the drain, then the volume wait, the
preTerminate gate, the infrastructure, the Node and the release. A task serves
them all concurrently and returns after at most ``progress_interval`` seconds,
so that a playbook can show how far each one is and call it again; the state
lives in the API, the time budgets in ``clock`` (handed back each call).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.metrics import OUTCOME_DONE, OUTCOME_FAILED, OUTCOME_WAITING
from ansible_collections.lifecycle.machine.plugins.module_utils._delete.preflight import batch_findings, finding_line
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.request import DrainRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.rules import normalize_rules
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.stall_policy import StallPolicy
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import MAX_BLOCKER_LINES, NEVER, blocker_lines, worst
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import AUTO, DEFAULT_GRACE, SETTINGS
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.pause import override_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import Bound, bound_errors, invalid_names, invalid_options, seconds
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import AFTER, MODES, REPLACE, REPLACEMENT_READY, replacement_figures
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import TerminateRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.out_of_service import OutOfService, normalize_out_of_service
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import WorkloadSettings, workload_settings

# Where a Machine stands after a task.
DONE = "done"  # released (gone)
IN_PROGRESS = "in_progress"  # still draining or terminating: call again
AWAITING_INSTANCE = "awaiting_instance_termination"  # OpenShift: the provider tasks must terminate its instance
FAILED = "failed"
PLANNED = "planned"  # check mode: what would happen
STATUSES = (DONE, IN_PROGRESS, AWAITING_INSTANCE, FAILED, PLANNED)

# The phases whose time is budgeted.
DRAIN, TERMINATE = "drain", "terminate"
# Where a Machine its controllers leave alone stands (paused, another API authoritative): nothing is done to it.
PAUSED = "paused"
# When the collection took a Machine's deletion on (its first call): the progress lines count from it, across calls.
STARTED = "started"
# When a Machine's drain last made progress (stall_timeout, docs/stalls.md): carried in the clock like a phase's start.
DRAIN_PROGRESS = "drain_progress"
# What a Machine's entry in the clock may hold (REPLACE: when the wait for its replacement began; REPLACEMENT_READY: when it was Ready).
CLOCK_KEYS = (STARTED, REPLACE, REPLACEMENT_READY, DRAIN, TERMINATE, DRAIN_PROGRESS)

# A phase needs at least a second; wait_sleep paces the volume-detach checks (0 would not pause at all).
BOUNDS = (
    *seconds("drain_timeout", "terminate_timeout", least=1),
    Bound("concurrency", least=1, most=None),
    *seconds("progress_interval"),
    *seconds("wait_sleep", least=1),
    *seconds("grace_period"),
    *seconds("controller_grace"),
    *seconds("stall_timeout", least=1),
    *seconds("replacement_timeout", least=1),
)


# What a ``machines`` entry may hold: what chooses the Machine, and what machine_info and machine_delete
# return about it (their entries are passed on as they are). Anything else is a typo - an ``api_verison``
# that was ignored would let the task act on a Machine of any flavour.
ENTRY_CHOOSES = ("name", "namespace", "api_version")
ENTRY_FIELDS = frozenset(
    (
        *ENTRY_CHOOSES,
        "flavour",
        "cluster",
        "key",
        # machine_info
        "exists",
        "phase",
        "deleting",
        "deletion_timestamp",
        "finalizers",
        "node_name",
        "cluster_name",
        "hooks",
        "gates",
        "conditions",
        "infrastructure_ref",
        "bootstrap_ref",
        "labels",
        "annotations",
        # machine_delete
        "status",
        "step",
        "message",
        "changed",
        "drain",
        "terminate",
        "carried_out_by",
        "controller",
        "blockers",
        "out_of_service",
        "replacement",
    )
)


def machine_key(machine: dict) -> str:
    return f"{machine.get('namespace')}/{machine.get('name')}"


@dataclass(frozen=True)
class DeleteRequest:
    """machine_delete's options."""

    machines: tuple[dict, ...]
    rules: Sequence[dict] = ()  # validated once (from_params): _drain.rules.NormalizedRules
    use_cluster_rules: bool = True
    grace_period: int | None = None
    drain_timeout: int = 3600
    terminate_timeout: int = 3600
    wait_sleep: int = 2
    instance_terminated: tuple[str, ...] = ()
    clock: dict = field(default_factory=dict)
    progress_interval: int = 0
    concurrency: int = 20
    check_mode: bool = False
    # How the Nodes of Cluster API Machines are reached (their workload clusters).
    workload: WorkloadSettings = field(default_factory=WorkloadSettings)
    # Who carries out each deletion: the Machine's live controller, or the collection (_machine/controller.py).
    machine_controller: str = AUTO
    controller_grace: int = DEFAULT_GRACE
    # on_stall, stall_timeout (its last progress carried in ``clock``, DRAIN_PROGRESS) and escalations (_drain/stall_policy.py).
    stall: StallPolicy = field(default_factory=StallPolicy)
    # The Machines whose instance the user confirmed gone: their Node gets the out-of-service taint (_terminate/out_of_service.py).
    out_of_service: dict[str, OutOfService] = field(default_factory=dict)
    # What becomes of each Machine's place in its pool (_replace/logic.py): after, none or first; and how long a replacement is waited for.
    replacement: str = AFTER
    replacement_timeout: int = 1800
    # Who asked to act on paused Machines, and why (_machine/pause.py); None: a paused Machine is held.
    override_pause: str | None = None

    @classmethod
    def from_params(cls, params: dict, check_mode: bool, now: float) -> DeleteRequest:
        """The request of a task; MachineError naming the bad option (or the invalid drain rule) when one is,
        before any Machine is touched."""
        errors = option_errors(params)
        workload = workload_settings(params.get("workload_cluster"), errors)
        if errors:
            raise invalid_options("machine_delete", errors)
        rules = normalize_rules(params["rules"] or ())  # validated once, here: the drain and the volume wait take them as they are
        return cls(
            machines=tuple({"name": m["name"], "namespace": m["namespace"], "api_version": m.get("api_version") or None} for m in params["machines"]),
            rules=rules,
            use_cluster_rules=params["use_cluster_rules"],
            grace_period=params["grace_period"],
            drain_timeout=params["drain_timeout"],
            terminate_timeout=params["terminate_timeout"],
            wait_sleep=params["wait_sleep"],
            instance_terminated=tuple(params["instance_terminated"] or ()),
            clock=started_clock(params["clock"] or {}, now, keys=[machine_key(m) for m in params["machines"]]),
            progress_interval=params["progress_interval"],
            concurrency=params["concurrency"],
            check_mode=check_mode,
            workload=workload,
            machine_controller=params.get("machine_controller") or AUTO,
            controller_grace=DEFAULT_GRACE if params.get("controller_grace") is None else params["controller_grace"],
            stall=StallPolicy.from_params(params),
            out_of_service=normalize_out_of_service(params.get("out_of_service"), [machine_key(m) for m in params["machines"]]),
            replacement=params.get("replacement") or AFTER,
            replacement_timeout=1800 if params.get("replacement_timeout") is None else params["replacement_timeout"],
            override_pause=params.get("override_pause") or None,
        )

    def drain_request(self, machine: dict, clock: dict) -> DrainRequest:
        """The drain of ``machine`` (an entry of ``machines``) in this task: it waits, within the phase's share of the
        call; ``stall_timeout`` counts on from the last progress an earlier call or round saw (``clock``)."""
        return DrainRequest(
            machine=machine["name"],
            namespace=machine["namespace"],
            api_version=machine.get("api_version"),
            rules=self.rules,
            use_cluster_rules=self.use_cluster_rules,
            wait=True,
            wait_sleep=self.wait_sleep,
            grace_period=self.grace_period,
            check_mode=self.check_mode,
            workload=self.workload,
            stall=self.stall.resumed((clock.get(machine_key(machine)) or {}).get(DRAIN_PROGRESS)),
            override_pause=self.override_pause,
        )

    def terminate_request(self, machine: dict) -> TerminateRequest:
        """The termination of ``machine`` (an entry of ``machines``) in this task."""
        return TerminateRequest(
            namespace=machine["namespace"],
            machine=machine["name"],
            api_version=machine.get("api_version"),
            wait=True,
            wait_sleep=self.wait_sleep,
            instance_terminated=machine_key(machine) in self.instance_terminated,
            rules=self.rules,
            use_cluster_rules=self.use_cluster_rules,
            workload=self.workload,
            override_pause=self.override_pause,
        )


def option_errors(params: dict) -> list[str]:
    """Why the options cannot be acted on (empty when they can)."""
    errors = []
    seen = set()
    for index, machine in enumerate(params.get("machines") or []):
        if not isinstance(machine, dict) or not machine.get("name") or not machine.get("namespace"):
            errors.append(f"machines[{index}] must have a name and a namespace (got {machine!r})")
            continue
        unknown = sorted(str(name) for name in set(machine) - ENTRY_FIELDS)
        if unknown:
            errors.append(f"machines[{index}] has unknown key(s) {', '.join(unknown)} (a Machine is chosen by {', '.join(ENTRY_CHOOSES)})")
        errors += invalid_names(
            {f"machines[{index}].name": machine["name"], f"machines[{index}].namespace": machine["namespace"]},
            (f"machines[{index}].name",),
            (f"machines[{index}].namespace",),
        )
        key = machine_key(machine)
        if key in seen:
            errors.append(f"Machine {key} is given twice")
        seen.add(key)
    setting = params.get("machine_controller")
    if setting is not None and setting not in SETTINGS:
        errors.append(f"machine_controller must be one of {', '.join(SETTINGS)} (got {setting!r})")
    replacement = params.get("replacement")
    if replacement is not None and replacement not in MODES:
        errors.append(f"replacement must be one of {', '.join(MODES)} (got {replacement!r})")
    elif replacement == "first" and setting == "absent":
        errors.append(
            "replacement: first needs a live MachineSet controller to create the replacement, and machine_controller: absent says none runs;"
            " use replacement: none or after (docs/delete_machine.md)"
        )
    return errors + override_errors(params.get("override_pause")) + bound_errors(params, BOUNDS)


def started_clock(clock: dict, now: float, keys: list[str] | tuple[str, ...] = ()) -> dict:
    """A copy of ``clock`` (``{machine key: {phase: epoch seconds it started}}``), only well-formed entries,
    with the deletion of each Machine of ``keys`` started ``now`` unless an earlier call started it."""
    result: dict[str, dict[str, float]] = {}
    for key, phases in (clock or {}).items():
        if isinstance(phases, dict):
            result[str(key)] = {phase: float(since) for phase, since in phases.items() if phase in CLOCK_KEYS and _number(since, now)}
    for key in keys:
        start_phase(result, key, STARTED, now)
    return result


def _number(value: object, now: float) -> bool:
    try:
        return 0 < float(value) <= now + 60
    except (TypeError, ValueError):
        return False


def budget_left(clock: dict, key: str, phase: str, timeout: int, now: float) -> float:
    """Seconds left of a Machine's ``phase`` budget (``timeout`` from when the phase first started)."""
    since = (clock.get(key) or {}).get(phase, now)
    return timeout - (now - since)


_SPENT = re.compile(r"^Timed out after \d+ ?s(?=[ :.])")


def slice_message(message: str, *, final: bool, timeout: int) -> str:
    """A step's timeout message as the deletion should tell it.

    A step runs for a slice of its phase's budget at a time: when a slice that
    is not the last ends, the step is still under way ("Timed out after 20 s
    waiting for ..." becomes "Waiting for ..."); when the budget is spent, the
    time is the phase's whole timeout, not what the last slice had left.
    """
    if not _SPENT.match(message):
        return message
    if final:
        return _SPENT.sub(f"Timed out after {timeout} s", message)
    rest = _SPENT.sub("", message).lstrip(" :")
    return rest[:1].upper() + rest[1:]


def start_phase(clock: dict, key: str, phase: str, now: float) -> None:
    clock.setdefault(key, {}).setdefault(phase, now)


def phase_end(clock: dict, key: str, phase: str, timeout: int, *, wall: float, now: float, slice_end: float | None) -> tuple[float, bool]:
    """(when this call's share of ``phase`` ends, an instant on the transport's clock, whose time is ``now``;
    whether that is the end of the phase's budget, not of the progress interval that ends at ``slice_end``).
    The phase's start is persisted (``clock``, on the wall clock, whose time is ``wall``, carried across calls)
    and noted here the first time; the rest is on the transport's clock."""
    start_phase(clock, key, phase, wall)
    budget_end = now + max(0.0, budget_left(clock, key, phase, timeout, wall))
    if slice_end is not None and slice_end < budget_end:
        return max(slice_end, now + 1.0), False  # a step is given at least a second
    return budget_end, True


@dataclass
class Outcome:
    """Where one Machine stands after a task, with what the steps reported."""

    machine: dict
    status: str = IN_PROGRESS
    step: str = ""
    message: str = ""
    changed: bool = False
    flavour: str | None = None
    # The workload cluster of a Cluster API Machine (where its Node is).
    cluster: str | None = None
    # The cluster the Machine belongs to, for its metrics (``Flavour.owning_cluster``: OpenShift's too), once read.
    cluster_name: str | None = None
    drain: dict | None = None
    terminate: dict | None = None
    # Who carries out the deletion (controller / collection) and the controller's field manager when seen.
    carried_out_by: str | None = None
    controller: str | None = None
    # What holds a Machine its live controller deletes, from what the controller reports (docs/stalls.md).
    followed_blockers: list[dict] = field(default_factory=list)
    # The out-of-service taint the user asked for on its Node, as this call left it (None when not asked).
    out_of_service: dict | None = None
    # What becomes of its place in its pool (_replace/run.py ReplacementState.as_dict); None before it was looked at.
    replacement: dict | None = None
    # What leaves the Machine alone, as its controllers leave it (paused, another API authoritative; docs/behaviour.md).
    hands_off: list[dict] = field(default_factory=list)

    @property
    def key(self) -> str:
        return machine_key(self.machine)

    def as_dict(self) -> dict:
        return {
            **self.machine,
            "key": self.key,
            "flavour": self.flavour,
            "cluster": self.cluster,
            "status": self.status,
            "step": self.step,
            "message": self.message,
            "changed": self.changed,
            "drain": self.drain,
            "terminate": self.terminate,
            "carried_out_by": self.carried_out_by,
            "controller": self.controller,
            "blockers": self.blockers,
            **({"out_of_service": self.out_of_service} if self.out_of_service is not None else {}),
            **({"replacement": self.replacement} if self.replacement is not None else {}),
        }

    @property
    def blockers(self) -> list[dict]:
        """What holds the Machine now (docs/stalls.md): what the step it stands at reported
        (in check mode, what the drain's preview found)."""
        if self.status == DONE:
            return []
        if self.hands_off:
            return list(self.hands_off)
        if self.carried_out_by == "controller":
            return list(self.followed_blockers)
        if self.step != DRAIN and self.terminate is not None:
            return list(self.terminate.get("blockers") or [])
        return list((self.drain or {}).get("blockers") or [])


def drain_summary(result: dict) -> dict:
    """The part of a machine_drain result worth keeping per Machine."""
    keys = ("node", "completed", "message", "evicted", "batches", "passes", "skipped_reason", "started_at", "elapsed_seconds", "api_requests")
    keys += ("blockers", "escalations")
    return {key: result[key] for key in keys if key in result}


def terminate_summary(result: dict) -> dict:
    """The part of a machine_terminate result worth keeping per Machine."""
    keys = ("steps", "next_step", "blocked_by", "released", "gone", "awaiting_instance_termination", "actions", "blockers")
    return {key: result[key] for key in keys if key in result}


def batches_text(batches: list[dict]) -> str:
    """``order 0: 12 Pods left (4 terminating), order 10: 30 Pods``."""
    parts = []
    for batch in batches or []:
        count = len(batch.get("pods") or [])
        text = f"order {batch.get('order')}: {count} Pod{'s' if count != 1 else ''}"
        terminating = len(batch.get("terminating") or [])
        if terminating:
            text += f" ({terminating} terminating)"
        parts.append(text)
    return ", ".join(parts)


# The phases a Machine's clock records, in order; ``done`` marks when its deletion finished.
CLOCK_PHASES = (REPLACE, DRAIN, TERMINATE, DONE)


def metrics_outcome(status: str) -> str:
    """The outcome a Machine's metrics report for its status: done, failed, or waiting (still under way, or,
    in check mode, planned)."""
    return {DONE: OUTCOME_DONE, FAILED: OUTCOME_FAILED}.get(status, OUTCOME_WAITING)


def machine_metrics(outcome: Outcome, clock: dict, now: float) -> dict:
    """Numbers to graph for one Machine: its ``name``, ``namespace`` and ``cluster_name`` (the labels
    Cluster API's own Machine metrics use), its ``outcome`` (done, failed, waiting), the seconds spent in
    each phase so far (from the clock carried across calls and rounds), the Pods this call evicted (the
    action plugin and the role add the calls and rounds up), and what holds the Machine now, counted by
    kind and by verdict."""
    starts = clock.get(outcome.key) or {}
    seen = [(phase, starts[phase]) for phase in CLOCK_PHASES if phase in starts]
    phases = {}
    for index, (phase, since) in enumerate(seen):
        if phase == DONE:
            break
        until = seen[index + 1][1] if index + 1 < len(seen) else now
        phases[phase] = round(max(0.0, until - since), 1)
    by_kind: dict[str, int] = {}
    by_verdict: dict[str, int] = {}
    for blocker in outcome.blockers:
        by_kind[blocker.get("kind")] = by_kind.get(blocker.get("kind"), 0) + 1
        by_verdict[blocker.get("verdict")] = by_verdict.get(blocker.get("verdict"), 0) + 1
    mode = (outcome.replacement or {}).get("mode") or AFTER
    return {
        "name": outcome.machine.get("name"),
        "namespace": outcome.machine.get("namespace"),
        "cluster_name": outcome.cluster_name or outcome.cluster or "",
        "outcome": metrics_outcome(outcome.status),
        "phase_seconds": phases,
        **(replacement_figures(mode, starts) if mode != AFTER else {}),
        "evicted": len((outcome.drain or {}).get("evicted") or []),
        "blockers_by_kind": by_kind,
        "blockers_by_verdict": by_verdict,
    }


def preflight(outcomes: list[Outcome], facts: dict | None = None, concurrency: int = 1, surge: int = 0) -> dict:
    """Check mode's answer for the chosen Machines together (docs/stalls.md): which would
    finish, which would wait and on what, which can never finish as things stand and why,
    from each Machine's planned steps and what holds it now, and from what the batch does to
    itself (``facts``, what the run read for ``_delete/preflight.py``, at ``concurrency``):
    its findings move a Machine they hold to ``would_wait`` or ``can_never_finish``, and those
    that only cost a workload are listed under ``would_lose``."""
    answer: dict = {"would_finish": [], "would_wait": {}, "can_never_finish": {}}
    for outcome in sorted(outcomes, key=lambda o: o.key):
        verdict = worst(outcome.blockers)
        lines = [line.removeprefix("! ") for line in blocker_lines(outcome.blockers)] or [
            f"{b['kind']} {b['object']}: {b['reason']}" for b in outcome.blockers[:MAX_BLOCKER_LINES]
        ]
        if outcome.status == FAILED:
            answer["can_never_finish"][outcome.key] = [outcome.message]
        elif verdict == NEVER:
            answer["can_never_finish"][outcome.key] = lines
        elif verdict is not None:
            answer["would_wait"][outcome.key] = lines
        else:
            answer["would_finish"].append(outcome.key)
    if facts is None:
        return answer
    batch = batch_findings(facts, concurrency, surge)
    answer["would_lose"] = {}
    for finding in batch["findings"]:
        line = finding_line(finding)
        for key in finding["machines"]:
            if not finding["holds"]:
                answer["would_lose"].setdefault(key, []).append(line)
            elif finding["verdict"] == NEVER or key in answer["can_never_finish"]:
                answer["would_wait"].pop(key, None)
                answer["can_never_finish"].setdefault(key, []).append(line)
            else:
                answer["would_wait"].setdefault(key, []).append(line)
            if finding["holds"] and key in answer["would_finish"]:
                answer["would_finish"].remove(key)
    return {**answer, "batch": batch}


def preflight_warnings(answer: dict) -> list[str]:
    """What check mode's preflight could not read (``batch.not_counted``), as warnings: a part it could not judge
    (a list or read the identity may not make) must not pass for a part where nothing was found."""
    unread = (answer.get("batch") or {}).get("not_counted") or {}
    return [
        f"The preflight could not read everything in {cluster}, so that part of what the batch does to itself is not judged: "
        f"{problems[0]}{f' (and {len(problems) - 1} more, in preflight.batch.not_counted)' if len(problems) > 1 else ''}"
        for cluster, problems in sorted(unread.items())
        if problems
    ]


def deletion_seconds(outcomes: list[Outcome], clock: dict, now: float) -> float | None:
    """Seconds since the earliest of these Machines' deletions started (``clock``, carried across calls and
    rounds); None when the clock has no start for any of them."""
    starts = [since for outcome in outcomes for since in (clock.get(outcome.key) or {}).values()]
    return max(0.0, now - min(starts)) if starts else None


def progress_lines(outcomes: list[Outcome], elapsed: float, *, clock: dict | None = None, now: float | None = None) -> list[str]:
    """What an operator sees after each task: one line per Machine, and for a
    drain under way the Pods left per batch and what holds them.

    The time is counted from the start of the deletion when ``clock`` and ``now`` are given (a
    deletion held at a gate for an hour reads an hour old in every round), else ``elapsed``."""
    since = deletion_seconds(outcomes, clock, now) if clock is not None and now is not None else None
    elapsed = elapsed if since is None else max(elapsed, since)
    counts = {status: sum(1 for outcome in outcomes if outcome.status == status) for status in STATUSES}
    summary = ", ".join(f"{count} {status.replace('_', ' ')}" for status, count in counts.items() if count)
    lines = [f"{len(outcomes)} Machine{'s' if len(outcomes) != 1 else ''} after {elapsed:.0f} s: {summary or 'none'}"]
    # The drain's progress message (docs/behaviour.md §3.4) begins so; the Pods left follow on its next lines.
    not_completed = "Drain not completed yet"
    for outcome in sorted(outcomes, key=lambda o: o.key):
        head = f"{outcome.key}{f' (workload cluster {outcome.cluster})' if outcome.cluster else ''}: {outcome.status.replace('_', ' ')}"
        if outcome.step:
            head += f" at {outcome.step}"
        drain = outcome.drain or {}
        if outcome.status == IN_PROGRESS and outcome.step == DRAIN and drain.get("batches"):
            head += f" - {batches_text(drain['batches'])}"
        lines.append(head)
        detail = outcome.message if outcome.status in (IN_PROGRESS, FAILED, AWAITING_INSTANCE) else ""
        if detail.startswith(not_completed):
            lines.extend(f"    {line}" for line in detail.splitlines()[1:6] if line.strip())
        elif not_completed in detail.split("\n", 1)[0] or (outcome.carried_out_by == "controller" and detail):
            # A drain's message after what ended its slice or its time ("Draining Node n. Drain not
            # completed yet ..."), or a live controller's own account as it wrote it: the first line,
            # then what it lists (the Pods left and what holds them).
            lines.extend(f"    {line}" for line in detail.splitlines()[:6] if line.strip())
        elif detail:
            lines.append(f"    {detail.splitlines()[0]}")
        lines.extend(f"    {line}" for line in blocker_lines(outcome.blockers))
    return lines
