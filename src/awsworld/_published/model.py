"""What a deployment publishes about its workflows, and when a start may refuse a name because of it.

The code that consumes a World's queue (``awsworld dev``, the Lambda flow function) writes a ``Publication``
into the World (``world.published``, awsworld's extension, like ``world.schedules``): the workflow names its
registry holds and the modules that registered them. A ``Client`` without workflow code of its own reads them
once (one strongly consistent read, cached for the client's life) and refuses a start whose name no publication
holds, with ``WorkflowNotRegisteredError`` naming the modules and the nearest registered names. The flow's
delivery of a run whose workflow it lacks reads them too, and fails the run at once under the same rule
(``_worker/delivery.py``).

When: ``awsworld dev`` publishes before it takes its first delivery (``cli/dev.py``); the flow function publishes
from ``lambda_host/container.py``: with SnapStart (the template's default) while the version is initialised for its
snapshot, which is before the ``live`` alias points at it, so before it takes any delivery; without SnapStart at
its first cold start, once per execution environment (one ``PutItem``). Each consumer's publication is its own
item (dev's one item, replaced by each start of dev; a flow function's keyed by a digest of its names), kept
without expiry: a version rolled back to, or one still finishing a delivery while a deploy moves the alias,
keeps its names known.

The rule (``judge``), which never refuses a name a consumer may know:

- a name in **any** publication is known (an old version's, a new one's): the start goes ahead;
- with no publication at all (a stack from before this, a World nobody publishes into: ``LocalAWS``, the test
  environment) nothing is certain: the start goes ahead and the delivery decides;
- otherwise the name is certainly unknown only if the most recent publication was made **ahead** of its
  consumer's deliveries (dev's; a SnapStart version's). A flow function without SnapStart publishes at its first
  delivery, after the alias already sends it work, so its publication (ahead=False) lets names through but never
  refuses one: the run starts, and its delivery retries it for the unknown-workflow window before failing it.

A client refusing on a cached read reads once more first (dev may have restarted with another module, a deploy
may have published since), so a refusal costs two reads and a start one read per client, at most. A client of a
stack whose code runs ahead of the stack's deploy (a new workflow started before ``sam deploy`` published it) is
refused: start it once the deploy that adds it has finished.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..authoring.definitions import Registry, WorkflowNotRegisteredError
from ..world.protocol import World
from ..world.published import Publication

DEV = "dev"
"""The key of ``awsworld dev``'s publication (one per table: each start of dev replaces it)."""


def publication(registry: Registry, *, host: str, ahead: bool, now: datetime, key: str | None = None
                ) -> Publication:
    """What a consumer with ``registry`` publishes; ``key`` defaults to a digest of its names and modules."""
    workflows, modules = tuple(sorted(registry.workflows)), tuple(registry.modules())
    if key is None:
        digest = hashlib.sha256(json.dumps([workflows, modules]).encode()).hexdigest()
        key = f"flow-{digest[:16]}"
    return Publication(key, host, workflows, modules, now, ahead)


async def publish(world: World, registry: Registry, *, host: str, ahead: bool, key: str | None = None) -> bool:
    """Publish ``registry``'s names into ``world`` (False: the World keeps no publications)."""
    if world.published is None:
        return False
    await world.published.publish(publication(registry, host=host, ahead=ahead, now=world.clock.now(), key=key))
    return True


@dataclass(frozen=True)
class Verdict:
    """What the publications say of a name: ``known`` (some consumer registers it), or ``sure`` it is unknown
    (then ``newest`` says by whom and what it registers)."""

    known: bool
    sure: bool
    newest: Publication | None

    def error(self, name: str, *, named_by_starter: bool = True) -> WorkflowNotRegisteredError:
        """The refusal of ``name`` (only for a verdict that is ``sure``). ``named_by_starter`` False: whoever
        started the run did not choose the name (a schedule did), so "name a workflow it registers" is not theirs
        to do, and the hint leaves it out."""
        assert self.newest is not None
        newest = self.newest
        fix = "name a workflow it registers, or load" if named_by_starter else "load"
        return WorkflowNotRegisteredError(
            name, list(newest.modules), registered=newest.workflows, env_modules=None,
            where=f"by {newest.host}, which consumes this World's queue",
            hint=f"names published {newest.published_at.isoformat(timespec='seconds')}; {fix} the module that "
                 f"defines it there")


def judge(name: str, publications: Sequence[Publication]) -> Verdict:
    """The rule (see the module): known if any publication holds ``name``; certainly unknown if none does and
    the most recent one was published ahead of its consumer's deliveries; else unsure."""
    if not publications:
        return Verdict(known=False, sure=False, newest=None)
    newest = max(publications, key=lambda p: p.published_at)
    if any(name in p.workflows for p in publications):
        return Verdict(known=True, sure=False, newest=newest)
    return Verdict(known=False, sure=newest.ahead, newest=newest)


async def unknown_workflow_note(world: World, registry: Registry | None, name: str) -> str | None:
    """A note for a run listing filtered by ``name`` that found nothing, when ``name`` is certainly no workflow
    here (``registry`` lacks it, else the names the stack published do), with the nearest names; None when it may
    be one. Not a refusal: a renamed workflow's old runs are still listed by its old name. ``awsworld runs`` and
    the run viewer's list both say it (a typo listed nothing, as a workflow without runs does)."""
    from ..authoring.definitions import did_you_mean, nearest

    if registry is not None:
        registered: list[str] = list(registry.workflows)
    else:
        store = world.published
        verdict = judge(name, await store.read()) if store is not None else None
        if verdict is None or not verdict.sure or verdict.newest is None:
            return None
        registered = list(verdict.newest.workflows)
    if name in registered:
        return None
    return f"note: no workflow named {name!r} is registered here{did_you_mean(nearest(name, registered))}"


__all__ = ["DEV", "Verdict", "judge", "publication", "publish", "unknown_workflow_note"]
