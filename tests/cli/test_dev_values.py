"""A model edited under ``awsworld dev`` while runs that stored it sleep: ``dev`` as a process, the CLI as processes.

Two runs store a ``Quote`` (a pydantic model) and sleep for a day; the model gains a required field while dev runs.
The runs keep the code they started on, and that code's values are of its own classes: the first, skipped, finishes
on it (before, the class path resolved in the edited module, every delivery failed with a ``SerializationError``
and the run never ended, while ``describe`` said it waited on a sleep that was due). dev restarts: the second run's
code is gone, so it is replayed against the edited model, which cannot read the stored quote: it is parked with a
line naming the value and what to change (before: moved, then every delivery failed). The field given a default,
the reload replays it, it resumes and finishes. ``describe`` shows the retention the runs were started with.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_cli import Runner
from .test_dev_reload import WatchedDev, until

PRICED = '''
from datetime import timedelta
from decimal import Decimal

from pydantic import BaseModel

from awsworld import sleep, step, workflow


class Quote(BaseModel):
    sku: str
    price: Decimal


@step
async def quote(sku: str) -> Quote:
    return Quote(sku=sku, price=Decimal("9.90"))


@workflow(retention="36h")
async def order(sku: str) -> str:
    found = await quote(sku)
    await sleep(timedelta(days=1))
    return f"{found.sku} costs {found.price}"
'''
FIELD = "    price: Decimal\n"
REQUIRED = "    price: Decimal\n    currency: str\n"
DEFAULTED = "    price: Decimal\n    currency: str = \"EUR\"\n"


@pytest.fixture
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    started = Runner(tmp_path_factory.mktemp("runner"))
    yield started
    started.close()


def _sleeping(dev: WatchedDev, sku: str) -> str:
    started = dev("start", "pricedev.order", json.dumps([sku]))
    assert started.code == 0, started
    run_id = started.out.strip()
    until(lambda: dev("describe", run_id, "--json"),
          lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["sleep"])
    return run_id


def test_a_run_keeps_reading_its_own_model_after_an_edit_and_one_moved_to_the_edit_is_parked_naming_the_value(
        tmp_path: Path, runner: Runner) -> None:
    source = tmp_path / "src" / "pricedev.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(PRICED))
    state = tmp_path / "state"

    first = WatchedDev(tmp_path, state, [runner], module="pricedev")
    try:
        kept, moved = _sleeping(first, "kettle"), _sleeping(first, "mug")
        mark_at = len(first.lines)
        source.write_text(source.read_text().replace(FIELD, REQUIRED))
        first.wait_for(r"^reloaded pricedev: .*; 2 on dev-[0-9a-f]{10}, whose code is kept$", mark_at)
        assert first("skip", kept).code == 0
        finished = first("result", kept, "--wait", "30")
        assert finished.code == 0 and json.loads(finished.out.splitlines()[-1]) == "kettle costs 9.90", finished
        # The retention the run was started with (before: shown nowhere but in its run_created event).
        described = first("describe", kept)
        assert "\nkept      1 d 12 h after its end (its workflow's retention)\n" in described.out, described.out
        assert json.loads(first("describe", kept, "--json").out)["retentionSeconds"] == 36 * 3600
        assert not any("record failed" in line for line in first.lines), first.lines
    finally:
        first.stop()

    second = WatchedDev(tmp_path, state, [runner], module="pricedev")
    try:
        banner = "".join(second.banner)
        assert (f"run {moved} (pricedev.order) is parked: its replay differs from its log at step 1 (event 6): the "
                "log has the result of step 'pricedev.quote' (step_1) recorded, the code cannot read it: value: "
                "cannot load 'model' envelope: ValidationError: 1 validation error for Quote\ncurrency\n") in banner, \
            banner
        assert ("(a class the value names was changed, moved or removed since it was recorded: keep it able to read "
                "what was recorded, say a default for a new field and the old name importable, until the runs "
                "recorded with it end); make the code take what the log recorded, as its divergence says (or revert "
                "it), and the run resumes") in banner, banner
        described = second("describe", moved)
        assert "status    parked\n" in described.out, described.out

        mark_at = len(second.lines)
        source.write_text(source.read_text().replace(REQUIRED, DEFAULTED))
        second.wait_for(rf"^run {moved} \(pricedev\.order\) replays again: it was parked, and resumes$", mark_at)
        assert second("skip", moved).code == 0
        finished = second("result", moved, "--wait", "30")
        assert finished.code == 0 and json.loads(finished.out.splitlines()[-1]) == "mug costs 9.90", finished
    finally:
        second.stop()
