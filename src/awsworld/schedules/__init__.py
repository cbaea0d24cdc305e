"""Schedules: workflows that start themselves, exactly once per tick (docs/how-to/schedules.md).

Declared in code (``@workflow(schedule=Schedule(...))``, ``awsworld.schedule``) or through ``client.schedules``;
fired by the tick (``_worker.tick``'s ``schedules`` job, ``job.py``); decided by ``world.rules.schedules``.
Nothing is imported here, so ``import awsworld`` pays only for what a declaration needs (``model``).
"""
