"""From outside any workflow: ``Client`` and ``Run`` (start, read, resume hooks, cancel, wake), the messages they
queue (``messages``: what the worker reads), and the replay and export tools (``replay``)."""
