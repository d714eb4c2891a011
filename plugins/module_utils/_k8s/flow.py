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
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.window import Window

Item = TypeVar("Item")


class Flow:
    """The window of one run, the work in flight, and the admission of more."""

    def __init__(self, window: Window, clock: Callable[[], float]):
        self.window = window
        self._clock = clock
        self._cond = threading.Condition()
        self.in_flight = 0
        # The most units ever in flight at once (what memory and threads followed).
        self.peak = 0

    def answered(self, seconds: float, *, refused: bool = False) -> None:
        """One answer of the server's (``refused``: too busy, or none in time): the window follows it, and may admit more."""
        with self._cond:
            before = self.window.limit
            after = self.window.answered(seconds, in_flight=self.in_flight, now=self._clock(), refused=refused)
            if after > before:
                self._cond.notify_all()

    def admit(self, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Wait until one more unit may start, and count it in flight; False when ``cancelled()`` first."""
        with self._cond:
            while self.in_flight >= self.window.limit:
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

    def describe(self) -> str:
        with self._cond:
            return f"{self.window.describe()}; at most {self.peak} at once"
