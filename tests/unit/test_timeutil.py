"""Kubernetes timestamps read with the standard library (``_timeutil.parse_time``: ``datetime.fromisoformat``,
which reads RFC 3339's ``Z`` since Python 3.11), exactly as the hand-written reader before it did."""

from __future__ import annotations

import datetime as dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import parse_time, rfc3339


def _previous_parse_time(value: str | None) -> dt.datetime | None:
    """The reader parse_time replaced (kept to prove the two agree): ``Z`` made an offset, the fraction cut or
    padded to microseconds by hand, then ``fromisoformat``; no zone is UTC."""
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
    parsed = dt.datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


_TIMES = ["2024-02-29T23:59:59", "2025-01-01T00:00:00", "1999-12-31T12:30:05"]
_FRACTIONS = ["", ".1", ".12", ".123", ".123456", ".1234567", ".123456789", ".000000001", ".5"]
_ZONES = ["Z", "+00:00", "-00:00", "+01:00", "-05:30", "+14:00", ""]


@pytest.mark.parametrize("value", [time + fraction + zone for time in _TIMES for fraction in _FRACTIONS for zone in _ZONES])
def test_every_timestamp_reads_as_before(value) -> None:
    assert parse_time(value) == _previous_parse_time(value)
    assert parse_time(value).tzinfo is not None


@pytest.mark.parametrize("value", [None, ""])
def test_no_time_is_none(value) -> None:
    assert parse_time(value) is None


def test_the_api_servers_timestamps_read_as_utc_instants() -> None:
    assert parse_time("2024-05-01T10:00:00Z") == dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
    assert parse_time("2024-05-01T12:00:00+02:00") == dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
    assert parse_time("2024-05-01T10:00:00.123456789Z") == dt.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=dt.UTC)
    assert rfc3339(parse_time("2024-05-01T10:00:00.9Z")) == "2024-05-01T10:00:00Z"


@pytest.mark.parametrize("value", ["yesterday", "2024-13-01T00:00:00Z", "2024-05-01T25:00:00Z"])
def test_what_is_no_timestamp_is_refused_as_before(value) -> None:
    with pytest.raises(ValueError):
        _previous_parse_time(value)
    with pytest.raises(ValueError):
        parse_time(value)
