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

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import go_duration_seconds

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


# Kubernetes names (k8s.io/apimachinery validation): most objects, custom resources and Nodes
# are named by DNS-1123 subdomains, Namespaces by DNS-1123 labels.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_LABEL_RE = re.compile(rf"^{_DNS_LABEL}$")
SUBDOMAIN_RULE = "at most 253 characters: lower case letters, digits, '-' and '.', starting and ending with a letter or digit"
LABEL_RULE = "at most 63 characters: lower case letters, digits and '-', starting and ending with a letter or digit"


def subdomain_error(option: str, value: Any) -> str | None:
    """Why ``value`` can never be the name of an object named by a DNS-1123 subdomain (Machines, Nodes, Alive
    objects, Pods); None when it can, or when it is unset or empty (:func:`empty_names` reports that)."""
    if not isinstance(value, str) or not value.strip():
        return None
    if len(value) <= 253 and _SUBDOMAIN_RE.match(value):
        return None
    return f"{option} {value!r} can never name a Kubernetes object: a name is {SUBDOMAIN_RULE}"


def namespace_error(option: str, value: Any) -> str | None:
    """Why ``value`` can never be the name of a Namespace (a DNS-1123 label); None when it can, or is unset or empty."""
    if not isinstance(value, str) or not value.strip():
        return None
    if len(value) <= 63 and _LABEL_RE.match(value):
        return None
    return f"{option} {value!r} can never name a Namespace: a Namespace name is {LABEL_RULE}"


def invalid_names(params: Mapping[str, Any], subdomains: Iterable[str] = (), namespaces: Iterable[str] = ()) -> list[str]:
    """The name options whose value no object can have: a capital letter, a space, an underscore. Such a
    name is never found, so a task that treats "not found" as done would report success for a typo."""
    errors = [subdomain_error(name, params.get(name)) for name in subdomains]
    errors += [namespace_error(name, params.get(name)) for name in namespaces]
    return [error for error in errors if error]


def unknown_keys(mapping: Mapping[str, Any], allowed: Iterable[str], where: str) -> str | None:
    """Why ``mapping`` has keys nobody reads (a misspelt ``namespace`` that was ignored widens a task); None when it has none."""
    allowed = sorted(set(allowed))
    unknown = sorted(str(key) for key in mapping if key not in allowed)
    if not unknown:
        return None
    return f"{where} has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(allowed)})"


def invalid_options(module: str, errors: Iterable[str]) -> MachineError:
    """The one failure of a task whose options cannot be acted on."""
    return MachineError(f"Invalid options of {module}: {'; '.join(errors)}; nothing was changed")


def check_options(module: str, params: Mapping[str, Any], bounds: Iterable[Bound], errors: Iterable[str] = ()) -> None:
    """Raise :func:`invalid_options` when a bounded option is out of range (or ``errors`` has more)."""
    found = [*errors, *bound_errors(params, bounds)]
    if found:
        raise invalid_options(module, found)


# Every option of a module, role, playbook or the event source that counts seconds: each takes a number of
# seconds or a Go duration (docs/durations.md, doc fragment lifecycle.machine.durations).
DURATION_OPTIONS = (
    "wait_timeout",
    "wait_sleep",
    "drain_timeout",
    "terminate_timeout",
    "progress_interval",
    "grace_period",
    "controller_grace",
    "resync_interval",
    "stall_timeout",
    "replacement_timeout",
)
DURATION_RULE = "a number of seconds or a Go duration such as 90s, 5m or 1h30m"
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+)")


def duration_seconds(name: str, value: Any) -> Any:
    """Whole seconds of a duration option: a number of seconds (``300``, ``"300"``) or a Go duration
    (``5m``, ``1h30m``, ``90s``); a part of a second counts as a whole one (``500ms`` is 1), a negative
    duration stays negative (the bounds say what is wrong with it). None stays None. ValueError naming the option."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    number = _number(value)
    if number is not None:
        return number
    text = str(value).strip()
    try:
        seconds = go_duration_seconds(text)
    except ValueError as exc:
        shown = text if len(text) <= 40 else text[:37] + "..."
        detail = " (a Go duration's units are ns, us, ms, s, m and h)" if "unknown unit" in str(exc) else ""
        detail = " (reading a Go duration needs the Python library durationpy)" if "durationpy" in str(exc) else detail
        raise ValueError(f"{name} must be {DURATION_RULE}, not {shown!r}{detail}") from None
    return math.ceil(seconds) if seconds > 0 else -math.ceil(-seconds)


def _number(value: Any) -> int | None:
    """Whole seconds of a finite number or of a text that is one (a part of a second counts as one); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return math.ceil(value) if math.isfinite(value) else None
    text = str(value).strip()
    if _WHOLE.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return math.ceil(float(text))
    return None


def parse_durations(params: Mapping[str, Any], names: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """(the duration options of ``params`` named in ``names`` as whole seconds, what is wrong with the others)."""
    seconds: dict[str, Any] = {}
    errors = []
    for name in names:
        if name in params:
            try:
                seconds[name] = duration_seconds(name, params[name])
            except ValueError as exc:
                errors.append(str(exc))
    return seconds, errors
