"""What a workflow is written with: the decorators and definitions, and the calls a workflow or step body makes.

Nothing here replays, runs or stores anything. A workflow body's calls reach the run they are made in through
``runtime.WorkflowRuntime`` (``runtime.current_runtime``), which the engine's ``WorkflowExecution`` implements, as
Temporal's ``workflow`` module reaches its ``_Runtime``; a step body's, through ``step_context.current_step``, which
the worker sets. So this package imports neither the engine nor the worker; the durable format it stores values
in is ``awsworld.durable``, below both.
"""
