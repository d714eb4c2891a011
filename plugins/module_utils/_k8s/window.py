# Copyright: lifecycle.machine contributors
# Apache License 2.0 (see LICENSE)
"""How much work a run keeps in flight, from what the API server answers (pure).

A task asked to work on many things at once (``machine_delete`` at a
concurrency of 1000) must not send the API server more than it can answer:
past that point more work in flight only queues in the server's Priority and
Fairness queues (longer answers), then is refused (429 Too Many Requests), and
everything takes longer, memory and threads growing with it. So the work in
flight is bounded by a window that follows the server's answers, as a TCP
sender's window follows the network's:

- **a refusal** (429 that no PodDisruptionBudget gave, a timed-out answer) halves
  the window, at most once per ``cooldown`` (one overload refuses many requests
  at once; one halving answers them all);
- **latency**: each answer's time feeds a short average (``short_weight``) and
  a long one (``long_weight``), which is the server's time when it keeps up.
  While the short one stays within ``tolerance`` times the long one the window
  grows: by ``growth`` times its square root per answer until the first drop
  (so a few hundred answers take it from 10 to 100), then by one per window's
  worth of answers, and not at all within ``cooldown`` of a drop - a unit's load
  comes long after it starts, and quick answers to what was sent before a drop
  must not take the window straight back to where the server refused it (a
  TCP sender's slow start and congestion avoidance); when answers take longer than that - the server is
  queueing - the window shrinks in proportion (the gradient ``tolerance * long /
  short``, never below half); the long average follows a lasting change slowly,
  and is pulled down when it has run away from the short one;
- the window grows only while the work fills half of it (work that waits on
  something else, a Pod's grace period, says nothing of the server), and it
  never leaves ``[least, most]``: ``most`` is what the user asked for;
- work that fills the window and sends nothing (every unit waiting on a hook,
  say) leaves the server idle: after ``idle_after`` seconds without an answer
  the window grows by its square root, once per ``idle_after``, so that work
  held elsewhere never keeps the rest from starting.

This is the gradient limit of Netflix's concurrency-limits, and what API
Priority and Fairness does on the server's side (a bounded number of seats, a
queue, 429 beyond); client-go's token bucket is a fixed rate, which this
replaces with the server's own word. Nothing here reads a clock or a lock: the
caller (``flow.py``) feeds it answers and in-flight counts and asks the limit.
"""

from __future__ import annotations

import math


class Window:
    """The adaptive limit of work in flight (see the module's text)."""

    def __init__(
        self,
        most: int,
        *,
        least: int = 1,
        start: int = 16,
        tolerance: float = 2.0,
        short_weight: float = 0.1,
        long_weight: float = 0.005,
        growth: float = 0.2,
        cooldown: float = 1.0,
        idle_after: float = 1.0,
    ):
        self.most = max(1, int(most))
        self.least = max(1, min(int(least), self.most))
        self.estimate = float(max(self.least, min(start, self.most)))
        self.tolerance = tolerance
        self.short_weight = short_weight
        self.long_weight = long_weight
        self.growth = growth
        self.cooldown = cooldown
        self.idle_after = idle_after
        self.last_heard: float | None = None
        self.short: float | None = None
        self.long: float | None = None
        self.last_drop: float | None = None
        self.answers = 0
        self.refusals = 0

    @property
    def limit(self) -> int:
        """How much work may be in flight now (whole units, within ``[least, most]``)."""
        return max(self.least, min(self.most, int(self.estimate)))

    def answered(self, seconds: float, *, in_flight: int, now: float, refused: bool = False) -> int:
        """An answer that took ``seconds`` (``refused``: the server said it was too busy, or no answer came in
        time), with ``in_flight`` units of work under way, at ``now`` (any clock, seconds): the new limit."""
        self.answers += 1
        self.last_heard = now
        if refused:
            self.refusals += 1
            self._drop(0.5, now)
            return self.limit
        seconds = max(seconds, 1e-4)
        if self.short is None or self.long is None:
            self.short = self.long = seconds
            return self.limit
        self.short += self.short_weight * (seconds - self.short)
        self.long += self.long_weight * (seconds - self.long)
        if self.long > 2 * self.short:
            # The long average ran away above answers that are quick again (a past overload): come back down.
            self.long = 0.95 * self.long + 0.05 * self.short
        gradient = max(0.5, min(1.0, self.tolerance * self.long / self.short))
        if gradient < 1.0:
            self._drop(gradient, now)
        elif in_flight * 2 >= self.limit and not self._cooling(now):
            # Once the server has shown where it stops keeping up: one more per window's worth of answers.
            step = self.growth * math.sqrt(self.estimate) if self.last_drop is None else 1.0 / self.estimate
            self.estimate = min(float(self.most), self.estimate + step)
        return self.limit

    def _cooling(self, now: float) -> bool:
        """Within ``cooldown`` of the last drop: the answers to what was sent before it say nothing new."""
        return self.last_drop is not None and now - self.last_drop < self.cooldown

    def idle(self, *, in_flight: int, now: float) -> int:
        """Work fills the window (``in_flight``) and waits to start, at ``now``: when the server has
        answered nothing for ``idle_after`` seconds (nor refused anything for ``cooldown``), the window
        grows by its square root; the new limit."""
        quiet = self.last_heard is None or now - self.last_heard >= self.idle_after
        if in_flight >= self.limit and quiet and not self._cooling(now):
            self.estimate = min(float(self.most), self.estimate + math.sqrt(self.estimate))
            self.last_heard = now  # once per idle_after
        return self.limit

    def _drop(self, factor: float, now: float) -> None:
        if self._cooling(now):
            return
        self.last_drop = now
        self.estimate = max(float(self.least), self.estimate * factor)

    def describe(self) -> str:
        """The window's state, for a result or a log line."""
        short = f"{self.short * 1000:.0f} ms" if self.short is not None else "-"
        long = f"{self.long * 1000:.0f} ms" if self.long is not None else "-"
        return f"limit {self.limit} of {self.most} (answers {short}, usually {long}; {self.refusals} refused of {self.answers})"
