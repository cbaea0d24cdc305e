"""``python -m awsworld.cli``: the ``awsworld`` command without its console script."""

from . import run

run()
