# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""What every ``client.KubeApi`` of one run shares - the task's own, its forks (one per task, one per
Machine of a task) and its connections to other clusters: the clock deadlines are measured on, the
retry policy, the cancellation (and the open watch streams it cuts), the run's connections to other
clusters by name, and the run's caches (:mod:`cache`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Caches
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import Cancelled
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.http import cut
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import RetryPolicy


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
