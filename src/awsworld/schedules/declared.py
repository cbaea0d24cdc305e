"""Schedules declared in code: ``@workflow(schedule=Schedule(...))`` and ``awsworld.schedule(workflow, ...)``.

Declaring records the schedule in this process (``DECLARED``); nothing is written anywhere. A deployment's
ticks bring the store in line with the declarations its host names (``store.declared``): the Lambda flow
function those of the modules ``AWSWORLD_MODULES`` names, ``awsworld dev MODULE...`` those of its modules, a
``WorkflowTestEnv(schedules=[...])`` those of the workflows it is given. A test process imports many modules,
so nothing is fired only because it was imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..world.schedules import ScheduleState, check_schedule_id
from .model import Schedule, declaration_hash


@dataclass(frozen=True)
class Declaration:
    schedule_id: str
    workflow_name: str
    module: str
    schedule: Schedule

    spec_hash: str = field(init=False)
    """The hash a record of this declaration holds (``ScheduleState.spec_hash``)."""

    def __post_init__(self) -> None:
        s = self.schedule
        object.__setattr__(self, "spec_hash", declaration_hash(self.workflow_name, s.spec(), s.input_text(),
                                                               s.overlap, s.catchup, s.window_seconds()))

    def state(self, now: datetime) -> ScheduleState:
        """The record a first sync of this declaration stores."""
        return self.schedule.state(self.schedule_id, self.workflow_name, now, source="code", module=self.module)


DECLARED: dict[str, Declaration] = {}
"""Every schedule declared in this process, by schedule id."""


CheckArguments = Callable[[tuple[Any, ...], dict[str, Any]], None]
"""``WorkflowDef.check_arguments``: the ``TypeError`` a start with these arguments raises."""


def declare(workflow_name: str, module: str, schedule: Schedule, check: CheckArguments | None = None) -> Declaration:
    """Record ``schedule`` for the workflow ``workflow_name`` (declared in ``module``). Declaring the same thing
    again (a module imported twice) is a no-op; a different schedule under a taken id is a ``ValueError``.
    ``check``: the workflow's argument check, applied to the schedule's arguments now (a ``TypeError`` naming the
    schedule), so arguments its runs cannot take never reach a tick."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"schedule= takes a Schedule(...) or a list of them, got {type(schedule).__name__}")
    schedule_id = schedule.id or workflow_name
    if check is not None:
        try:
            check(tuple(schedule.args), dict(schedule.kwargs))
        except TypeError as error:
            raise TypeError(f"schedule {schedule_id!r}: its arguments do not fit: {error}") from None
    try:
        check_schedule_id(schedule_id)
    except ValueError:
        raise ValueError(f"the workflow name {workflow_name!r} cannot name its schedule (1-120 characters of "
                         "letters, digits and _.:=+-): pass Schedule(id=...)") from None
    declaration = Declaration(schedule_id, workflow_name, module, schedule)
    existing = DECLARED.get(schedule_id)
    if existing is not None and (existing.workflow_name, existing.schedule) != (workflow_name, schedule):
        raise ValueError(f"two schedules are declared with the id {schedule_id!r} (on {existing.workflow_name} "
                         f"and {workflow_name}): give each its own Schedule(id=...)")
    DECLARED[schedule_id] = declaration
    return declaration


def declare_all(workflow_name: str, module: str, schedules: Schedule | Sequence[Schedule] | None,
                check: CheckArguments | None = None) -> None:
    """``@workflow(schedule=...)``: one ``Schedule``, several, or none."""
    if schedules is None:
        return
    for item in (schedules,) if isinstance(schedules, Schedule) else tuple(schedules):
        declare(workflow_name, module, item, check)


def schedule(workflow: Callable[..., Any], *schedules: Schedule) -> None:
    """Declare schedules on a ``@workflow`` apart from its definition (same as ``@workflow(schedule=...)``)."""
    definition = _definition(workflow)
    for item in schedules:
        declare(definition.name, definition.fn.__module__, item, definition.check_arguments)


def declared_in(modules: Iterable[str]) -> tuple[Declaration, ...]:
    """The declarations made by ``modules`` or their submodules (a deployment's ``AWSWORLD_MODULES``)."""
    names = list(modules)
    return tuple(d for d in DECLARED.values()
                 if any(d.module == name or d.module.startswith(f"{name}.") for name in names))


def declared_for(workflows: Sequence[Callable[..., Any] | str]) -> tuple[Declaration, ...]:
    """The declarations on these workflows (functions or registered names). A workflow none is declared on (a
    mistyped name, a schedule declared in a module not imported yet) is a ``ValueError`` naming the ones declared:
    asked to fire its schedules, a test environment would otherwise fire nothing and say nothing."""
    names = {w if isinstance(w, str) else _definition(w).name for w in workflows}
    found = tuple(d for d in DECLARED.values() if d.workflow_name in names)
    missing = sorted(names - {d.workflow_name for d in found})
    if missing:
        declared = sorted({d.workflow_name for d in DECLARED.values()})
        raise ValueError(f"no schedule is declared on {', '.join(map(repr, missing))} in this process, so nothing of "
                         f"it would fire (declared on: {', '.join(declared) or 'no workflow'}); declare one with "
                         "@workflow(schedule=Schedule(...)) or awsworld.schedule(workflow, Schedule(...)), in a module "
                         "imported before this")
    return found


def _definition(workflow: Callable[..., Any]) -> Any:
    """The ``WorkflowDef`` a ``@workflow`` carries (read by attribute: the registry's decorator imports this
    module, so this one does not import it back)."""
    definition = getattr(workflow, "__awsworld_workflow__", None)
    if definition is None:
        raise TypeError(f"{workflow!r} is not a @workflow")
    return definition
