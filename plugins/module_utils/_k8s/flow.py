# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""The run's flow control: work admitted while the window (:mod:`window`, pure) allows it.

A task that works on many things at once (``machine_delete``'s Machines) asks
the transport for a :class:`Flow` (``api.flow_control(most)``) and runs each
unit of work through :meth:`Flow.run_all`: a unit starts only when the work in
flight is under the window's limit, on a pool whose threads are made as units
start, so threads and memory follow the window, not ``most``. Every answer of
the run's requests (``KubeApi.request``: its time, its status) is told to the
window, whichever connection sent it; watches, which stay open by design, are
not answers.

The window also bounds the run's **requests** under way (:meth:`Flow.send`),
never below ``REQUESTS_AT_LEAST``. A unit's load comes long after it starts (a
Machine's deletion sends its requests over the seconds its drain and
termination take), so the window can let more units start than the server can
answer before the first slow answer says so; once it has shrunk, the requests of
the units already started wait here, in the client, instead of in the server's
queues (where they time out, are refused and are sent again), and no new unit
starts while any request waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.window import Window

Item = TypeVar("Item")

# The requests under way a run may always have, whatever the window (one Machine's drain and the run's
# shared feeds send several at once): the gate only binds on a run the server has made shrink below it.
REQUESTS_AT_LEAST = 16


class Flow:
    """The window of one run, the work in flight, and the admission of more."""

    def __init__(self, window: Window, clock: Callable[[], float]):
        self.window = window
        self._clock = clock
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # units waiting to start
        self._room = threading.Condition(lock)  # requests waiting to be sent
        self.in_flight = 0
        # The most units ever in flight at once (what memory and threads followed).
        self.peak = 0
        self.sending = 0  # requests under way
        self.waiting = 0  # requests waiting for room
        self.held = 0  # requests that had to wait, in all

    def room(self) -> int:
        """How many requests may be under way now."""
        return max(REQUESTS_AT_LEAST, self.window.limit)

    def send(self, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Wait until one more request may be sent (fewer under way than :meth:`room`) and count it under way;
        False, without counting it, when ``cancelled()`` first. Its answer is :meth:`answered`."""
        with self._room:
            if self.sending >= self.room():
                self.waiting += 1
                self.held += 1
                try:
                    while self.sending >= self.room():
                        if cancelled():
                            return False
                        self._room.wait(timeout=0.25)
                finally:
                    self.waiting -= 1
            self.sending += 1
            return True

    def answered(self, seconds: float, *, refused: bool = False) -> None:
        """The answer to a request :meth:`send` counted (``refused``: too busy, or none in time): the request is
        no longer under way, the window follows the answer, and may admit more."""
        with self._cond:
            self.sending = max(0, self.sending - 1)
            before = self.window.limit
            after = self.window.answered(seconds, in_flight=self.in_flight, now=self._clock(), refused=refused)
            if self.waiting:
                self._room.notify(max(1, after - before + 1))
            if after > before:
                self._cond.notify_all()

    def release(self) -> None:
        """A request counted by :meth:`send` ended without an answer to tell (the exchange raised): its room is free."""
        with self._room:
            self.sending = max(0, self.sending - 1)
            self._room.notify()

    def admit(self, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Wait until one more unit may start (fewer in flight than the window's limit, and no request waiting
        for room), and count it in flight; False when ``cancelled()`` first."""
        with self._cond:
            while self.in_flight >= self.window.limit or self.waiting:
                if cancelled():
                    return False
                if not self._cond.wait(timeout=0.25):
                    self.window.idle(in_flight=self.in_flight, now=self._clock())
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return True

    def done(self, _future: Any = None) -> None:
        """A unit of work ended: one more may start."""
        with self._cond:
            self.in_flight -= 1
            self._cond.notify_all()

    def run_all(self, items: Iterable[Item], work: Callable[[Item], Any], cancelled: Callable[[], bool] = lambda: False) -> list[Any]:
        """``work(item)`` for each item, in order of the items, each started once the window admits it;
        their answers in the items' order. A unit not started because the run was cancelled is run
        anyway (it finds the run cancelled at its first request and says so): every item has an answer."""
        futures: list[Future] = []
        with ThreadPoolExecutor(max_workers=self.window.most) as pool:
            for item in items:
                admitted = self.admit(cancelled)
                future = pool.submit(work, item)
                if admitted:
                    future.add_done_callback(self.done)
                futures.append(future)
            return [future.result() for future in futures]

    def summary(self) -> dict:
        """What the flow control did, for a task's result (machine_delete's ``flow``)."""
        with self._cond:
            return {
                "concurrency": self.window.most,
                "limit": self.window.limit,
                "peak": self.peak,
                "answers": self.window.answers,
                "refused": self.window.refusals,
                "requests_held": self.held,
            }
