"""What a workflow is written with: the decorators and definitions, and the calls a workflow or step body makes.

Nothing here replays, runs or stores anything: the calls reach the run they are made in through the interfaces
in ``scope`` (``WorkflowScope``, ``StepScope``), which the engine and the worker implement, as Temporal's
``workflow`` package reaches its ``_Runtime``. So this package imports neither of them.
"""
