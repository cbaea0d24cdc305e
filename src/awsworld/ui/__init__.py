"""``awsworld ui``: a local web view of runs, against any World (the emulator, ``awsworld dev``, a stack).

``create_app(world)`` builds the ASGI app; ``serve(app, port=...)`` a uvicorn server on 127.0.0.1. Pages are
server-rendered with everything inline (``pages``); the JSON API (``api``) feeds the live refresh (one request
every 2 s while a run runs; two World requests each, plus one per stream opened on the page and not yet
closed, see ``reader``) and the on-demand values and streams.
Needs the ``ui`` extra (Starlette and uvicorn).
"""

from .app import check_loopback, create_app, serve

__all__ = ["check_loopback", "create_app", "serve"]
