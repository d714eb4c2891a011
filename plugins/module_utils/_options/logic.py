# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The bounds of the modules' number options, and names that must not be
empty, checked before a task reads or writes anything (pure).

Every task refuses a number it cannot act on sensibly - a negative timeout,
interval or grace period, a concurrency of 0, a wait longer than a year - with
one message naming each bad option, instead of acting on it (a negative
``wait_timeout`` used to mean "no time at all", a negative ``grace_period``
reached the API server only after the Node was cordoned). ``0`` keeps its
documented meaning where an option has one (``progress_interval: 0``, ``grace_period: 0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError

# No task waits, sleeps or lets a Pod shut down for longer than this. Far beyond any
# real deletion, and far below what the clock functions underneath accept
# (threading.TIMEOUT_MAX): a larger number is a typo, not an intention.
A_YEAR = 365 * 24 * 3600


@dataclass(frozen=True)
class Bound:
    """The range an integer option must be in: ``least`` up to ``most`` (None: no upper bound).

    Options bounded above are numbers of seconds; ``least`` 0 reads ``0 or more seconds``.
    """

    name: str
    least: int = 0
    most: int | None = A_YEAR

    def error(self, value: Any) -> str | None:
        """Why ``value`` is out of range; None when it is in range or not given."""
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            return None  # unset (the default applies), or not a number: the argument spec reports that
        if value < self.least:
            wanted = "0 or more seconds" if self.least == 0 else f"at least {self.least}"
            return f"{self.name} must be {wanted} (got {value})"
        if self.most is not None and value > self.most:
            return f"{self.name} must be at most {self.most} seconds, a year (got {value})"
        return None


def seconds(*names: str, least: int = 0) -> tuple[Bound, ...]:
    """Bounds for options that count seconds: ``least`` (0) up to a year."""
    return tuple(Bound(name, least) for name in names)


def bound_errors(params: Mapping[str, Any], bounds: Iterable[Bound]) -> list[str]:
    """What is wrong with the bounded options in ``params`` (options not in ``params`` are not checked)."""
    errors = (bound.error(params.get(bound.name)) for bound in bounds)
    return [error for error in errors if error]


def empty_names(params: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """The name options given as an empty string. An empty name is never meant, and its REST path is the
    whole collection: a GET reads a list as if it were the object, a DELETE deletes every object in it."""
    return [f"{name} must not be empty" for name in names if isinstance(params.get(name), str) and not params[name].strip()]


def invalid_options(module: str, errors: Iterable[str]) -> MachineError:
    """The one failure of a task whose options cannot be acted on."""
    return MachineError(f"Invalid options of {module}: {'; '.join(errors)}; nothing was changed")


def check_options(module: str, params: Mapping[str, Any], bounds: Iterable[Bound], errors: Iterable[str] = ()) -> None:
    """Raise :func:`invalid_options` when a bounded option is out of range (or ``errors`` has more)."""
    found = [*errors, *bound_errors(params, bounds)]
    if found:
        raise invalid_options(module, found)
