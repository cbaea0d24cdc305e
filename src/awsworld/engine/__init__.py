"""Replay without I/O: one run's workflow code driven by its event log on a deterministic loop.

The execution (``execution``), its loop (``replay_loop``), the determinism guard, divergence checks, serde and
the durable shape of a child call. It reads no World and sends no message: the worker feeds it the log and acts
on what it declares; where a call needs I/O (starting a child run), it asks an interface the worker implements
(``child_calls.ChildLauncher``).
"""
