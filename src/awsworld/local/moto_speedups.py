"""Work moto's server repeats on every request, done once, with the same answers.

Measured with ``bench/emulator_cpu.py`` (a cProfile on CPU time over every thread of ``awsworld dev``'s process):
moto's server is most of the CPU a step costs on the embedded emulator, and part of it is work whose answer never
changes while the process runs, or work done for an answer nobody reads:

* ``moto.backends.list_of_moto_modules`` lists moto's package directory and ``stat``s each of its ~170 entries
  on every request (``DomainDispatcherApplication.get_backend_for_host`` asks whether the request's host is a
  module name). moto's installed files do not change under a running server: the list is read once.
* ``BaseResponse.call_action`` runs ``method_names_from_class(self.__class__)`` (``inspect.getmembers`` over a
  response class of a hundred methods) on every request, to ask whether the action is one of them. A class's
  functions do not change either: the names are kept per class, as the same list.
* ``UpdateExpressionParser.make`` tokenizes and parses an ``UpdateExpression`` twice per update (once in the
  response to find the placeholders it uses, once in the backend), and awsworld sends a handful of distinct
  expressions. The tree is kept per expression string (a bounded cache): both callers only read it, and the
  validator that resolves it against the item deep-copies it first (``moto.dynamodb.parsing.validators``'s
  ``Validator.__init__``), so a kept tree is never changed. A malformed expression raises every time, as
  before (an exception is not kept).
* SQS's ``ReceiveMessage`` checks each message it hands out against the queue's retention period through
  ``get_queue_attributes(queue, ["MessageRetentionPeriod"])``, which builds every attribute of the queue three
  times, among them the approximate counts that walk every message: a receive cost time proportional to the
  queue's length times the messages it returned, and a 200-way fan-out's queue is long. The check below reads
  the queue's ``message_retention_period`` (the value that attribute is made from) and compares as moto does.

* A DynamoDB answer's attribute values (``{"S": "..."}``, ``{"N": "..."}``, ...) are already in their wire form,
  but moto's JSON serializer walks each as a structure of ten members, looking every member up through its alias
  providers: about 0.1 ms a value, so the steps page of a 500-step run (8,000 values) took 0.6-1.3 s to answer and
  ``awsworld describe`` of it waited seconds under load (``bench/describe.py``). A string, number, boolean or null
  value is written as it is (what the walk writes for it); a binary, set, map or list still takes moto's walk
  (a map's and a list's members come back here one by one).

* SQS's long poll (``ReceiveMessage`` with ``WaitTimeSeconds``) waits on a condition that only a send notifies,
  a second at a time, so a message whose delay or visibility timeout ran out while it waited was handed out at
  the wait's next second: up to a second late, by the phase of the receive (0.12 to 0.92 s late for a 1 s delay,
  received from 0.1 to 0.9 s after the send). Every ``sleep``, poll interval and retry under ``awsworld dev`` came
  that much late. The wait now also ends when the first such message falls due (``wait_for_messages``); what it
  hands out, and when a message counts as visible, are moto's.

``install()`` is called by ``MotoServer.start()`` with the DynamoDB patches of ``moto_patch``; it checks that
each function it replaces is the one it was written against (``_check``), and installs nothing in their place
if moto changed, so a moto upgrade can only make the server slower, never different.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable
from typing import Any

_installed = False

# sha256 of the source of each function replaced here, in moto 5.2 (5.2.6): see _check.
EXPECTED_SOURCES = {
    "list_of_moto_modules":
        "4f741a10b06500e840c3aaa1b4f02706e6f2bfbababc0e8a2a7b9c9d0e8957dc",
    "method_names_from_class":
        "9dbac89d082b655fee902c450e69de9dbadf9699ad06411298494984b55138c3",
    "UpdateExpressionParser.make":
        "2c00ed96d6e191f243b449166e75bfb38f307b2e19405bc0981847061e0dbee3",
    "SQSBackend.is_message_valid_based_on_retention_period":
        "cca23b94a5f3af9d9c5af1c09ee5e615017bdf6bd032301cb321c06c7e595d4b",
    "BaseJSONSerializer._serialize_type_structure":
        "36873909cd0aeb4defa91cc9912c6e90a62d7d92ced6150ac7de92fd10a81967",
    "Queue.wait_for_messages":
        "58432562ccf2e13ed8841c825dd2614b6e57b71733d1ce9ba6926d38530ba1f1",
}

_PLAIN_VALUES = {"S": str, "N": str, "BOOL": bool, "NULL": bool}
"""The attribute value kinds written as they are (``attribute_value_fast``), with the type each holds."""
_ATTRIBUTE_SERVICES = frozenset({"dynamodb", "dynamodbstreams"})

UPDATE_EXPRESSION_CACHE_SIZE = 512


def source_digest(function: Callable[..., Any]) -> str:
    """sha256 of ``function``'s source; empty when there is none to read (moto installed without its .py files),
    which counts as changed."""
    try:
        return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()
    except (OSError, TypeError):
        return ""


def originals() -> dict[str, Callable[..., Any]]:
    """The moto functions ``install()`` replaces, by name (moto's own, whether installed or not)."""
    from moto import backends
    from moto.core import utils
    from moto.core.serialize import BaseJSONSerializer
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.sqs.models import Queue, SQSBackend

    return {
        "list_of_moto_modules": _original.get("list_of_moto_modules", backends.list_of_moto_modules),
        "method_names_from_class": _original.get("method_names_from_class", utils.method_names_from_class),
        "UpdateExpressionParser.make": _original.get("UpdateExpressionParser.make",
                                                     UpdateExpressionParser.make.__func__),  # type: ignore[attr-defined]
        "SQSBackend.is_message_valid_based_on_retention_period": _original.get(
            "SQSBackend.is_message_valid_based_on_retention_period",
            SQSBackend.is_message_valid_based_on_retention_period),
        "BaseJSONSerializer._serialize_type_structure": _original.get(
            "BaseJSONSerializer._serialize_type_structure", BaseJSONSerializer._serialize_type_structure),
        "Queue.wait_for_messages": _original.get("Queue.wait_for_messages", Queue.wait_for_messages),
    }


_original: dict[str, Callable[..., Any]] = {}


def _check(found: dict[str, Callable[..., Any]]) -> list[str]:
    """The names whose moto source is not the one these replacements were written against."""
    return [name for name, function in found.items() if source_digest(function) != EXPECTED_SOURCES[name]]


def install() -> list[str]:
    """Install the replacements whose moto originals are unchanged (once per process); return the names of
    those left as moto has them because moto's code differs."""
    global _installed
    if _installed:
        return []
    from moto import backends
    from moto.core import responses, utils
    from moto.core.serialize import BaseJSONSerializer
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.sqs.models import Queue, SQSBackend

    found = originals()
    changed = _check(found)
    _original.update(found)
    if "list_of_moto_modules" not in changed:
        modules = tuple(found["list_of_moto_modules"]())
        backends.list_of_moto_modules = lambda: modules  # type: ignore[assignment]
    if "method_names_from_class" not in changed:
        names: dict[object, list[str]] = {}
        original_names = found["method_names_from_class"]

        def method_names_from_class(clazz: object) -> list[str]:
            known = names.get(clazz)
            if known is None:
                known = names[clazz] = original_names(clazz)
            return known

        utils.method_names_from_class = method_names_from_class
        responses.__dict__["method_names_from_class"] = method_names_from_class  # imported by name there
    if "UpdateExpressionParser.make" not in changed:
        parse = functools.lru_cache(maxsize=UPDATE_EXPRESSION_CACHE_SIZE)(
            functools.partial(found["UpdateExpressionParser.make"], UpdateExpressionParser))
        original_make = found["UpdateExpressionParser.make"]

        def make(cls: type, expression_str: str) -> Any:
            if cls is UpdateExpressionParser and isinstance(expression_str, str):
                return parse(expression_str)
            return original_make(cls, expression_str)

        UpdateExpressionParser.make = classmethod(make)  # type: ignore[method-assign, assignment]
    if "SQSBackend.is_message_valid_based_on_retention_period" not in changed:
        SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
            is_message_valid_based_on_retention_period)
    if "BaseJSONSerializer._serialize_type_structure" not in changed:
        BaseJSONSerializer._serialize_type_structure = attribute_value_fast(  # type: ignore[method-assign]
            found["BaseJSONSerializer._serialize_type_structure"])
    if "Queue.wait_for_messages" not in changed:
        Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]
    _installed = True
    return changed


def wait_for_messages(self: Any, timeout: int) -> None:
    """moto's long-poll wait (``Queue.wait_for_messages``: until a message is receivable or ``timeout`` seconds
    pass), which also ends when the first message kept back by its delay or its visibility timeout falls due
    (``until_due``): moto's condition is notified by sends alone."""
    with self._messages_lock:
        self._messages_lock.wait_for(lambda: self.messages, timeout=until_due(self._messages, timeout))


def until_due(messages: Any, timeout: float) -> float:
    """Seconds until the first of ``messages`` kept back now (a delay, or a receive's visibility timeout) may be
    handed out, a millisecond after moto's own test lets it (``now > visible_at``); ``timeout`` when none falls due
    sooner."""
    from moto.core.utils import unix_time_millis

    now = unix_time_millis()
    due = min((at for m in messages if (at := max(m.visible_at, m.delayed_until)) > now), default=None)
    return timeout if due is None else min(float(timeout), (due - now) / 1000 + 0.001)


def attribute_value_fast(original: Callable[..., Any]) -> Callable[..., Any]:
    """moto's JSON ``_serialize_type_structure`` with a DynamoDB string, number, boolean or null attribute value
    written as it is, as moto's walk of its members writes it (the one member present, its value unchanged: a
    string's ``str`` of a ``str``, a boolean as it is); anything else goes to ``original``."""

    def serialize_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue" and type(value) is dict and len(value) == 1:
            ((kind, inner),) = value.items()
            if type(inner) is _PLAIN_VALUES.get(kind) and (
                    self.operation_model.service_model.service_name in _ATTRIBUTE_SERVICES):
                self._default_serialize(serialized, {kind: inner}, shape, key)
                return
        original(self, serialized, value, shape, key)

    return serialize_structure


def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
    """moto's check (``SQSBackend.is_message_valid_based_on_retention_period``) without building every attribute
    of the queue to read one: the queue's ``MessageRetentionPeriod`` attribute is its ``message_retention_period``."""
    from moto.core.utils import unix_time

    retention_period = self.get_queue(queue_name).message_retention_period
    retain_until = retention_period + message.sent_timestamp / 1000
    return not retain_until <= unix_time()
