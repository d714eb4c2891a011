"""Chaos soak of delete_machine: N randomized runs against a real control plane, with
API faults, kills and re-runs, each checked against five safety invariants.

    python tests/chaos/soak.py [--runs 200] [--seed S] [--replay SEED ...] [--kubeconfig PATH] [--keep]

Each run (scenario.py draws it from its seed) deletes one to three Machines of one
flavour (OpenShift, Cluster API served as v1beta1 only, Cluster API v1beta2) with
``ansible-playbook playbooks/delete_machine.yml`` through a fault-injecting proxy
(tests/faultproxy.py, 0 to 20 % of requests), while the owners of the hooks, of the
infrastructure and of WaitCompleted Pods act concurrently (actors.py). Attempts are
killed with SIGKILL or SIGINT at random moments and re-run until one reports done.
The run is then checked (invariants.py) from watches of the API and from the API
server's audit log. The figures are printed at the end; the exit status is 1 when
any invariant was violated (each failing run's seed is printed: ``--replay SEED``
runs it again), 2 when a run could not be checked.

Without --kubeconfig a private control plane is started under .tmp/ and stopped at
the end (its audit log is the one checked); with one, its audit.log must sit beside it.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for extra in (HERE, REPO / "tests", REPO / "hack"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import cluster as cluster_tool

sys.path.insert(0, str(cluster_tool.collections_root()))

from actors import Actors
from faultproxy import FaultProxy, load_kubeconfig
from invariants import INVARIANTS, Checker, Violation, audit_events
from runner import ORPHAN_SECONDS, Attempt, Runner
from scenario import CLASS_LABEL, RULES, RUN_LABEL, Scenario, run_seeds
from timeline import Timeline
from world import SetupError, World

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

PLAYBOOK = REPO / "playbooks" / "delete_machine.yml"
PROVIDER_TASKS = REPO / "hack" / "demo" / "tasks" / "provider.yml"
USER_AGENT = "lm-chaos"
SETTLE_SECONDS = 1.0  # after a kill, beyond the proxy's delay: requests still in flight land first


@dataclass
class RunResult:
    scenario: Scenario
    attempts: list[Attempt] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)  # why the run could not be checked
    faults: Counter = field(default_factory=Counter)
    requests: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return bool(self.violations or self.incomplete)

    def line(self) -> str:
        s = self.scenario
        kills = ", ".join(f"{a.killed_by}@{a.number}" for a in self.attempts if a.killed_by)
        verdict = "ok" if not self.failed else f"{len(self.violations)} violation(s)" + (" (incomplete)" if self.incomplete else "")
        return (
            f"seed {s.seed:>10} {s.flavour:9} {s.machines} Machine(s), {len(s.hooks)} hook(s), faults {s.fault_rate:5.1%}: "
            f"{len(self.attempts)} attempt(s){f' (killed {kills})' if kills else ''}, {sum(self.faults.values())} faults / {self.requests} requests, "
            f"{self.seconds:.1f} s: {verdict}"
        )


@dataclass
class Summary:
    results: list[RunResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def violations(self) -> Counter:
        counts = Counter(dict.fromkeys(INVARIANTS, 0))
        for result in self.results:
            counts.update(v.invariant for v in result.violations)
        return counts

    @property
    def failing(self) -> list[RunResult]:
        return [r for r in self.results if r.failed]

    def report(self) -> str:
        attempts = [a for r in self.results for a in r.attempts]
        kills = Counter(a.killed_by for a in attempts if a.killed_by)
        reruns = sum(len(r.attempts) - 1 for r in self.results)
        after_failure = sum(1 for r in self.results for a in r.attempts[:-1] if not a.killed_by)
        faults: Counter = Counter()
        for result in self.results:
            faults.update(result.faults)
        requests = sum(r.requests for r in self.results)
        flavours = Counter(r.scenario.flavour for r in self.results)
        lines = [
            "",
            f"runs:        {len(self.results)} ({', '.join(f'{name} {count}' for name, count in sorted(flavours.items()))})",
            f"kills:       {sum(kills.values())} ({', '.join(f'{name} {count}' for name, count in sorted(kills.items())) or 'none'})"
            f"; SIGINT escalated to SIGKILL: {sum(1 for a in attempts if a.escalated)}",
            f"re-runs:     {reruns} ({reruns - after_failure} after a kill, {after_failure} after a failed attempt); attempts {len(attempts)}",
            f"faults:      {sum(faults.values())} injected in {requests} proxied requests"
            f" ({', '.join(f'{kind} {count}' for kind, count in sorted(faults.items())) or 'none'})",
            f"wall time:   {self.seconds:.1f} s ({self.seconds / max(1, len(self.results)):.1f} s per run)",
            "violations:",
        ]
        lines += [f"  {name} {INVARIANTS[name]}: {count}" for name, count in self.violations.items()]
        failed = [a.failure for a in attempts if a.failure]
        if failed:
            lines.append(f"attempts that failed by themselves: {len(failed)}")
            lines += [f"  {count} x {why}" for why, count in Counter(failed).most_common(5)]
        incomplete = [r for r in self.results if r.incomplete]
        if incomplete:
            lines.append(f"runs that could not be checked: {len(incomplete)}")
        if self.failing:
            lines.append("failing runs (replay with: python tests/chaos/soak.py --replay SEED):")
            for result in self.failing:
                lines.append(f"  --replay {result.scenario.seed}  {result.scenario.flavour}")
                lines += [f"      {v.invariant}: {v.message}" for v in result.violations]
                lines += [f"      not checked: {why}" for why in result.incomplete]
        else:
            lines.append("failing runs: none")
        return "\n".join(lines)


def upstream_of(kubeconfig: str, ca_file: Path) -> str:
    """The API server URL of the kubeconfig; its CA written to ``ca_file`` for the proxy."""
    config = load_kubeconfig(kubeconfig)
    cluster = config["clusters"][0]["cluster"]
    ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    return cluster["server"]


class Soak:
    """Runs scenarios against one control plane. ``use_generation(v1beta1|v1beta2)`` switches
    the Cluster API generation it serves; ``stop()`` ends whatever is running."""

    def __init__(self, kubeconfig: str, workdir: Path, use_generation: Callable[[str], None], log: Callable[[str], None] = print, keep: bool = False):
        self.kubeconfig = str(kubeconfig)
        self.audit_log = Path(kubeconfig).parent / "audit.log"
        self.workdir = workdir
        self.use_generation = use_generation
        self.log = log
        self.keep = keep
        self.api = self.make_api(USER_AGENT)
        workdir.mkdir(parents=True, exist_ok=True)
        self.upstream = upstream_of(self.kubeconfig, workdir / "upstream-ca.crt")
        self._live: list = []  # what a run started and stop() must end: proxy, actors, timeline, runner

    def make_api(self, user_agent: str) -> KubeApi:
        return api_from_kubeconfig(self.kubeconfig, user_agent=user_agent)

    def run_many(self, seeds: list[int]) -> Summary:
        summary = Summary()
        started = time.monotonic()
        try:
            for number, seed in enumerate(seeds, 1):
                result = self.run_one(seed)
                summary.results.append(result)
                self.log(f"[{number:>3}/{len(seeds)}] {result.line()}")
                for violation in result.violations:
                    self.log(f"        {violation.invariant}: {violation.message}")
                for why in result.incomplete:
                    self.log(f"        not checked: {why}")
        finally:
            summary.seconds = time.monotonic() - started
        return summary

    def run_one(self, seed: int) -> RunResult:
        scenario = Scenario.draw(seed)
        result = RunResult(scenario)
        started = time.monotonic()
        if scenario.capi:
            self.use_generation(scenario.flavour)
        world = World(self.api, scenario, Path(self.kubeconfig).read_text())
        workdir = self.workdir / scenario.run_id
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        (workdir / "scenario.txt").write_text(scenario.describe() + "\n")
        try:
            world.setup()
            self._deletion(world, workdir, result)
        except SetupError as exc:
            result.incomplete.append(f"set-up: {exc}")
        finally:
            try:
                self.stop()
            finally:
                left = world.cleanup()
            result.violations += [Violation("I5", f"cleanup/{i}", problem) for i, problem in enumerate(left)]
            result.seconds = time.monotonic() - started
        if not result.failed and not self.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        return result

    def _deletion(self, world: World, workdir: Path, result: RunResult) -> None:
        scenario = world.s
        timeline = Timeline(self.make_api(f"{USER_AGENT}-timeline"))
        self._live.append(timeline)
        for collection, path, anchor, selector in world.watched():
            timeline.add(collection, path, anchor, selector)
        timeline.start()
        audit_offset = self.audit_log.stat().st_size
        proxy = FaultProxy(self.upstream, self.workdir / "upstream-ca.crt", rate=scenario.fault_rate, seed=scenario.seed, delay_seconds=scenario.fault_delay)
        self._live.append(proxy)
        proxy.start()
        proxy.kubeconfig_from(self.kubeconfig, workdir / "proxy.kubeconfig")
        actors = Actors(world, self.api, self.make_api, time.monotonic())
        self._live.append(actors)
        actors.start()
        runner = Runner(PLAYBOOK, json.dumps(self._extra_vars(scenario)), self._env(proxy.kubeconfig), workdir)
        self._live.append(runner)
        for number, kill in enumerate(scenario.kills):
            attempt = runner.attempt(number, f"{scenario.run_id}-{number}", kill)
            result.attempts.append(attempt)
            if attempt.orphans:
                result.violations.append(
                    Violation("I5", f"orphans/{number}", f"attempt {number}: processes still running {ORPHAN_SECONDS:.0f}s after it ended: {attempt.orphans}")
                )
            if attempt.done:
                break
            time.sleep(scenario.fault_delay + SETTLE_SECONDS)
        else:
            result.violations.append(Violation("I5", "attempts", f"no attempt of {len(scenario.kills)} reported done; see {workdir}"))
        actors.halt()
        actors.join(timeout=30)
        result.incomplete += timeline.sync() + timeline.errors + [f"hook controller: {e}" for e in actors.errors[-3:]]
        timeline.stop()
        stats = proxy.stats()
        with (workdir / "proxy.log").open("w") as records:
            for record in stats.records:
                records.write(f"{record.seq} {record.method} {record.path} fault={record.fault} status={record.status} forwarded={record.forwarded}\n")
        result.faults.update(stats.faults)
        result.requests = stats.requests
        proxy.stop()
        audit, _end = audit_events(self.audit_log, audit_offset)
        quiet = [
            (attempt.killed_at, scenario.fault_delay, after.started_at)  # a request the proxy delayed may land that much later
            for attempt, after in zip(result.attempts, [*result.attempts[1:], None], strict=True)
            if attempt.killed_at is not None and after is not None
        ]
        result.violations += Checker(scenario, timeline.events(), audit, actors.removals, actors.completed, quiet=quiet).check()
        result.violations += [Violation("I5", f"left/{what}", f"left behind: {what}") for what in world.left_behind()]

    def _extra_vars(self, scenario: Scenario) -> dict:
        rules = [
            {"name": f"chaos-{name}", "drain": RULES[name], "pods": [{"selector": {"matchLabels": {CLASS_LABEL: name}}}]} for name in scenario.inline_rules
        ]
        extra = {
            "machine_label_selector": f"{RUN_LABEL}={scenario.run_id}",
            "machine_namespace": scenario.namespace,
            "drain_timeout": 120,
            "terminate_timeout": 120,
            "drain_rules": rules,
        }
        if not scenario.capi:
            extra["provider_tasks"] = str(PROVIDER_TASKS)
        return extra

    def _env(self, kubeconfig: str) -> dict:
        return cluster_tool.ansible_environment(kubeconfig)

    def stop(self) -> None:
        """End everything the current run started: the playbook and its processes, the actors, the watches, the proxy."""
        while self._live:
            thing = self._live.pop()
            if isinstance(thing, Runner):
                thing.stop()
            elif isinstance(thing, Actors):
                thing.halt()
                thing.join(timeout=30)
            else:
                with contextlib.suppress(RuntimeError):
                    thing.stop()


def main(argv: list[str]) -> int:
    cluster_tool.restore_sigint()  # the soak kills runs with SIGINT: they must not inherit it ignored
    # A soak stopped with SIGTERM stops its runs and its control plane as one stopped with Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None, help="seed of the whole soak (default: random, printed)")
    parser.add_argument("--replay", type=int, action="append", default=[], metavar="SEED", help="run exactly this run seed (repeatable)")
    parser.add_argument("--kubeconfig", help="a running control plane with audit.log beside its kubeconfig (default: start a private one)")
    parser.add_argument("--keep", action="store_true", help="keep the logs of passing runs too")
    args = parser.parse_args(argv)
    if args.replay:
        seeds = args.replay
        print(f"replaying {len(seeds)} run(s): {seeds}", flush=True)
    else:
        seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
        seeds = run_seeds(seed, args.runs)
        print(f"chaos soak: {args.runs} runs, seed {seed}", flush=True)
    workdir = REPO / ".tmp" / f"chaos-{os.getpid()}"
    state_dir = None
    kubeconfig = args.kubeconfig
    if not kubeconfig:
        state_dir = workdir / "cluster"
        print("starting a private control plane ...", flush=True)
        cluster_tool.up(state_dir, quiet=True)
        kubeconfig = str(state_dir / "kubeconfig")
    state = cluster_tool.state_from_kubeconfig(Path(kubeconfig))
    soak = Soak(
        kubeconfig,
        workdir / "runs",
        lambda generation: cluster_tool.set_capi_generation(state, generation),
        log=lambda text: print(text, flush=True),
        keep=args.keep,
    )
    try:
        summary = soak.run_many(seeds)
    finally:
        soak.stop()
        if state_dir is not None:
            cluster_tool.down(state_dir)
            shutil.rmtree(state_dir, ignore_errors=True)
    print(summary.report(), flush=True)
    if summary.failing:
        print(f"logs of the failing runs: {workdir / 'runs'}", flush=True)
    elif not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    if any(r.violations for r in summary.results):
        return 1
    return 2 if summary.failing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
