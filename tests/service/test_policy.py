"""The check service's limits: per student, per hour, a bounded fair queue, the due date."""
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.service.policy import FairQueue, RateLimit, closed


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


def test_the_eleventh_check_in_an_hour_is_refused_with_the_time_of_the_next():
    clock = Clock()
    limit = RateLimit(10, clock=clock)
    for _ in range(10):
        assert limit.take("a") is None
        clock.now += 60
    assert limit.take("a") == 1_000_000.0 + 3600  # the first check leaves the window then
    assert limit.take("b") is None  # another student is not affected
    clock.now = 1_000_000.0 + 3600
    assert limit.take("a") is None


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.lists(st.floats(0, 4 * 3600, allow_nan=False), max_size=60))
def test_no_hour_holds_more_checks_than_allowed(per_hour, gaps):
    """Whatever the timing of the presses, the counted checks of any hour never exceed the limit, and a refusal
    names a time in the future when a check will be counted."""
    clock = Clock()
    limit, counted = RateLimit(per_hour, clock=clock), []
    for gap in gaps:
        clock.now += gap
        nxt = limit.take("s")
        if nxt is None:
            counted.append(clock.now)
        else:
            assert nxt > clock.now
    for start in counted:
        assert sum(1 for t in counted if start <= t < start + 3600) <= per_hour


@settings(max_examples=200, deadline=None)
@given(st.floats(1, 600), st.lists(st.tuples(st.floats(0, 1800, allow_nan=False), st.floats(0, 120, allow_nan=False)),
                                   max_size=60))
def test_no_hour_holds_more_grader_time_than_allowed_plus_one_check(budget, presses):
    """A student whose checks each hold the grader (up to the time limits) gets at most `budget` seconds of it
    in any hour, plus the one check that crossed the line; a refusal names a time in the future."""
    clock = Clock()
    limit, taken = RateLimit(1000, seconds_per_hour=budget, clock=clock), []
    for gap, seconds in presses:
        clock.now += gap
        nxt = limit.take("s")
        if nxt is None:
            taken.append((clock.now, seconds))
            limit.charge("s", seconds)
        else:
            assert nxt > clock.now
    for start, _ in taken:
        in_hour = [seconds for t, seconds in taken if start <= t < start + 3600]
        assert sum(in_hour) - max(in_hour) < budget + 1e-9


def test_grader_time_is_a_limit_of_its_own_and_says_when_it_frees():
    clock = Clock()
    limit = RateLimit(10, seconds_per_hour=100, clock=clock)
    assert limit.take("a") is None
    limit.charge("a", 60)
    clock.now += 600
    assert limit.take("a") is None
    limit.charge("a", 50)  # 110 s used within the hour: the next check waits for the first to leave it
    assert limit.take("a") == 1_000_000.0 + 3600 and limit.grader_seconds("a") == 110
    assert limit.take("b") is None
    clock.now = 1_000_000.0 + 3600
    assert limit.take("a") is None and limit.grader_seconds("a") == 50


def test_a_students_next_check_waits_until_the_taken_one_is_finished():
    """Found by a red-team pass: the 'being graded' test sat outside the queue's lock, so an upload begun while
    the last check waited and finished once it was taken was admitted: the grader-time bound became budget plus
    two checks.  The queue itself now refuses, in the same lock as the take."""
    queue = FairQueue(4)
    assert queue.put("a", 1) == 1
    assert queue.get(0) == ("a", 1) and queue.in_progress("a")
    assert queue.put("a", 2, admit=lambda: True) == FairQueue.IN_PROGRESS and len(queue) == 0
    assert queue.put("b", 3) == 1  # others are not held up
    queue.finished("a")
    assert not queue.in_progress("a") and queue.put("a", 4) == 2


def test_a_full_queue_refuses_and_a_waiting_student_keeps_their_place():
    queue = FairQueue(2)
    assert queue.put("a", 1) == 1 and queue.put("b", 2) == 2
    assert queue.put("c", 3) is None  # full: told so, nothing kept
    assert queue.put("a", 4) == 1 and len(queue) == 2  # a second press: the same place, the newer notebook
    assert queue.get(0) == ("a", 4) and queue.place("b") == 1 and queue.place("a") is None
    assert queue.get(0) == ("b", 2) and queue.get(0) is None


def test_a_rush_stays_bounded_and_everyone_is_answered_or_refused():
    """200 students press within a moment: the queue never holds more than its capacity; each is given a
    place or refused, and every queued job is served once."""
    queue, replies, served = FairQueue(16), {}, []

    def press(student):
        replies[student] = queue.put(student, student)

    def serve():
        while (job := queue.get(0.5)) is not None:
            served.append(job[0])
            assert len(queue) <= 16

    worker = threading.Thread(target=serve)
    worker.start()
    presses = [threading.Thread(target=press, args=(f"s{i}",)) for i in range(200)]
    for thread in presses:
        thread.start()
    for thread in presses:
        thread.join()
    worker.join()
    assert len(replies) == 200
    queued = {s for s, place in replies.items() if place is not None}
    assert sorted(served) == sorted(queued) and all(1 <= p <= 16 for p in replies.values() if p is not None)


@pytest.mark.parametrize("offset, allowed, expect", [(-1, False, True), (+1, False, False), (-1, True, False)])
def test_checks_close_at_the_due_date_unless_allowed(offset, allowed, expect):
    now = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)
    due = (now + timedelta(hours=offset)).replace(tzinfo=None)  # as nbgrader's gradebook stores it
    assert closed(due, allowed, now) is expect
    assert closed(None, False, now) is False


def test_only_a_check_that_enters_the_queue_counts_and_a_replaced_one_costs_nothing():
    clock = Clock()
    limit = RateLimit(1, clock=clock)
    queue = FairQueue(1)

    def admit(student):
        return lambda: limit.take(student) is None

    assert queue.put("b", "b's", admit("b")) == 1
    assert queue.put("a", "a's", admit("a")) is None  # full: refused with 503, nothing counted
    assert queue.get(timeout=0) == ("b", "b's")
    assert queue.put("a", "first", admit("a")) == 1  # counted: a's one check this hour
    assert queue.put("a", "second", admit("a")) == 1  # while it waits: replaced, not counted
    # the worker takes it between a press's "is a waiting?" and its put: refused while it is graded, then a new
    # check, counted against the hour
    assert queue.get(timeout=0) == ("a", "second")
    assert queue.put("a", "third", admit("a")) == FairQueue.IN_PROGRESS and len(queue) == 0
    queue.finished("a")
    assert queue.put("a", "third", admit("a")) == FairQueue.REFUSED and len(queue) == 0
    assert limit.take("a", count=False) is not None and limit.take("b", count=False) is not None


def test_an_upload_that_never_arrived_counts_even_past_the_limit():
    """Found by a red-team pass: a student at the hour's limit whose check waited could start uploads (to
    replace it) and leave them unfinished, holding an upload slot each time for nothing."""
    now = [1000.0]
    limit = RateLimit(2, clock=lambda: now[0])
    assert limit.take("c") is None and limit.take("c") is None
    first_free = limit.take("c", count=False)
    assert first_free == 1000.0 + 3600
    now[0] += 600
    limit.count("c")  # past the limit: counted all the same
    now[0] = first_free + 1  # the first two have left the hour; the uncounted upload has not
    assert limit.take("c", count=False) is None and limit.take("c") is None
    assert limit.take("c", count=False) == 1600.0 + 3600


def test_a_restart_counts_a_long_record_at_once():
    """Found by a red-team pass: each row of the record sorted its student's window again (48,000 rows of one
    student: 50 s before the service answered anything).  The rows arrive in any order; the window is right."""
    import random

    now = [100_000.0]
    limit = RateLimit(10, 300.0, clock=lambda: now[0])
    rows = [("mallory", now[0] - 3000 + k * 0.05, 0.001) for k in range(48_000)]
    rows += [("ann", now[0] - 3500, 1.0), ("ann", now[0] - 7200, 1.0)]  # the second is out of the hour
    random.Random(0).shuffle(rows)
    started = time.monotonic()
    limit.seed(rows)
    assert time.monotonic() - started < 5
    assert limit.take("mallory", count=False) == now[0] - 3000 + 3600  # the oldest row leaves first
    assert limit.grader_seconds("ann") == 1.0 and limit.take("ann") is None
