# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""machine_info's run: read the chosen Machines, or wait until each reaches a gate."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._info.logic import InfoRequest, reached, select_by_query
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import get_machine, require_namespace, select_machines, wait_for_machine
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import machine_label
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.view import describe


def read_machines(api: KubeApi, request: InfoRequest) -> dict:
    # The task's one deadline: while it waits, no retry nor read of the transport outlasts wait_timeout either.
    api = api.fork(deadline=api.monotonic() + request.wait_timeout if request.wait else None)
    selection = request.selection
    if selection.machine:
        # Like other info modules, a Machine that does not exist is not an error:
        # it is reported as absent, and it has passed every gate a wait could ask for.
        if not selection.namespace:
            raise MachineError(f"namespace is required to find Machine {selection.machine}")
        machine = get_machine(api, selection.namespace, selection.machine, selection.api_version)
        if machine is None:
            require_namespace(api, selection.namespace)
            gone = {"name": selection.machine, "namespace": selection.namespace, "api_version": selection.api_version, "exists": False}
            return {"changed": False, "machines": [gone] if request.wait else [], **({"waited": 0.0} if request.wait else {})}
        machines = [machine]
    else:
        machines = select_machines(api, selection)
    if request.query is not None:
        chosen = {(v["namespace"], v["name"], v["api_version"]) for v in select_by_query([describe(m) for m in machines], request.query)}
        machines = [m for m in machines if (m["metadata"].get("namespace"), m["metadata"]["name"], m["apiVersion"]) in chosen]
    if not request.wait:
        return {"changed": False, "machines": [describe(m) for m in machines]}
    began, results, pending = api.monotonic(), [], []
    for machine in machines:
        current, ok = wait_for_machine(api, machine, reached(request.wait_for), api.deadline)
        results.append(describe(current, machine))
        if not ok:
            pending.append(machine_label(machine))
    waited = round(api.monotonic() - began, 1)
    if pending:
        raise MachineError(
            f"Timed out after {request.wait_timeout} s waiting for Machine {', '.join(pending)} to be {request.wait_for}",
            machines=results,
            waited=waited,
        )
    return {"changed": False, "machines": results, "waited": waited}
