"""A World's answers built from the rulebook's states, written once for every World.

A step, hook or wait is stored as the rulebook's state (``world/rules/state.py``: the in-memory World keeps the
states themselves, the AWS World reads them from its items with ``aws/log/item_states.py``), its values as the
slots of the events that hold them. What a read shows of it at each ``resolve_data`` (``world/entities.py``'s
rules) and how its contract model is made from the state is the same for every World, so it is here: a World
gives the state and the values at the slots the ``*_value_slots`` functions name (the AWS World loads those from
S3 first; memory reads its records).

Answers are built with ``build`` from values already of the models' types: re-validating what a World built
itself would cost more than the rest of an in-memory write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast, get_origin

from pydantic import BaseModel

from ..entities import (
    HookRecord,
    HookStatus,
    ResolveData,
    Step,
    Wait,
    step_input_shown,
    step_lease_shown,
    stored_error,
    values_shown,
)
from ..rules.state import HookState, Slot, StepState, WaitState

M = TypeVar("M", bound=BaseModel)
ValueAt = Callable[[Slot], Any]
"""A World's read of the value held by the event at a slot (None for no slot)."""

_DEFAULTS: dict[type[BaseModel], tuple[dict[str, Any], dict[str, Callable[[], Any]]]] = {}
# BaseModel's own slots, set through their descriptors (what ``object.__setattr__`` finds by name, a third
# cheaper called directly: every answer sets four)
_set_dict, _set_fields_set, _set_extra, _set_private = (
    vars(BaseModel)[name].__set__
    for name in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))


def build(cls: type[M], **values: Any) -> M:
    """``cls.model_construct(**values)`` without the per-call work pydantic's version does to resolve defaults
    (it inspects each default factory on every call, which costs more than the rest of a write). The values must
    already be of the fields' types."""
    known = _DEFAULTS.get(cls)
    if known is None:
        plain = {n: f.default for n, f in cls.model_fields.items() if f.default_factory is None}
        # (the models' factories take no argument; a parameterized one, ``list[Event]``, is called as its origin:
        # calling the alias also tries to tag the new list with it, an AttributeError raised and caught each time)
        made = {n: cast(Callable[[], Any], get_origin(f.default_factory) or f.default_factory)
                for n, f in cls.model_fields.items() if f.default_factory is not None}
        known = _DEFAULTS[cls] = (plain, made)
    plain, made = known
    data = {**plain, **values}
    for name, factory in made.items():
        if name not in values:
            data[name] = factory()
    model = cls.__new__(cls)
    _set_dict(model, data)
    _set_fields_set(model, set(values))
    _set_extra(model, None)
    _set_private(model, None)
    return model


def step_value_slots(step: StepState, resolve: ResolveData) -> list[Slot]:
    """The slots whose values ``step_answer`` shows at ``resolve``: its error always, its output when values are
    shown, its input at ``"all"``."""
    slots: list[Slot] = [step.error]
    if values_shown(resolve):
        slots.append(step.output)
    if step_input_shown(resolve):
        slots.append(step.input)
    return slots


def step_answer(run_id: str, step: StepState, resolve: ResolveData, value_at: ValueAt) -> Step:
    return build(Step, run_id=run_id, step_id=step.step_id, step_name=step.step_name, status=step.status,
                 input=value_at(step.input) if step_input_shown(resolve) else None,
                 output=value_at(step.output) if values_shown(resolve) else None,
                 error=stored_error(value_at(step.error)), attempt=step.attempt, retry_after=step.retry_after,
                 created_at=step.created_at, updated_at=step.updated_at, started_at=step.started_at,
                 completed_at=step.completed_at, spec_version=step.spec_version,
                 lease_until=step.lease_until if step_lease_shown(step.status) else None)


def hook_value_slots(hook: HookState, resolve: ResolveData) -> list[Slot]:
    """The slot whose value ``hook_answer`` shows at ``resolve``: its metadata when values are shown."""
    return [hook.metadata] if values_shown(resolve) else []


def hook_answer(run_id: str, hook: HookState, status: HookStatus, resolve: ResolveData,
                value_at: ValueAt) -> HookRecord:
    """``status``: open, or closed once its run ended (``rules.hooks.hook_status``)."""
    return build(HookRecord, run_id=run_id, hook_id=hook.hook_id, token=hook.token, status=status,
                 metadata=value_at(hook.metadata) if values_shown(resolve) else None, is_webhook=hook.is_webhook,
                 payload_codec=hook.payload_codec, token_retention_until=hook.retention_until,
                 created_at=hook.created_at, updated_at=hook.updated_at, received_at=None,
                 spec_version=hook.spec_version)


def wait_answer(run_id: str, wait: WaitState) -> Wait:
    return build(Wait, run_id=run_id, wait_id=wait.wait_id, status=wait.status, resume_at=wait.resume_at,
                 created_at=wait.created_at, updated_at=wait.updated_at, completed_at=wait.completed_at,
                 spec_version=wait.spec_version)
