"""What a webhook's run receives for each HTTP request: ``WebhookRequest``, the payload of a ``create_webhook()``
hook. One definition: the webhook route builds the payload with it (``lambda_host/webhook.py``, on the stack and
under ``awsworld dev``), ``create_webhook`` types its hook with it (``authoring/calls.py``), and ``respond()``
takes it (``authoring/webhook_responses.py``), so what a type checker promises is what the route records."""

# (No ``from __future__ import annotations``: ``TypedDict`` reads ``NotRequired`` from real annotations only; as
# strings, Python 3.11 counts ``respondTo`` among ``__required_keys__``.)
from typing import NotRequired, TypedDict


class RespondTo(TypedDict):
    """Where a manual webhook's answer to one request goes: the run and its stream (one per request) that
    ``respond()`` writes the answer to and the route reads it from."""

    runId: str
    stream: str


class WebhookRequest(TypedDict):
    """One request to a webhook's URL, as the workflow receives it (``await hook`` of a ``create_webhook()``
    hook): ``method`` (``GET``, ``POST``, ``PUT``, ``PATCH`` or ``DELETE``), ``headers`` (names in lower case),
    ``body`` (text; bytes for binary content, a body the Function URL base64-encoded whose content type is not
    text or which is not UTF-8; None for a request without one) and ``query`` (the query string's parameters). A
    webhook created with ``respond_with="manual"`` adds ``respondTo``, which ``respond(request, ...)`` reads to
    answer the sender. A test resumes a webhook with one: ``client.resume_hook(token, WebhookRequest(...))``."""

    method: str
    headers: dict[str, str]
    body: str | bytes | None
    query: dict[str, str]
    respondTo: NotRequired[RespondTo]


__all__ = ["RespondTo", "WebhookRequest"]
