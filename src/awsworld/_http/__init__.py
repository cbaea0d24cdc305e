"""A World over HTTP/JSON: ``awsworld serve``'s ASGI app (``app``), the wire's conventions (``wire``), who may call it
(``auth``), the local server it runs on (``listen``), and deliveries pushed by HTTP to an app of another runtime
(``push``: the Workflow SDK's TypeScript apps). The Python client of the same endpoints is
``awsworld.client.http_client``."""
