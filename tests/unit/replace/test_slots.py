"""How many Machines a roll replaces at a time (``_replace/run.py`` Slots): in the task's order, those
already under way first, and never more than the concurrency; a failure stops the roll."""

from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.run import Slots


class Clock:
    """What Slots asks of the transport: its clock and whether the run was cancelled."""

    cancelled = False

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()


def test_machines_already_under_way_hold_their_slots_and_the_others_wait_their_turn_in_order():
    slots = Slots(2, ["a", "b", "c", "d"], started={"c"})
    for key in "abcd":
        slots.enter(key)
    assert slots.take("c", Clock, until=None)
    assert slots.take("a", Clock, until=None)
    # Both slots are held: b waits (and gives up at its call's end), d waits behind b.
    assert not slots.take("b", Clock, until=time.monotonic() + 0.2)
    assert not slots.take("d", Clock, until=time.monotonic() + 0.2)
    assert slots.waiting_message() == "queued: 2 of 2 replacements under way (concurrency 2)"
    slots.done("c")
    assert not slots.take("d", Clock, until=time.monotonic() + 0.2)  # b comes first
    assert slots.take("b", Clock, until=None)


def test_a_machine_waiting_for_its_slot_takes_it_the_moment_one_is_freed():
    slots = Slots(1, ["a", "b"], started=set())
    slots.enter("a")
    slots.enter("b")
    assert slots.take("a", Clock, until=None)
    took: list[bool] = []
    waiter = threading.Thread(target=lambda: took.append(slots.take("b", Clock, until=None)))
    waiter.start()
    time.sleep(0.2)
    assert took == []
    slots.done("a")
    waiter.join(timeout=5)
    assert took == [True]


def test_no_wait_when_no_holder_runs_in_this_call():
    slots = Slots(1, ["a", "b"], started={"a"})  # a is under way but not worked on in this call
    slots.enter("b")
    started = time.monotonic()
    assert not slots.take("b", Clock, until=None)
    assert time.monotonic() - started < 1


def test_a_failure_stops_the_roll():
    slots = Slots(1, ["a", "b"], started=set())
    slots.enter("a")
    slots.enter("b")
    assert slots.take("a", Clock, until=None)
    slots.failed("a")
    with pytest.raises(MachineError, match=r"not started: the roll stops at the first failure \(a failed\)"):
        slots.take("b", Clock, until=None)
