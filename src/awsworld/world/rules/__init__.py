"""The rulebook: every decision the World contract asks of a write, made once, for every World.

For each event type a caller may write, a pure function over a typed view of the state just before the write
(``state.View``) accepts it (the events to append and each touched entity's state afterwards, with the checks its
commit must still find true), refuses it with the contract's error, or answers an idempotent no-op
(``book.decide``). When a commit finds a check failed, ``decision.refusals`` says which error that is, in the
contract's order, or that the state only moved (decide again). The AWS World turns a decision into its reads,
DynamoDB conditions and items; the in-memory World applies it to its records; neither restates a rule.

The modules, one job each: ``requests`` (what a request must be before any state is read), ``log`` (the in-band
fence, ``expect_seq``), ``runs``, ``steps`` (with waits), ``hooks`` (with their tokens and what a run's end does to
them), ``leases`` (who may start a running step again), ``at_most_once`` (an attempt found cut off is never started
again where it must not be), ``skips`` (an operator ending a wait early), ``streams`` (appends, and when a stream
ends for its readers), ``conditions`` (checks written once as data both Worlds evaluate), ``checks`` (what each of a
decision's checks means over the state a commit finds), ``state`` and ``decision`` (the types), ``book`` (the index,
and what each rule reads). Two decide over awsworld's own stores rather than an event: ``schedules`` (a schedule's
record and the per-tick claim) and ``limiters`` (limits across runs: pools, waiters, rate tokens).
"""

from .book import RULES, decide, decide_unit, reads
from .decision import Check, Decision, Failed, HookEnd, NewEvent, NewRun, Refusals, RunChange, refusal, refusals
from .state import EventRef, HookState, RunState, Slot, StepState, TokenState, View, WaitState

__all__ = [
    "RULES",
    "Check",
    "Decision",
    "EventRef",
    "Failed",
    "HookEnd",
    "HookState",
    "NewEvent",
    "NewRun",
    "Refusals",
    "RunChange",
    "RunState",
    "Slot",
    "StepState",
    "TokenState",
    "View",
    "WaitState",
    "decide",
    "decide_unit",
    "reads",
    "refusal",
    "refusals",
]
