"""The exit codes of ``awsworld``, in a module of their own that imports nothing: ``cli/__init__`` needs
``STOPPED`` before it imports anything else (a Ctrl-C while the command loads), and the commands it imports
(``cli/dev``, ``cli/dev_loop``) need it too, which an import of ``cli/__init__`` from them made a cycle
(tests/test_import_graph.py). ``cli/errors`` says when a command exits ``OPERATIONAL`` or ``USAGE``."""

from __future__ import annotations

OK = 0
OPERATIONAL = 1
"""The command was well formed, the world said no."""
USAGE = 2
"""The command itself, or its configuration, is wrong (argparse exits 2 too)."""
STOPPED = 130
"""A command stopped by Ctrl-C (``stopped``), at any moment from the command's first import on, as a shell
reports a process ended by SIGINT (128 + 2); ``dev`` too, after its way out (``cli/dev._main``)."""
READER_GONE = 141
"""A command whose reader stopped reading (``awsworld describe RUN | head``): a process ended by SIGPIPE exits
128 + 13 in a shell, as ``yes | head`` does."""
