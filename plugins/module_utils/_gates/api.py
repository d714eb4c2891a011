# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Following the Machines of one API: list them, then watch their changes.

Every read goes through the transport, so dropped connections, 503s and
timeouts are retried there, and a watch that breaks is re-opened from the
last resourceVersion it saw (nothing is missed). When that version has
expired (410 Gone), or every ``resync_interval`` seconds, the Machines are
listed again and the whole list is handed over as a resync.
"""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.lifecycle.machine.plugins.module_utils._gates.logic import GateSourceRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.watch import TIMEOUT, watch_until
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import list_machines_of, machine_path

# Without a periodic resync, a watch still ends (and is re-opened) every few minutes; the wait itself has no end.
FOREVER = 10**9


def follow_machines(
    api: KubeApi,
    api_version: str,
    request: GateSourceRequest,
    *,
    on_list: Callable[[list[dict]], None],
    on_change: Callable[[str, dict], None],
) -> None:
    """List the Machines of ``api_version`` (``on_list``), then pass each change
    (``on_change(event type, Machine)``) until the transport is cancelled, which
    raises :class:`Cancelled`. A failure the transport could not retry away
    raises :class:`ApiError`; the caller starts over (with a new list)."""
    collection = machine_path(api_version, request.namespace)

    def relist() -> tuple[bool, str | None]:
        machines, version = list_machines_of(api, api_version, request.namespace, request.label_selector)
        on_list(machines)
        return False, version

    def see(event: dict) -> bool:
        machine = event["object"]
        machine.setdefault("apiVersion", api_version)
        on_change(event["type"], machine)
        return False

    _done, version = relist()
    while True:
        deadline = api.monotonic() + (request.resync_interval or FOREVER)
        outcome = watch_until(api, collection, on_event=see, deadline=deadline, resource_version=version, label_selector=request.label_selector, relist=relist)
        if outcome == TIMEOUT:
            _done, version = relist()
