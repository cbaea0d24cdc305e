"""``awsworld serve`` on AWS: the World server (``awsworld._http.app``) as a Lambda function behind a Function URL
whose ``AuthType`` is ``AWS_IAM`` (``template.yaml``'s ``WorldServerFunction``, deployed with ``WorldServer=true``).

AWS checks every request's SigV4 signature and the caller's ``lambda:InvokeFunctionUrl`` permission before the
function runs, so the app trusts what reaches it (``Auth("aws-iam")``); callers sign with their own IAM identity
(``HttpClient(url, aws_region=...)``, or the TypeScript World behind a signing proxy). Mangum adapts the Function
URL's events to the ASGI app. The World is the stack's own (``AWSWorld()`` from the function's environment),
built once per container; pushed deliveries go on the stack's queue, and the flow function POSTs them.

The URL is ``BUFFERED``: an answer is sent whole when it ends. A live stream read therefore answers when the
stream is closed or its run has ended, within the function's timeout (read long streams with the chunk pages,
``GET .../chunks``, instead).
"""

from __future__ import annotations

from typing import Any

from .._http.app import create_app
from .._http.auth import Auth
from ..aws import AWSWorld

_handler: Any = None


def _build() -> Any:
    from mangum import Mangum

    world = AWSWorld()
    app = create_app(world, auth=Auth("aws-iam"), project=world.config.table_name,
                     deployment_id=world.config.deployment_id or "local")
    return Mangum(app, lifespan="off")


def handler(event: dict[str, Any], context: Any) -> Any:
    global _handler
    if _handler is None:
        _handler = _build()
    return _handler(event, context)
