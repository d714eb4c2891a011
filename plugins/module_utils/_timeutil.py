# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""Kubernetes timestamps and Go durations (pure).

``datetime.UTC`` (Python 3.11) is only looked up when a function runs, so that
on an older Python the modules still import and fail with a clear message.
"""

from __future__ import annotations

import datetime as _dt


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0)


def rfc3339(value: _dt.datetime) -> str:
    return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> _dt.datetime | None:
    """Parse a Kubernetes timestamp (RFC 3339, optionally fractional); ``None`` stays ``None``."""
    if not value:
        return None
    text = value.replace("Z", "+00:00")
    if "." in text:
        head, _dot, tail = text.partition(".")
        zone = ""
        for sign in ("+", "-"):
            if sign in tail:
                frac, _sign, rest = tail.partition(sign)
                zone = sign + rest
                break
        else:
            frac = tail
        text = f"{head}.{frac[:6].ljust(6, '0')}{zone}"
    parsed = _dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.UTC)
    return parsed


def parse_duration(value: str | int | None) -> int | None:
    """Seconds of a Go-style duration (``10m``, ``1h30m``, ``90s``) or an int; ``None``/0 = no limit."""
    if value in (None, "", 0, "0", "0s"):
        return None
    if isinstance(value, int):
        return value
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 0.000001, "µs": 0.000001, "ns": 0.000000001}
    total = 0.0
    number = ""
    text = str(value).strip()
    index = 0
    while index < len(text):
        char = text[index]
        if char.isdigit() or char == ".":
            number += char
            index += 1
            continue
        unit = char
        if text[index : index + 2] in ("ms", "us", "µs", "ns"):
            unit = text[index : index + 2]
        if unit not in units or not number:
            raise ValueError(f"invalid duration {value!r}")
        total += float(number) * units[unit]
        number = ""
        index += len(unit)
    if number:
        raise ValueError(f"invalid duration {value!r}: missing unit")
    return int(total) or None
