"""Lambda entry points: the flow route (SQS batch -> runtime), the webhook route (Function URL -> hook) and
``awsworld serve`` behind a Function URL (``serve``); what one execution environment keeps (``container``,
``snapstart``), logs, metrics and traces (``observability``), and the flow function's published versions as
deployments (``versions``).

``handlers/flow.py``, ``handlers/webhook.py`` and ``handlers/serve.py`` only re-export each module's ``handler``
from here, so an application that installs awsworld from PyPI can point its own template at
``awsworld.lambda_host.flow.handler`` without copying any code. Only other hosts import it (``awsworld dev`` runs
the webhook route and its observability, ``local.lambda_versions`` the flow's versions, the CLI reads the
container's module list and deletes a version; ``awsworld.lambda_`` keeps the handlers' old paths): no layer
below depends on Lambda (``tests/test_import_graph.py``).
"""

from __future__ import annotations

__all__: list[str] = []
