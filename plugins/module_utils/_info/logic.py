# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""machine_info's options (pure): the request, the JMESPath query that picks
Machines out of their views (``_machine.view.describe``), and the gates a
wait can ask for."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for, is_deleting
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection, selection_errors
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import check_options, seconds

try:
    import jmespath

    JMESPATH_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - reported when a query is given
    jmespath = None
    JMESPATH_IMPORT_ERROR = traceback.format_exc()

WAIT_STATES = ("drainable", "drained", "terminable", "creatable", "deleting", "deleted")
BOUNDS = seconds("wait_timeout")


@dataclass(frozen=True)
class InfoRequest:
    """machine_info's options."""

    selection: MachineSelection = field(default_factory=MachineSelection)
    wait: bool = False
    wait_for: str = "deleted"
    wait_timeout: int = 120
    query: str | None = None

    @classmethod
    def from_params(cls, params: dict) -> InfoRequest:
        query = params.get("query")
        errors = selection_errors(params, writes=False) + (["query must not be empty"] if query is not None and not query.strip() else [])
        check_options("machine_info", params, BOUNDS, errors=errors)
        if query is not None:
            compile_query(query)
        return cls(
            selection=MachineSelection.from_params(params),
            wait=params["wait"],
            wait_for=params["wait_for"],
            wait_timeout=params["wait_timeout"],
            query=query,
        )


def compile_query(query: str):
    """The compiled JMESPath expression; MachineError when it cannot be parsed or jmespath is missing."""
    if jmespath is None:
        raise MachineError("query needs the jmespath Python library on the host that runs the module (pip install jmespath)", exception=JMESPATH_IMPORT_ERROR)
    try:
        return jmespath.compile(query)
    except jmespath.exceptions.JMESPathError as exc:
        raise MachineError(f"Invalid JMESPath query {query!r}: {' '.join(str(exc).split())}") from None


def select_by_query(views: list[dict], query: str) -> list[dict]:
    """The Machines (machine_info's views) that ``query`` picks out of ``views``.

    The query runs over the list of Machines and must give Machines back, a
    filter such as ``[?phase=='Failed']``; a projection to other values is
    refused, since the caller acts on Machines.
    """
    found = compile_query(query).search(views)
    if found is None:
        return []
    if isinstance(found, dict):
        found = [found]
    keys = {"name", "namespace", "api_version"}
    if not isinstance(found, list) or not all(isinstance(item, dict) and keys <= set(item) for item in found):
        shape = type(found).__name__ if not isinstance(found, list) else "a list of " + ", ".join(sorted({type(i).__name__ for i in found}))
        raise MachineError(
            f"query {query!r} must select Machines (entries of machines, each with name, namespace and api_version), "
            f"as a filter such as [?phase=='Failed'] does; it gave {shape}"
        )
    return found


def reached(state: str):
    """A predicate on a Machine (None: gone) for a ``wait_for`` state."""

    def check(machine: dict | None) -> bool:
        if machine is None:
            return True
        if state == "deleted":
            return False
        if state == "deleting":
            return is_deleting(machine)
        return flavour_for(machine).gates(machine)[state]

    return check
