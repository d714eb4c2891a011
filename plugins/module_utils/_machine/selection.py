# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Which Machines a task is about (pure): the options of the doc fragment
``lifecycle.machine.machines``, as one value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import CAPI_GROUP, OPENSHIFT_GROUP
from ansible_collections.lifecycle.machine.plugins.module_utils._options.logic import empty_names, invalid_names

# Where Machines can be served, per group, preferred version first (docs/behaviour.md §1).
MACHINE_VERSIONS = ((OPENSHIFT_GROUP, ("v1beta1",)), (CAPI_GROUP, ("v1beta2", "v1beta1")))


@dataclass(frozen=True)
class MachineSelection:
    """One Machine by name (with its namespace), or every Machine matching all label selectors."""

    machine: str | None = None
    namespace: str | None = None
    label_selectors: tuple[str, ...] = ()
    api_version: str | None = None

    @classmethod
    def from_params(cls, params: dict) -> MachineSelection:
        return cls(
            machine=params.get("machine"),
            namespace=params.get("namespace"),
            label_selectors=tuple(params.get("label_selectors") or ()),
            api_version=params.get("api_version"),
        )

    @property
    def label_selector(self) -> str | None:
        """The selectors ANDed into one, as kubernetes.core does."""
        return ",".join(self.label_selectors) or None


def selection_errors(params: dict, *, writes: bool) -> list[str]:
    """Why the options cannot choose Machines (empty when they can).

    An empty Machine name, or an empty selector, would choose every Machine of the
    namespace (or of the cluster); so would an empty ``label_selectors`` list, which
    a task that writes (a hook, a condition, a deletion) refuses. A name no Machine
    or Namespace can have (``Worker-1``) is refused: "not found" must not read as done.
    """
    errors = empty_names(params, ("machine",)) + invalid_names(params, subdomains=("machine",), namespaces=("namespace",))
    selectors = params.get("label_selectors")
    if selectors is not None and params.get("machine") is None:
        if any(not str(selector).strip() for selector in selectors):
            errors.append("label_selectors must not hold an empty selector: it would choose every Machine")
        elif writes and not selectors:
            errors.append("label_selectors must not be empty: an empty list would choose every Machine")
    return errors


def served_machine_apis(served_versions: Callable[[str], list[str]]) -> list[str]:
    """Every apiVersion Machines are served as, given the served versions of a group."""
    return [f"{group}/{version}" for group, versions in MACHINE_VERSIONS for version in versions if version in served_versions(group)]


def unserved_api_version(api_version: str, served: list[str]) -> str:
    """The message refusing an ``api_version`` that serves no Machines (a typo must not select nothing and succeed)."""
    if not served:
        return f"api_version {api_version} is not a Machine API this cluster serves: it serves neither {OPENSHIFT_GROUP} nor {CAPI_GROUP} Machines"
    return f"api_version {api_version} is not a Machine API this cluster serves; it serves Machines as {', '.join(served)}"
