# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The event source's run: follow the Machines of every served API, each in a
thread, and announce each gate reached through ``emit``.

A failure the transport could not retry away (the API server down for longer
than its retry budget, a permission taken away) is logged, and that API's
Machines are listed again after a pause that grows up to a minute: the
source keeps serving. Only the first contact is allowed to fail the source,
so that a wrong kubeconfig or a missing permission is reported at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.api import follow_machines
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.logic import GateSourceRequest, GateTracker
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError, Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import list_machines_of, machine_api_versions, require_namespace

log = logging.getLogger("lifecycle.machine.machine_gates")

RESTART_PAUSES = (1, 2, 5, 10, 30, 60)


class GateSource:
    """Announces the gates of the chosen hooks on the Machines of every served API."""

    def __init__(self, api: KubeApi, request: GateSourceRequest, emit: Callable[[dict], None]):
        self.api = api
        self.request = request
        self.emit = emit
        self.tracker = GateTracker(request)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.failure: BaseException | None = None

    def start(self) -> list[str]:
        """Check the first contact (discovery and one list per API, in this thread, so
        that a bad connection or a missing permission fails here), then follow
        each API in a thread of its own. Returns the Machine APIs followed."""
        try:
            versions = machine_api_versions(self.api, self.request.api_version)
            listed = [list_machines_of(self.api, version, self.request.namespace, self.request.label_selector)[0] for version in versions]
            if self.request.namespace and not any(listed):
                require_namespace(self.api, self.request.namespace)  # a mistyped namespace would wait forever for nothing
        except ApiError as exc:
            raise MachineError(f"Cannot follow Machines: {exc}") from None
        for version in versions:
            thread = threading.Thread(target=self._follow, args=(version,), name=f"machine_gates {version}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return versions

    def stop(self, timeout: float = 10) -> None:
        """Cut every watch and request, and wait for the threads to end."""
        self.api.cancel()
        for thread in self._threads:
            thread.join(timeout)

    @property
    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def _follow(self, api_version: str) -> None:
        failures = 0

        def listed(machines: list[dict]) -> None:
            nonlocal failures
            failures = 0  # the API answers again: the next failure starts with a short pause
            self._listed(api_version, machines)

        while not self.api.cancelled:
            try:
                follow_machines(self.api, api_version, self.request, on_list=listed, on_change=self._changed)
            except Cancelled:
                return
            except (ApiError, MachineError) as exc:
                pause = RESTART_PAUSES[min(failures, len(RESTART_PAUSES) - 1)]
                failures += 1
                log.warning("Following %s Machines failed (%s); reading them again in %s s", api_version, exc, pause)
                try:
                    self.api.sleep(pause)
                except Cancelled:
                    return
            except Exception as exc:  # a bug must not die silently in a thread: the source reports it
                self.failure = exc
                log.exception("Following %s Machines stopped", api_version)
                return

    def _listed(self, api_version: str, machines: list[dict]) -> None:
        with self._lock:
            events = self.tracker.resync(api_version, machines)
        log.info("Read %d %s Machines; %d at a gate of the chosen hooks", len(machines), api_version, len(events))
        self._send(events)

    def _changed(self, kind: str, machine: dict) -> None:
        with self._lock:
            if kind == "DELETED":
                self.tracker.gone(machine)
                events = []
            else:
                events = self.tracker.seen(machine)
        self._send(events)

    def _send(self, events: list[dict]) -> None:
        for event in events:
            gate = event["machine_gate"]
            machine = gate["machine"]
            log.info("%s/%s reached the %s gate of hook %s", machine["namespace"], machine["name"], gate["point"], gate["hook"]["name"])
            self.emit(event)
