"""What a divergence says: digests of step inputs, and calls written out for people (truncated).

A step call is checked against its log by name and by a digest of its serialized input (``inputDigest`` in the
``step_created`` event: 16 bytes of SHA-256 over the canonical JSON, base64url), so the flow can compare without
loading inputs. Logs written before digests existed skip that check.

The descriptions quote arguments, which may be user payloads: they go into the run's stored error and the
``awsworld replay`` report, each value truncated, and never into a log line. Each divergence also carries an
*outline*, the same sentence with every argument list written ``(…)``: what may be stored in plain text (a parked
run's mark is a run attribute, which payload encryption leaves readable: ``_engine.parking``).

A divergence says what differs, never why: new code is the usual cause, but a workflow that read something that
changes between replays (process state, the environment, a set's order) diverges on the same code.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import reprlib
from datetime import datetime

from ..authoring.errors import ReplayDivergenceError
from ..durable import json_data, serde
from ..world.events import Event
from .ops import Op, StepOp, WaitOp
from .parking import UNREADABLE
from .time_scale import recorded_factor

MAX_CALL_CHARS = 300
REPLAY_DIFFERS = "replaying this run did not make the calls its log records"
WHY_IT_DIFFERS = ("Either the workflow's code is not the code that recorded the run (revert it, or branch the change "
                  "with awsworld.patched()), or the workflow read something that changes between replays (the "
                  "clock, randomness, the environment, process state: read it in a step, or use awsworld.now() and "
                  "awsworld.random()). `awsworld replay` checks stored runs against new code before a deploy")
"""How a failed run's error frames its divergence: what differs, and the two causes (never only the first)."""
REPLAY_UNREADABLE = "replaying this run could not read a value its log records"
"""How it frames a recorded value the code cannot read any more (``unreadable``), whose note says what to change."""
REPLAY_UNBOUND = "replaying this run could not call its workflow with the input its log records"
"""How it frames a run's input that its workflow's parameters no longer take (``parameters``), whose note says
what to change."""
_ID = re.compile(r"^(step|wait|hook)_(\d+)")

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxfrozenset = _repr.maxdeque = 6
_repr.maxdict = 6
_repr.maxlevel = 3


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What ``json.dumps`` with these options builds on every call: made once (every step call takes a digest)."""


def input_digest(structure: object) -> str:
    """16 bytes of SHA-256 over the canonical JSON of a serialized step input (keys sorted), base64url."""
    text = _CANONICAL_JSON.encode(structure)
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:16]).rstrip(b"=").decode()


def op_index(op_id: str | None) -> tuple[str, int] | None:
    """``step_3`` -> ("step", 3); ``hook_2_<run>`` -> ("hook", 2): the kind and the run's call counter."""
    match = _ID.match(op_id or "")
    return (match.group(1), int(match.group(2))) if match else None


def call_order(op_id: str) -> tuple[int, str]:
    """A sort key putting a run's operations in the order its body called them (``step_2`` before ``step_10``;
    ids are ``<kind>_<counter>``, so their text order is not their call order)."""
    parsed = op_index(op_id)
    return (parsed[1], op_id) if parsed else (2**63, op_id)


def position(op_id: str | None) -> str:
    parsed = op_index(op_id)
    return f"{parsed[0]} {parsed[1]}" if parsed else str(op_id)


def short(name: str | None) -> str:
    return (name or "?").rsplit(".", 1)[-1]


def _truncate(text: str, limit: int = MAX_CALL_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def short_repr(value: object) -> str:
    return _truncate(_repr.repr(value))


def arguments(structure: object) -> str:
    """``('A-17', 42.5, note='x')`` from a serialized ``{"args": [...], "kwargs": {...}}``, each value truncated."""
    try:
        call = serde.loads_call(structure)
    except Exception:  # a class the reader cannot import, or not a call at all: show the stored JSON
        return "(" + _truncate(json.dumps(structure, default=str), MAX_CALL_CHARS - 2) + ")"
    return written(call)


def written(call: json_data.Call) -> str:
    """``('A-17', 42.5, note='x')``: a call's loaded arguments, each value truncated."""
    parts = [_repr.repr(a) for a in call.args] + [f"{k}={_repr.repr(v)}" for k, v in call.kwargs.items()]
    return _truncate("(" + ", ".join(parts) + ")")


def step_call(name: str, structure: object = None, *, known: bool = True, whole: bool = False) -> str:
    """``charge('A-17', 42.5)``, or ``charge(…)`` when the arguments are not known (or not to be shown);
    ``whole``: the step's registered name (``shop.charge(...)``), where the names are what differs."""
    return f"{name if whole else short(name)}{arguments(structure) if known else '(…)'}"


def code_call(op: Op, *, values: bool = True, whole: bool = False) -> str:
    """What the code did at an op, for a message (``values=False``: a step's arguments as ``(…)``; ``whole``: a
    step by its registered name)."""
    if isinstance(op, StepOp):
        return step_call(op.definition.name, op.input, known=values, whole=whole)
    if isinstance(op, WaitOp):
        return f"sleep until {op.resume_at.isoformat()}" + _duration(op.declared_at, op.resume_at)
    return f"create_hook(token={_repr.repr(op.token)})" if not op.is_webhook else "create_webhook()"


def log_call(event: Event, *, values: bool = True, whole: bool = False) -> str:
    """What the log holds at an event, for a message (a step's arguments only when the input was loaded, and
    ``values`` asks for them; ``whole``: a step by its registered name)."""
    data = event.event_data or {}
    kind = event.event_type
    if kind == "step_created":
        return step_call(str(data.get("stepName")), data.get("input"), known=values and "input" in data,
                         whole=whole)
    if kind == "wait_created":
        return f"sleep until {data.get('resumeAt')}"
    if kind in ("hook_created", "hook_conflict"):
        return ("create_webhook()" if data.get("isWebhook") else
                f"create_hook(token={_repr.repr(data.get('token'))})")
    return f"{kind} of {event.correlation_id}"


def _duration(start: datetime | None, end: datetime) -> str:
    if start is None:
        return ""
    return f" ({(end - start).total_seconds():g} s after the call)"


def divergence(change: str, where: str, event: Event | None, log: str, code: str, note: str = "", *,
               step_id: str | None = None, outline: tuple[str, str] | None = None) -> ReplayDivergenceError:
    """``outline``: ``log`` and ``code`` without argument values, when they hold any (see the module's doc)."""
    slot = event.slot if event is not None else None
    at = f"{where} (event {slot})" if slot is not None else where
    message = f"{at}: the log has {log}, the code {code}{note}"
    log_outline, code_outline = outline or (log, code)
    return ReplayDivergenceError(message, position=where, slot=slot, log=log, code=code, change=change,
                                 step_id=step_id, outline=f"{at}: the log has {log_outline}, the code "
                                                          f"{code_outline}{note}")


def calls(change: str, op: Op, event: Event, *, step_id: str | None = None) -> ReplayDivergenceError:
    """The log's call at ``event`` and the code's ``op`` at the same position differ (a step's name or
    arguments, a hook's token): both written out, and outlined without values. A step renamed is written with
    both registered names: a ``name=`` changed on the same function read as ``charge(...)`` against
    ``payment(...)``, the function still being ``charge``."""
    whole = change == "name"
    code, outline = f"called {code_call(op, whole=whole)}", f"called {code_call(op, values=False, whole=whole)}"
    if change == "arguments":
        outline += " with other arguments"
    return divergence(change, position(op.id), event, log_call(event, whole=whole), code, step_id=step_id,
                      outline=(log_call(event, values=False, whole=whole), outline))


def mismatch(event: Event, code_op: Op | None, code_done: bool) -> ReplayDivergenceError:
    """The log's event names an op the code did not declare (or declared as something else). What differs is
    said; why is not (a change of the code, or of something the workflow read: see the module's doc)."""
    where = position(event.correlation_id)
    created = event.event_type.endswith(("_created", "_conflict"))
    log = log_call(event) if created else f"{event.event_type} of {event.correlation_id}"
    log_outline = log_call(event, values=False) if created else log
    logged_step = event.correlation_id if event.event_type == "step_created" else None  # (its input, for the run)
    if code_op is not None:
        return divergence("kind", where, event, log, f"called {code_call(code_op)} there",
                          " (from this point on, the code's calls and the log's are not the same)",
                          step_id=logged_step,
                          outline=(log_outline, f"called {code_call(code_op, values=False)} there"))
    if code_done:
        return divergence("extra-event", where, event, log, "returned before making that call",
                          step_id=logged_step, outline=(log_outline, "returned before making that call"))
    return divergence("extra-event", where, event, log, "made no such call (it waits for something else here)",
                      step_id=logged_step,
                      outline=(log_outline, "made no such call (it waits for something else here)"))


UNREADABLE_NOTE = (" (a class the value names was changed, moved or removed since it was recorded: keep it able to "
                   "read what was recorded, say a default for a new field and the old name importable, until the "
                   "runs recorded with it end)")
"""What to change when the code cannot read a value its log recorded: the usual cause is an edit of a pydantic
model or dataclass while runs that stored it are in flight."""


def unreadable(where: str, event: Event | None, place: str, error: Exception) -> ReplayDivergenceError:
    """The log holds a value (a step's result, a hook's payload, the run's input) that the code cannot load now
    (``serde.SerializationError``): a divergence, like a changed call, rather than a delivery that fails forever
    or a run failed by an edit. The error's text may quote the value (pydantic's does), so the outline leaves it
    out."""
    return divergence(UNREADABLE, where, event, f"{place} recorded", f"cannot read it: {error}", UNREADABLE_NOTE,
                      outline=(f"{place} recorded", "cannot read it"))


UNDECODABLE_NOTE = (" (a codec that decoded the value when it was recorded and no longer does, changed or replaced "
                    "since: keep it able to decode what was recorded until the runs recorded with it end, "
                    "docs/how-to/codecs.md)")


def undecodable(diverged: ReplayDivergenceError, event: Event, place: str, error: Exception
                ) -> ReplayDivergenceError:
    """``diverged``, found after this replay's codec refused a value the log recorded (``place``, at ``event``):
    the refusal raised ``CodecError`` where the body awaits the value, so the body went another way than when it
    recorded the run, and the divergence, said alone, sends the reader to a ``patched()`` branch or to the call
    it names (``the code returned before making that call``). Said with the refusal first, as a value the code
    cannot read (``change`` ``value``); the error's text may quote the value, so the outline leaves it out."""
    slot = event.slot
    where = "the run's input" if event.event_type == "run_created" else position(event.correlation_id)
    first = f"{where} (event {slot}): the log has {place} recorded, its codec cannot decode it now"
    message = f"{first}: {error}{UNDECODABLE_NOTE}; the replay then diverged at {diverged}"
    outline = f"{first}{UNDECODABLE_NOTE}; the replay then diverged at {diverged.outline}"
    return ReplayDivergenceError(message, position=where, slot=slot,
                                 log=f"{place} recorded", code="cannot decode it", change=UNREADABLE,
                                 outline=outline)


PARAMETERS_NOTE = (" (the workflow's parameters changed since the run started: give a parameter added since a "
                   "default, and keep one removed (or take **kwargs), until the runs started with the old ones end)")
"""What to change when a run's recorded input no longer binds to its workflow's parameters."""


def parameters(event: Event, workflow: str, signature: str, error: TypeError, call: json_data.Call
               ) -> ReplayDivergenceError:
    """The run's recorded input does not bind to the workflow's parameters now (``error``, from binding it):
    replay calls the body with it, which raises at once, and that read as a body that returned before the log's
    first call. Said as what it is, the values outlined away."""
    code = f"takes {_truncate(short(workflow) + signature)}, which it does not fit: {error}"
    return divergence("parameters", "the run's input", event, f"the run's input {written(call)} recorded", code,
                      PARAMETERS_NOTE, outline=("the run's input recorded", code))


def wait_mismatch(event: Event, op: WaitOp, logged: datetime) -> ReplayDivergenceError:
    factor = recorded_factor(event.event_data)
    scaled = f" under time scale {factor:g}" if factor != 1 else ""  # (the code's duration, that much shorter)
    return divergence("duration", position(op.id), event,
                      f"sleep until {logged.isoformat()}" + _duration(op.declared_at, logged) + scaled,
                      f"called {code_call(op)}")
