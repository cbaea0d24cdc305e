import asyncio
from collections.abc import Awaitable, Callable

import pytest

from awsworld import FatalError, RetryableError, RetryPolicy, StepError, WorkflowRunFailedError, step, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.world import Step, StructuredError

pytestmark = pytest.mark.asyncio

# Partner APIs are calls to other services; these stand-ins fail on demand.
SOLD_OUT = {"convertible"}
UNREACHABLE = {"Hotel Overbooked"}
NO_REFUNDS = {"Hotel Grumpy"}  # takes bookings, refuses to cancel them
PATIENT = RetryPolicy(max_attempts=3, initial_delay="10s", backoff=2)
UNDO = RetryPolicy(max_attempts=10, initial_delay="5s", backoff=2, max_delay="10m")  # must not give up early


@step(name="patterns.book_flight", retry=PATIENT)
async def book_flight(trip: str, flight: str) -> str:
    return f"flight:{trip}:{flight}"


@step(name="patterns.book_hotel", retry=PATIENT)
async def book_hotel(trip: str, hotel: str) -> str:
    if hotel in UNREACHABLE:
        raise RetryableError(f"{hotel} did not answer")
    return f"hotel:{trip}:{hotel}"


@step(name="patterns.book_car", retry=PATIENT)
async def book_car(trip: str, car: str) -> str:
    if car in SOLD_OUT:
        raise FatalError(f"no {car} left")  # not retried
    return f"car:{trip}:{car}"


@step(name="patterns.cancel_flight", retry=UNDO)
async def cancel_flight(booking: str) -> None: ...


@step(name="patterns.cancel_hotel", retry=UNDO)
async def cancel_hotel(booking: str) -> None:
    if booking.split(":")[-1] in NO_REFUNDS:
        raise RuntimeError("cancellation refused")


Undo = list[tuple[Callable[[str], Awaitable[None]], str]]  # (compensation, booking), in booking order


@workflow(name="patterns.book_trip")
async def book_trip(trip: str, flight: str, hotel: str, car: str, undo_at_once: bool = False) -> list[str]:
    undo: Undo = []
    try:
        booked = [await book_flight(trip, flight)]
        undo.append((cancel_flight, booked[-1]))
        booked.append(await book_hotel(trip, hotel))
        undo.append((cancel_hotel, booked[-1]))
        booked.append(await book_car(trip, car))  # the last one needs no compensation
        return booked
    except Exception as failure:  # a step failed for good (or anything else): undo what is done
        not_undone = await (compensate_at_once(undo) if undo_at_once else compensate(undo))
        if not_undone:  # for a person to undo by hand: the run's error names each
            raise RuntimeError(f"{failure}; not undone: {', '.join(not_undone)}") from failure
        raise


async def compensate(undo: Undo) -> list[str]:
    """Newest first, one at a time; what could not be undone."""
    not_undone = []
    for cancel, booking in reversed(undo):
        try:
            await cancel(booking)
        except StepError as error:  # its retries ran out too: undo the others all the same, and say so
            not_undone.append(f"{booking} ({error.error_type}: {error.message})")
    return not_undone


async def compensate_at_once(undo: Undo) -> list[str]:
    """All at once. return_exceptions=True: without it, the first that fails for good ends the run and the
    others, running or not started yet, are cancelled with it."""
    outcomes = await asyncio.gather(*(cancel(booking) for cancel, booking in undo), return_exceptions=True)
    return [f"{booking} ({outcome.error_type}: {outcome.message})"
            for (_, booking), outcome in zip(undo, outcomes, strict=True) if isinstance(outcome, StepError)]


def error_name(step: Step) -> str | None:
    """The failed step's exception name (a step of another runtime keeps its error as bytes: no name)."""
    return step.error.name if isinstance(step.error, StructuredError) else None


async def test_a_sold_out_car_cancels_the_hotel_then_the_flight(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(book_trip, "T1", "LH123", "Hotel Ritz", "convertible")

    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result()
    assert failed.value.error_type == "StepError" and "no convertible left" in str(failed.value)
    steps = [(s.step_name, s.status, s.attempt, error_name(s)) for s in await run.steps()]
    assert steps == [("patterns.book_flight", "completed", 1, None),
                     ("patterns.book_hotel", "completed", 1, None),
                     ("patterns.book_car", "failed", 1, "FatalError"),
                     ("patterns.cancel_hotel", "completed", 1, None),
                     ("patterns.cancel_flight", "completed", 1, None)]


async def test_an_unreachable_hotel_cancels_the_flight_after_its_retries(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(book_trip, "T2", "LH123", "Hotel Overbooked", "compact")

    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result()
    assert failed.value.error_type == "StepError" and "Hotel Overbooked did not answer" in str(failed.value)
    steps = [(s.step_name, s.status, s.attempt, error_name(s)) for s in await run.steps()]
    assert steps == [("patterns.book_flight", "completed", 1, None),
                     ("patterns.book_hotel", "failed", 3, "RetryableError"),  # 10 s and 20 s apart: skipped
                     ("patterns.cancel_flight", "completed", 1, None)]


async def test_a_compensation_that_fails_for_good_leaves_the_others_done_and_names_itself(
        awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(book_trip, "T3", "LH123", "Hotel Grumpy", "convertible")

    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result()
    assert str(failed.value).endswith("failed: step 'patterns.book_car' failed: FatalError: no convertible left; "
                                      "not undone: hotel:T3:Hotel Grumpy (RuntimeError: cancellation refused)")
    steps = [(s.step_name, s.status, s.attempt) for s in await run.steps()]
    assert steps == [("patterns.book_flight", "completed", 1),
                     ("patterns.book_hotel", "completed", 1),
                     ("patterns.book_car", "failed", 1),
                     ("patterns.cancel_hotel", "failed", 10),  # its patient policy spent (skipped: virtual time)
                     ("patterns.cancel_flight", "completed", 1)]  # undone all the same


async def test_compensations_at_once_all_run_though_one_fails(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(book_trip, "T4", "LH123", "Hotel Grumpy", "convertible", True)

    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result()
    assert str(failed.value).endswith("not undone: hotel:T4:Hotel Grumpy (RuntimeError: cancellation refused)")
    steps = {(s.step_name, s.status, s.attempt) for s in await run.steps()}  # (at once: in no set order)
    assert {("patterns.cancel_hotel", "failed", 10), ("patterns.cancel_flight", "completed", 1)} <= steps
