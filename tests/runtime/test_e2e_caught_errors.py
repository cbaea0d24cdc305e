"""Errors the workflow catches by their type (issue 26 item 7), on the in-memory World and on LocalAWS (moto): a
failed step raises, where the workflow awaits it, a ``StepError`` that is also an instance of the step's own
exception type when that type can be rebuilt (a builtin, an importable class, its ``__init__`` never run), and a
plain ``StepError`` when it cannot (a class defined in a function, an exception group, a class that refuses to
be subclassed); the same type on every replay (the branch taken is recorded by a step, and a delivery after a
sleep replays the failure from the log); a failed child run's ``ChildWorkflowError`` likewise. What stays as it
was: the run's stored error of an uncaught failure is a ``StepError`` with the step's error as its cause."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from awsworld import ChildWorkflowError, StepError, WorkflowRunFailedError, sleep, step, workflow
from awsworld.authoring.rebuilt_errors import rebuild, rebuilt_type, recorded_type
from awsworld.client.replay import replay_run

from .conftest import BOTH, E2E

INITS: list[str] = []
"""Every ``Declined.__init__`` call: raised by the step, never by the rebuilding."""


class Declined(Exception):
    """A user's exception whose constructor wants other arguments than a message, and has a side effect."""

    def __init__(self, card: str, amount: int) -> None:
        INITS.append(card)
        super().__init__(f"card {card} declined for {amount}")
        self.card = card


class Picky(Exception):
    """Refuses to be subclassed: rebuilding it cannot work, so the workflow gets a plain StepError."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("no subclasses of Picky")


def _local_error() -> Exception:
    class Local(Exception):  # not importable by its qualified name (…<locals>.Local)
        pass

    return Local("from inside a function")


@step(name="caught.fail", max_retries=0)
async def fail(kind: str) -> None:
    if kind == "key":
        raise KeyError("missing")
    if kind == "file":
        raise FileNotFoundError(2, "No such file or directory", "/nowhere")
    if kind == "declined":
        raise Declined("4242", 30)
    if kind == "picky":
        raise Picky("picky")
    if kind == "local":
        raise _local_error()
    if kind == "group":
        raise ExceptionGroup("several", [ValueError("one"), KeyError("two")])
    raise AssertionError(kind)


@step(name="caught.note")
async def note(branch: str) -> str:
    return branch


@workflow(name="caught.catches")
async def catches(kind: str) -> dict[str, Any]:
    try:
        await fail(kind)
        return {}
    except KeyError as error:
        branch, caught = "KeyError", error
    except OSError as error:
        branch, caught = "OSError", error
    except Declined as error:
        branch, caught = "Declined", error
    except StepError as error:
        branch, caught = "StepError", error
    assert isinstance(caught, StepError)
    await note(branch)  # recorded: a replay that took another branch would diverge here
    await sleep("1s")  # a new delivery, which replays the failure from the log
    return {"branch": branch, "step_error": isinstance(caught, StepError), "error_type": caught.error_type,
            "qualified": caught.qualified_type, "message": caught.message, "str": str(caught),
            "stack": caught.stack or "", "class": type(caught).__name__, "has_card": hasattr(caught, "card")}


@pytest.mark.parametrize("e2e_backend", BOTH)
@pytest.mark.parametrize(("kind", "branch", "error_type", "message"), [
    ("key", "KeyError", "KeyError", "'missing'"),
    ("file", "OSError", "FileNotFoundError", "[Errno 2] No such file or directory: '/nowhere'"),
    ("declined", "Declined", "Declined", "card 4242 declined for 30"),
    ("picky", "StepError", "Picky", "picky"),
    ("local", "StepError", "Local", "from inside a function"),
    ("group", "StepError", "ExceptionGroup", "several (2 sub-exceptions)"),
])
async def test_a_failed_step_is_caught_by_its_own_type(e2e: E2E, kind: str, branch: str, error_type: str,
                                                       message: str) -> None:
    INITS.clear()
    run = await e2e.start(catches, kind)
    result = await run.result(timeout=60)
    assert result["branch"] == branch
    assert result["step_error"] and result["class"] == "StepError", "still a StepError, named as before"
    assert result["error_type"] == error_type and result["message"] == message
    assert result["str"] == f"step 'caught.fail' failed: {error_type}: {message}"
    assert "in fail" in result["stack"], "the step's traceback is kept"
    assert not result["has_card"], "only the type is rebuilt: the original's __init__ never ran"
    raised = ["4242"] if kind == "declined" else []
    assert raised == INITS, "Declined.__init__ ran once, in the step body: never when the error was rebuilt"
    steps = [e for e in await run.events() if e.event_type == "step_completed"]
    assert len(steps) == 1, "the branch's note step ran once and replayed without a divergence"
    assert (await replay_run(e2e.world, run.run_id)).ok, "replaying the stored log takes the same branch"


@workflow(name="caught.uncaught")
async def uncaught() -> None:
    await fail("key")


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_an_uncaught_rebuilt_error_fails_the_run_as_a_step_error_as_before(e2e: E2E) -> None:
    run = await e2e.start(uncaught)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=60)
    assert failed.value.error_type == "StepError"
    assert failed.value.details["type"] == "awsworld.authoring.errors.StepError"
    assert failed.value.details["cause"]["name"] == "KeyError"
    assert failed.value.code == "USER_ERROR"


@workflow(name="caught.child")
async def child(kind: str) -> None:
    if kind == "own":
        raise LookupError("the child's own")
    await fail("key")  # the child lets the step's failure through


@workflow(name="caught.parent")
async def parent(kind: str) -> dict[str, Any]:
    try:
        await child(kind)
        return {}
    except KeyError as error:
        branch, caught = "KeyError", error
    except LookupError as error:
        branch, caught = "LookupError", error
    assert isinstance(caught, ChildWorkflowError)
    await note(branch)
    await sleep("1s")
    return {"branch": branch, "error_type": caught.error_type, "status": caught.status, "str": str(caught)}


@pytest.mark.parametrize("e2e_backend", BOTH)
@pytest.mark.parametrize(("kind", "branch", "error_type"), [("own", "LookupError", "LookupError"),
                                                            ("step", "KeyError", "StepError")])
async def test_a_failed_child_is_caught_by_the_type_it_raised(e2e: E2E, kind: str, branch: str,
                                                              error_type: str) -> None:
    run = await e2e.start(parent, kind, run_id=f"caught-{kind}-{uuid.uuid4().hex[:8]}")
    result = await run.result(timeout=60)
    assert result["branch"] == branch and result["error_type"] == error_type and result["status"] == "failed"
    assert result["str"].startswith(f"child run {run.run_id}.step_1 (caught.child) failed: ")
    assert (await replay_run(e2e.world, run.run_id)).ok


# ----------------------------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize(("qualified", "name", "expected"), [
    ("KeyError", None, KeyError),
    (None, "KeyError", KeyError),
    ("json.decoder.JSONDecodeError", "JSONDecodeError", __import__("json").JSONDecodeError),
    (f"{__name__}.Declined", "Declined", Declined),
    ("SystemExit", None, None),  # not an Exception: would escape the workflow's `except Exception`
    ("asyncio.exceptions.CancelledError", None, None),
    ("ExceptionGroup", None, None),
    ("no_such_module_here.Error", None, None),
    (f"{__name__}.INITS", None, None),  # not a class
    ("os.__class__", None, None),  # dunders are never walked
    ("Declined", None, None),  # a bare name is looked up among the builtins only
])
def test_which_recorded_types_are_rebuilt(qualified: str | None, name: str | None, expected: type | None) -> None:
    assert recorded_type(qualified, name) is expected


def test_the_rebuilt_class_is_made_once_per_type_and_keeps_the_awsworld_name() -> None:
    kind = rebuilt_type(StepError, "KeyError")
    assert kind is rebuilt_type(StepError, "KeyError"), "cached: the same class on every replay"
    assert issubclass(kind, StepError) and issubclass(kind, KeyError) and kind is not StepError
    assert (kind.__name__, kind.__module__) == ("StepError", "awsworld.authoring.errors")
    assert rebuilt_type(StepError, "Exception") is StepError, "a StepError is an Exception already"
    assert rebuilt_type(StepError, "awsworld.authoring.errors.PollTimeoutError") is StepError
    made = rebuild(StepError, lambda k: k("'x'", step_name="s", error_type="KeyError"), "KeyError")
    assert isinstance(made, KeyError) and str(made) == "step 's' failed: KeyError: 'x'"
    assert made.args == ("step 's' failed: KeyError: 'x'",)


class Rejected(Exception):
    """A user's exception whose text is made from what its ``__init__`` set: the rebuilt instance never ran it."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self) -> str:
        return f"rejected with code {self.code}"

    def __repr__(self) -> str:
        return f"Rejected(code={self.code})"


@step(name="caught.reject", max_retries=0)
async def reject() -> None:
    raise Rejected(7)


@workflow(name="caught.rejects")
async def rejects() -> str:
    try:
        await reject()
    except Rejected as error:
        return f"{error!s} | {error!r}"
    return "?"


@workflow(name="caught.lets_through")
async def lets_through() -> None:
    await reject()


async def test_a_rebuilt_error_prints_as_the_awsworld_error_whatever_the_original_reads_in_its_repr(
        e2e: E2E) -> None:
    """Before, the rebuilt type took the original's ``__str__``/``__repr__`` (after StepError's own ``__str__``, its
    ``__repr__`` was the original's): ``repr`` of a caught step error, or of ``result()``'s error for a run failed
    with a ``WorldError`` type (whose repr reads ``message``), raised AttributeError, asyncio's own reporting too."""
    run = await e2e.start(rejects)
    assert await run.result(timeout=60) == ("step 'caught.reject' failed: Rejected: rejected with code 7 | "
                                            "StepError(\"step 'caught.reject' failed: Rejected: rejected with code "
                                            "7\")")
    failed_run = await e2e.start(lets_through)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await failed_run.result(timeout=60)
    assert isinstance(failed.value, Rejected)
    assert repr(failed.value) == f"WorkflowRunFailedError({str(failed.value)!r})"
    assert str(failed.value).startswith(
        f"run {failed_run.run_id} (caught.lets_through) failed: step 'caught.reject' failed")
