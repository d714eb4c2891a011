# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Which Machines a task is about (pure): the options of the doc fragment
``lifecycle.machine.machines``, as one value."""

from __future__ import annotations

from dataclasses import dataclass


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
