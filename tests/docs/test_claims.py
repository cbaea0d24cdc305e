"""Numbers the pages state in prose are the code's: a setting's default written beside its name (``AWSWORLD_X``
(30 s), 16 KiB (``AWSWORLD_X``)), the names' limits (Operate: Limits) and the crash sweep's sample that CI runs
(Concepts: Delivery guarantees). The settings page and the CLI page are generated from the code (``docs/hooks/``);
these are the places a reader finds the same numbers written by hand, which drifted: the guarantees page said the
sweep runs every 16th call on moto and every 24th on LocalStack when ``tests/chaos/test_chaos.py`` runs every 24th
and every 48th, and the limits page gave every workflow, step and call name 128 characters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from awsworld.authoring.names import MAX_NAME_LENGTH
from awsworld.settings import Settings

from .test_pages import DOCS, ROOT, pages

UNITS = {"": None, "s": 1.0, "seconds": 1.0, "min": 60.0, "minutes": 60.0, "h": 3600.0, "hours": 3600.0,
         "ms": 0.001, "KiB": 1024.0, "MiB": 1024.0 ** 2}
NUMBER = r"(?P<number>\d[\d,]*(?:\.\d+)?)(?: (?P<unit>s|seconds|min|minutes|h|hours|ms|KiB|MiB))?"
BESIDE = [re.compile(rf"`(?P<env>AWSWORLD_[A-Z_]+)` \({NUMBER}[):,; ]"),  # `AWSWORLD_X` (30 s: ...)
          re.compile(rf"(?<![\w.]){NUMBER} \(`(?P<env>AWSWORLD_[A-Z_]+)`")]  # 16 KiB (`AWSWORLD_X`)


def _flat(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def _in_own_unit(env: str, number: str, unit: str | None) -> float:
    """The stated value in the variable's own unit (seconds, milliseconds, bytes or a count, read off its name)."""
    value = float(number.replace(",", ""))
    factor = UNITS[unit or ""]
    if factor is None:
        return value
    own = 0.001 if env.endswith("_MS") else 1.0
    return value * factor / own


def test_a_default_stated_beside_a_setting_is_its_default() -> None:
    defaults = {var.env: var.default for var in Settings.variables()}
    stated: list[tuple[str, str, str]] = []
    wrong: list[tuple[str, str, str, object]] = []
    for page in pages():
        text = _flat(page)
        for pattern in BESIDE:
            for match in pattern.finditer(text):
                env = match.group("env")
                where = str(page.relative_to(ROOT))
                assert env in defaults, f"{where} names {env}, which awsworld does not read"
                if defaults[env] is None:  # no fixed default (the flow budget: the invocation's time less 10 s)
                    continue
                stated.append((where, env, match.group(0)))
                value = _in_own_unit(env, match.group("number"), match.group("unit"))
                if value != defaults[env]:
                    wrong.append((where, env, match.group(0), defaults[env]))
    assert len(stated) >= 15, stated  # the pattern still finds what the pages write
    assert wrong == []


def test_the_limits_page_gives_each_name_its_limit() -> None:
    from awsworld.authoring.definitions import MAX_STEP_NAME_LENGTH, MAX_WORKFLOW_NAME_LENGTH

    text = _flat(DOCS / "operate" / "limits.md")
    workflow_row = "| a workflow's name (`@workflow(name=)`, else `module.function`) |"
    assert f"{workflow_row} {MAX_WORKFLOW_NAME_LENGTH} characters" in text
    assert f"| a step's name (`@step(name=)`) | {MAX_STEP_NAME_LENGTH} characters" in text
    assert f"| {MAX_NAME_LENGTH} characters, one line, not blank (`InvalidNameError`) |" in text


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def test_the_guarantees_page_states_the_crash_sweep_ci_runs() -> None:
    """``SWEEP`` in ``tests/chaos/test_chaos.py`` (first k, stride), read from its source: importing it would start
    nothing, but the chaos package's imports are not this test's business."""
    source = (ROOT / "tests" / "chaos" / "test_chaos.py").read_text(encoding="utf-8")
    [sweep] = [node.value for node in ast.parse(source).body
               if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["SWEEP"]]
    assert isinstance(sweep, ast.Dict)
    strides = {ast.unparse(key): ast.literal_eval(value)[1] for key, value in zip(sweep.keys, sweep.values, strict=True)
               if key is not None}
    text = _flat(DOCS / "concepts" / "guarantees.md")
    assert (f"the crash sweep at every {_ordinal(strides[repr('moto')])} call on moto, and at every "
            f"{_ordinal(strides['LOCALSTACK'])} on `[localstack]`") in text


FROM = re.compile(r"`(?P<name>[A-Z]\w+)`(?: \(an? `[A-Z]\w+`)?,? from `(?P<module>awsworld(?:\.\w+)*)`")


def test_a_name_the_pages_say_to_import_from_a_module_is_there() -> None:
    """"``ScheduleInputError``, from ``awsworld.world.rules.schedules``" (Schedules) was an ImportError: it lives in
    ``awsworld.world.schedules``. Every "``Name`` (a ``Base``), from ``module``" a page writes imports."""
    import importlib

    said: list[tuple[str, str, str]] = []
    for page in pages():
        for match in FROM.finditer(_flat(page)):
            said.append((str(page.relative_to(ROOT)), match.group("name"), match.group("module")))
    assert len(said) >= 4, said
    missing = [(where, name, module) for where, name, module in said
               if not hasattr(importlib.import_module(module), name)]
    assert missing == []
