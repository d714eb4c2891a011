# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What every ``client.KubeApi`` of one run shares - the task's own, its forks (one per task, one per
Machine of a task) and its connections to other clusters: the clock deadlines are measured on, the
retry policy, the cancellation (and the open watch streams it cuts), the run's connections to other
clusters by name, the run's caches (:mod:`cache`) and its flow control (:mod:`flow`), which hears
every answer of the run's requests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import overloaded
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Caches
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.flow import Flow
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.http import cut
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import Failure, RetryPolicy
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.window import Window


class Session:
    """One run's shared state (see the module's text)."""

    def __init__(self, clock: Callable[[], float], policy: RetryPolicy):
        self.clock = clock
        self.policy = policy
        self.cancelled = threading.Event()
        self._streams: set[Any] = set()
        self._streams_lock = threading.Lock()
        # The run's connections to other clusters, made once and shared by every fork.
        self.others: dict[str, Any] = {}
        self.others_lock = threading.Lock()
        self.caches = Caches()
        # The run's flow control, when a task asked for one (KubeApi.flow_control): every answer is told to it.
        self.flow: Flow | None = None

    def flow_control(self, most: int) -> Flow:
        """The run's flow control (:mod:`flow`): at most ``most`` units of work in flight, fewer while the
        API server's answers say it is not keeping up; made once per run, every answer from now on feeds it."""
        with self.others_lock:
            if self.flow is None or self.flow.window.most != max(1, most):
                self.flow = Flow(Window(most), self.clock)
            return self.flow

    def timed(self, exchange: Callable[..., tuple[Failure | None, Any, bool]], *args: Any, **kwargs: Any) -> tuple[Failure | None, Any, bool]:
        """One HTTP exchange (``exchange(*args, **kwargs)``: failure, data, answered), sent once the run's flow
        control has room for it (:meth:`flow.Flow.send`), its time and whether it says the server is overloaded
        told to the flow control."""
        flow = self.flow
        if flow is not None and not flow.send(self.cancelled.is_set):
            raise Cancelled("the run was cancelled")
        sent = self.clock()
        try:
            failure, data, answered = exchange(*args, **kwargs)
        except BaseException:
            if flow is not None:
                flow.release()
            raise
        if flow is not None:
            flow.answered(self.clock() - sent, refused=failure is not None and overloaded(failure, data))
        return failure, data, answered

    def cancel(self) -> None:
        """Send no request from now on, and cut every open watch so that nothing waits on one."""
        self.cancelled.set()
        with self._streams_lock:
            streams = list(self._streams)
        for response in streams:
            cut(response)

    def opened(self, response: Any) -> None:
        """A watch's stream is being read (cut at once when the run is cancelled already)."""
        with self._streams_lock:
            self._streams.add(response)
        if self.cancelled.is_set():
            cut(response)

    def closed(self, response: Any) -> None:
        with self._streams_lock:
            self._streams.discard(response)

    def sleep(self, seconds: float) -> None:
        """Pause, but wake up (and raise Cancelled) as soon as the run is cancelled."""
        if self.cancelled.wait(max(0.0, seconds)):
            raise Cancelled("the run was cancelled")
