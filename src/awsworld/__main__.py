"""``python -m awsworld``: the ``awsworld`` command without its console script (a venv whose ``bin/`` is not on
``PATH``, ``python3.11 -m awsworld`` for a given interpreter)."""

import sys

from .cli import main

sys.exit(main())
