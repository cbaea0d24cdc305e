"""Replay without I/O: one run's workflow code driven by its event log on a deterministic loop.

The execution (``execution.WorkflowExecution``, the ``authoring.runtime.WorkflowRuntime`` that workflow code's
calls reach), its loop (``replay_loop``), the operations the code declares (``ops``), the determinism guard, divergence
checks, hooks' deadlines (``hook_timeouts``), the parent side of a child call (``children``), parked runs and time
scales. It reads no World and sends no message: the worker feeds it the log and acts on what it declares (a
child's start step is a built-in step whose body the worker runs: ``_worker/child_runs.py``).
"""
