"""Lambda entry points: the flow route (SQS batch -> runtime) and the webhook route (Function URL -> hook).

``handlers/flow.py`` and ``handlers/webhook.py`` only re-export ``flow.handler`` and ``webhook.handler`` from
here, so an application that installs awsworld from PyPI can point its own template at
``awsworld.lambda_host.flow.handler`` without copying any code. Nothing here is imported by the rest of the
package: the layers below never depend on Lambda.
"""

from __future__ import annotations

__all__: list[str] = []
