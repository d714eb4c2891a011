"""The window of work in flight (``_k8s/window.py``, pure) and the admission that follows it
(``_k8s/flow.py``): how the limit answers the server's latency and refusals, and that work never
runs past it. Whether it keeps a real API server's answers quick is measured by
benchmarks/delete_machines.py (1000 Machines at concurrency 10, 100 and 1000)."""

from __future__ import annotations

import threading
import time

import pytest
from fake_api_client import make_api, ok, status

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.attempts import budget_refusal, overloaded
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.flow import Flow
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.retry import Failure
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.window import Window


def feed(window: Window, seconds: float, count: int, *, in_flight: int | None = None, start: float = 0.0, step: float = 0.01) -> float:
    """``count`` answers of ``seconds`` each, ``step`` apart from ``start``; the clock after them."""
    now = start
    for _answer in range(count):
        window.answered(seconds, in_flight=window.limit if in_flight is None else in_flight, now=now)
        now += step
    return now


def test_the_window_starts_small_and_never_leaves_its_bounds() -> None:
    assert Window(1000).limit == 16
    assert Window(5).limit == 5, "never more than asked"
    assert Window(1000, least=2, start=1).limit == 2
    window = Window(50)
    feed(window, 0.01, 5000)
    assert window.limit == 50, "steady answers take it to what was asked, no further"


def test_steady_answers_grow_the_window_in_a_few_hundred_answers() -> None:
    window = Window(1000)
    feed(window, 0.02, 300)
    assert 100 <= window.limit <= 1000


def test_it_grows_only_while_the_work_fills_half_of_it() -> None:
    window = Window(1000)
    feed(window, 0.02, 500, in_flight=3)
    assert window.limit == 16, "work waiting elsewhere says nothing of what the server could take"


def test_answers_that_slow_down_shrink_it_in_proportion_at_most_once_a_second() -> None:
    window = Window(1000, start=200)
    now = feed(window, 0.02, 400)  # the server's usual time: 20 ms
    before = window.limit
    now = feed(window, 0.2, 30, start=now, step=0.01)  # ten times slower: queueing
    once = window.limit
    assert before // 2 <= once < before, "the gradient never takes more than half at once"
    feed(window, 0.2, 30, start=now, step=0.01)
    assert window.limit == once, "within the cooldown"
    feed(window, 0.2, 30, start=now + 1.5, step=0.01)
    assert window.limit < once


def test_a_refusal_halves_it_once_for_a_burst() -> None:
    window = Window(1000, start=400)
    for index in range(50):  # one overload refuses many requests at once
        window.answered(0.01, in_flight=400, now=index * 0.001, refused=True)
    assert window.limit == 200
    window.answered(0.01, in_flight=400, now=2.0, refused=True)
    assert window.limit == 100
    assert window.refusals == 51


def test_it_comes_back_once_the_server_keeps_up_again() -> None:
    window = Window(1000, start=400)
    now = feed(window, 0.02, 300)
    for second in range(5):
        window.answered(1.0, in_flight=400, now=now + second * 1.1, refused=True)
    low = window.limit
    now = feed(window, 0.02, 3000, start=now + 10)
    assert window.limit > 2 * low, "one more per window's worth of answers, once the server has said where it stops"
    feed(window, 0.02, 600_000, start=now)
    assert window.limit == 1000


def test_quick_answers_just_after_a_drop_do_not_take_it_back() -> None:
    window = Window(1000, start=400)
    window.answered(0.02, in_flight=400, now=0.0)
    window.answered(0.02, in_flight=400, now=0.1, refused=True)
    assert window.limit == 200
    feed(window, 0.02, 500, start=0.2, step=0.001)  # the answers to what was sent before the refusal
    assert window.limit == 200, "nothing grows within the cooldown"
    feed(window, 0.02, 250, start=1.2, step=0.001)
    assert 200 < window.limit <= 202, "then one more per window's worth of answers, not a slow start again"


def test_idle_work_that_fills_the_window_lets_more_start() -> None:
    window = Window(1000, start=16)
    window.answered(0.01, in_flight=16, now=0.0)
    assert window.idle(in_flight=16, now=0.5) == 16, "the server answered just now"
    assert window.idle(in_flight=16, now=1.0) == 20
    assert window.idle(in_flight=16, now=1.2) == 20, "once per idle_after"
    assert window.idle(in_flight=3, now=5.0) == 20, "work that does not fill it needs no more"
    window.answered(0.01, in_flight=20, now=6.0, refused=True)
    assert window.idle(in_flight=20, now=6.5) == 10, "never right after a refusal"


def test_describe() -> None:
    window = Window(100)
    feed(window, 0.02, 10)
    assert window.describe().startswith("limit ") and "of 100" in window.describe()


# -- what counts as a refusal ------------------------------------------------------------------


def test_a_budgets_429_is_no_sign_of_overload_and_the_servers_own_is() -> None:
    budget = b'{"message": "Cannot evict pod as it would violate the pod\'s disruption budget.", "details": {"causes": [{"reason": "DisruptionBudget"}]}}'
    throttled = b'{"message": "Too many requests, please try again later.", "reason": "TooManyRequests"}'
    assert budget_refusal(budget) and not budget_refusal(throttled)
    assert not overloaded(Failure(429, "Too Many Requests"), budget)
    assert overloaded(Failure(429, "Too Many Requests"), throttled)
    assert overloaded(Failure(503, "Service Unavailable"), b"")
    assert overloaded(Failure(0, "no answer from https://kube within the read timeout of 60 s (timed out)"), None)
    assert not overloaded(Failure(0, "connection refused", sent=False), None)
    assert not overloaded(Failure(404, "Not Found"), b"")


def test_every_answer_of_the_run_feeds_its_flow_control() -> None:
    api, client, _clock = make_api()
    flow = api.fork().flow_control(100)
    assert api.flow_control(100) is flow, "one per run"
    client.script(ok({}), status(429, "Too many requests, please try again later.", Retry_After="1"), ok({}))
    api.fork().get("/api/v1/nodes/n1")
    api.get("/api/v1/nodes/n1")
    assert flow.window.answers == 3
    assert flow.window.refusals == 1


# -- admission -------------------------------------------------------------------------------------


def test_run_all_never_runs_more_than_the_window_and_answers_in_order() -> None:
    flow = Flow(Window(50, start=4), time.monotonic)
    running, most = [0], [0]
    lock = threading.Lock()

    def work(item: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return item * 2

    assert flow.run_all(range(40), work) == [item * 2 for item in range(40)]
    assert most[0] <= 4 and flow.peak <= 4, "no answer came: the window stayed where it started"
    assert flow.in_flight == 0


def test_run_all_lets_more_in_as_the_server_keeps_up() -> None:
    flow = Flow(Window(50, start=2), time.monotonic)

    def work(item: int) -> int:
        for _answer in range(5):
            flow.answered(0.01)
        time.sleep(0.01)
        return item

    assert flow.run_all(range(60), work) == list(range(60))
    assert flow.peak > 2


def test_run_all_cancelled_still_answers_every_item() -> None:
    flow = Flow(Window(10, start=1), time.monotonic)
    gate = threading.Event()

    def work(item: int) -> int:
        if item == 0:
            gate.wait(5)
        return item

    threading.Timer(0.3, gate.set).start()
    assert flow.run_all(range(3), work, cancelled=lambda: True) == [0, 1, 2]


@pytest.mark.parametrize("most", [1, 3])
def test_a_small_task_is_not_held_back(most: int) -> None:
    assert Flow(Window(most), time.monotonic).window.limit == most


# -- the requests under way ----------------------------------------------------------------------


def sender(flow: Flow, sent: list[int], lock: threading.Lock, cancelled=lambda: False) -> threading.Thread:
    def send() -> None:
        if flow.send(cancelled):
            with lock:
                sent.append(1)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def settle(check, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_requests_under_way_never_exceed_the_window_once_it_has_shrunk() -> None:
    flow = Flow(Window(1000, start=64), time.monotonic)
    sent: list[int] = []
    lock = threading.Lock()
    threads = [sender(flow, sent, lock) for _request in range(80)]
    assert settle(lambda: len(sent) == 64 and flow.waiting == 16)
    flow.answered(1.0, refused=True)  # the server refused one: the window halves, to 32
    assert flow.room() == 32
    time.sleep(0.3)
    assert len(sent) == 64 and flow.sending == 63, "none more goes until fewer than 32 are under way"
    for _answer in range(32):
        flow.answered(0.01)
    assert settle(lambda: len(sent) == 65), "the answers that take it below the window let one more go"
    assert flow.held == 16
    flow.answered(0.01)
    for thread in threads:
        thread.join(0.01)


def test_a_small_run_always_has_room_for_several_requests() -> None:
    flow = Flow(Window(1), time.monotonic)
    assert flow.room() == 16, "one Machine's drain and the run's feeds send several requests at once"
    for _request in range(16):
        assert flow.send()
    assert flow.sending == 16


def test_no_unit_starts_while_a_request_waits_for_room() -> None:
    flow = Flow(Window(100, start=16), time.monotonic)
    for _request in range(16):
        flow.send()
    sent: list[int] = []
    lock = threading.Lock()
    waiting = sender(flow, sent, lock)
    assert settle(lambda: flow.waiting == 1)
    started = threading.Event()
    threading.Thread(target=lambda: flow.admit() and started.set(), daemon=True).start()
    assert not started.wait(0.4), "a unit waits while the server's answers are awaited"
    flow.answered(0.01)
    assert settle(lambda: sent == [1]) and started.wait(2)
    waiting.join(1)


def test_a_request_waiting_for_room_stops_when_the_run_is_cancelled() -> None:
    flow = Flow(Window(10), time.monotonic)
    for _request in range(16):
        flow.send()
    assert flow.send(lambda: True) is False
    assert flow.sending == 16 and flow.waiting == 0


def test_a_request_that_raises_gives_its_room_back() -> None:
    api, client, _clock = make_api()
    flow = api.flow_control(100)
    client.script(ok({}))
    api.get("/api/v1/nodes/n1")
    assert flow.sending == 0 and flow.window.answers == 1
    with pytest.raises(AssertionError, match="unscripted request"):  # the exchange itself raised
        api.get("/api/v1/nodes/n2")
    assert flow.sending == 0 and flow.window.answers == 1, "its room is free, and no answer was told"
