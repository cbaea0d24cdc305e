"""DynamoDB key layout (docs/reference/storage.md): one partition per run, plus token, hook-id and dedup items."""

from __future__ import annotations

import hashlib

from ..world.cursors import HOOK_KEYS, STEP_KEYS
from ..world.events import EVENT_TYPES
from ..world.ids import SLOT_DIGITS
from .resources import PK, SK

Key = dict[str, str]

RUN_SK = "RUN"
ATTRS_SK = "ATTRS"
ATTRIBUTE_PREFIX = "a:"
LAYOUT_VERSION = 2
"""Written on every run head (``lv``): which item layout the run's partition uses (docs/reference/storage.md). A reader
that meets a version it does not know refuses the run instead of misreading it."""
EVENT_PREFIX = "EVT#"
STEP_PREFIX = STEP_KEYS  # a steps or hooks cursor holds the sort key it resumes after (world/cursors.py)
HOOK_PREFIX = HOOK_KEYS
WAIT_PREFIX = "WAIT#"
RESUME_PREFIX = "RESUME#"


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def run_key(run_id: str) -> Key:
    return {PK: run_pk(run_id), SK: RUN_SK}


def attrs_key(run_id: str) -> Key:
    return {PK: run_pk(run_id), SK: ATTRS_SK}


def event_sk(slot: int) -> str:
    return f"{EVENT_PREFIX}{slot:0{SLOT_DIGITS}d}"


def event_key(run_id: str, slot: int) -> Key:
    return {PK: run_pk(run_id), SK: event_sk(slot)}


def slot_of_event_sk(sk: str) -> int:
    return int(sk[len(EVENT_PREFIX):])


def step_key(run_id: str, step_id: str) -> Key:
    return {PK: run_pk(run_id), SK: f"{STEP_PREFIX}{step_id}"}


def hook_key(run_id: str, hook_id: str) -> Key:
    return {PK: run_pk(run_id), SK: f"{HOOK_PREFIX}{hook_id}"}


def wait_key(run_id: str, wait_id: str) -> Key:
    return {PK: run_pk(run_id), SK: f"{WAIT_PREFIX}{wait_id}"}


def resume_digest(resume_id: str) -> str:
    """A resume id as a fixed-size key part: ids come from request headers of any length and alphabet."""
    return hashlib.sha256(resume_id.encode("utf-8", "surrogatepass")).hexdigest()


def resume_marker_key(run_id: str, hook_id: str, resume_id: str) -> Key:
    """The marker a ``hook_received`` with a resume id puts in the same transaction (``attribute_not_exists``),
    so a repeat of the id on the hook is refused. It lives in the run's partition, as long as the run does."""
    return {PK: run_pk(run_id), SK: f"{RESUME_PREFIX}{hook_id}#{resume_digest(resume_id)}"}


RESUME_ONCE_PREFIX = "RESUMEONCE#"


def resume_once_key(resume_id: str) -> Key:
    """The marker of a ``resumeOnce`` resume id (``world/rules/hooks.py``): one item per id in the whole table,
    naming the hook that recorded it, put in that ``hook_received``'s transaction where it is absent or names the
    same hook. It carries the target run's item TTL (written + R + H: longer than any sender can still retry)."""
    return {PK: f"{RESUME_ONCE_PREFIX}{resume_digest(resume_id)}", SK: "RESUMEONCE"}


TOKEN_PREFIX = "TOKEN#"


def token_key(token: str) -> Key:
    return {PK: f"{TOKEN_PREFIX}{token}", SK: "TOKEN"}


def hook_pointer_key(hook_id: str) -> Key:
    """hooks.get(hook_id) has no run id: this item maps a hook id to its run."""
    return {PK: f"HOOKID#{hook_id}", SK: "HOOKID"}


def entity_key(run_id: str, event_type: str, correlation_id: str) -> Key:
    """The item of the entity an event (or an entity kind: "step", "hook", "wait") is about."""
    spec = EVENT_TYPES.get(event_type)
    kind = spec.entity if spec is not None else event_type
    if kind == "step":
        return step_key(run_id, correlation_id)
    if kind == "hook":
        return hook_key(run_id, correlation_id)
    if kind == "wait":
        return wait_key(run_id, correlation_id)
    raise ValueError(f"{event_type} has no entity")


# Queue dedup markers and stream indexes (see aws/queue/dedup.py and aws/streams/stream_store.py).
STREAM_PREFIX = "STREAM#"
SEGMENT_PREFIX = "SEG#"
SEGMENT_DIGITS = 12


def dedup_key(queue_name: str, idempotency_key: str) -> Key:
    return {PK: f"DEDUP#{queue_name}#{idempotency_key}", SK: "DEDUP"}


def stream_key(run_id: str, name: str) -> Key:
    return {PK: run_pk(run_id), SK: f"{STREAM_PREFIX}{name}"}


def segment_prefix(name: str) -> str:
    return f"{SEGMENT_PREFIX}{name}#"


def segment_sk(name: str, first_index: int) -> str:
    return f"{segment_prefix(name)}{first_index:0{SEGMENT_DIGITS}d}"
