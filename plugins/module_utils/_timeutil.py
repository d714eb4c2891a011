# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes timestamps and Go durations (pure).

``datetime.UTC`` (Python 3.11) is only looked up when a function runs, so that
on an older Python the modules still import and fail with a clear message.
"""

from __future__ import annotations

import datetime as _dt
import re
import traceback

try:
    import durationpy

    DURATIONPY_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - reported by the modules through missing_required_lib
    durationpy = None
    DURATIONPY_IMPORT_ERROR = traceback.format_exc()


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0)


def rfc3339(value: _dt.datetime) -> str:
    return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> _dt.datetime | None:
    """Parse a Kubernetes timestamp (RFC 3339, ``Z`` or an offset, optionally fractional: Python 3.11's
    ``fromisoformat`` reads them all, a fraction past microseconds cut); ``None`` stays ``None``; a time
    without a zone is UTC."""
    if not value:
        return None
    parsed = _dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=_dt.UTC)


# The units Go's time.ParseDuration knows; durationpy also reads d, w, mm and y, which Go refuses.
_GO_UNITS = frozenset(("ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h"))


def parse_duration(value: str | int | None) -> float | None:
    """Seconds of a Go duration (``10m``, ``1h30m``, ``500ms``) or an int; ``None`` = no limit.

    As Cluster API reads ``nodeDrainTimeout`` and its siblings, a duration of
    zero or less (or unset) means no limit, and any positive one is a limit,
    however short: ``500ms`` is half a second, never "no limit". Whole
    seconds come back as ``int``.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}")
    if isinstance(value, int):
        return value if value > 0 else None
    text = str(value)
    seconds = go_duration_seconds(text)
    if seconds < 0 or (seconds == 0 and (text.startswith("-") or not re.search(r"[1-9]", text))):
        return None
    if seconds == 0:
        # timedelta counts microseconds: a positive duration below one (1ns) is still a limit.
        seconds = 1e-6
    return int(seconds) if seconds.is_integer() else seconds


def go_duration_seconds(text: str) -> float:
    """Seconds of a Go duration (``90s``, ``5m``, ``1h30m``, ``-1m``, ``0``), exactly as Go's
    time.ParseDuration reads it; ValueError saying what is wrong."""
    if durationpy is None:
        raise ValueError(f"invalid duration {text!r}: reading Go durations needs the Python library durationpy")
    try:
        seconds = durationpy.from_str(text).total_seconds()
    except durationpy.DurationError:
        raise ValueError(f"invalid duration {text!r}: expected a Go duration such as 90s, 10m or 1h30m") from None
    unknown = sorted(set(re.findall(r"[^0-9.+-]+", text)) - _GO_UNITS)
    if unknown:
        raise ValueError(f"invalid duration {text!r}: unknown unit {', '.join(unknown)} (Go durations use ns, us, ms, s, m and h)")
    return seconds
