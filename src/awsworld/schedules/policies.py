"""A schedule's policies, as words: what a tick does while the last run still goes (``Overlap``) and which missed
ticks it runs after downtime or a pause (``Catchup``). The record that holds them and the rules that act on them
are the World contract's (``world/schedules.py``, ``world/rules/schedules.py``); the words live here, with nothing
else, so that ``awsworld schedules``' parser offers them as choices without loading the contract's models (every
``awsworld`` command builds that parser: tests/cli/test_cli_start.py). This module sits in the contract's layer
(tests/test_import_graph.py)."""

from __future__ import annotations

from typing import Literal

Overlap = Literal["skip", "buffer_one", "allow_all", "cancel_previous"]
OVERLAPS: tuple[Overlap, ...] = ("skip", "buffer_one", "allow_all", "cancel_previous")
Catchup = Literal["latest", "all"]
CATCHUPS: tuple[Catchup, ...] = ("latest", "all")
