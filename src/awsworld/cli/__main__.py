"""``python -m awsworld.cli``: the ``awsworld`` command without its console script."""

import sys

from . import main

sys.exit(main())
