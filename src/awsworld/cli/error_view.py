"""How ``describe`` shows a failed run's error: its type, message, the step or child run that failed and the
tracebacks.

Kept apart from ``describe``'s layout so either can change alone: ``error_part`` gives the document's keys
(``--json``), ``print_error_part`` the lines for people.
"""

from __future__ import annotations

from typing import Any

from .._timeline import error_lines, error_part
from .._worker.error_shapes import failed_in

__all__ = ["error_part", "print_error_part"]


def print_error_part(document: dict[str, Any]) -> None:
    """The error's lines under ``describe``'s header: type, failing step or child run, message, then the
    tracebacks (for a failed step or child run, the type and message are the original error's), and for a failed
    run how to run it again."""
    details = document.get("errorDetails")
    if not isinstance(details, dict):
        return
    cause = details.get("cause")
    if isinstance(cause, dict):
        print(f"failed in {failed_in(details)}")
        print(f"error     {cause.get('type') or cause.get('name')}: {cause.get('message', '')}")
    else:
        sent = f" [{details['code']}]" if details.get("code") else ""  # a failed hook's code (fail_hook(code=))
        print(f"error     {details.get('type') or details.get('name')}: {details.get('message', '')}{sent}")
    if document.get("errorCode"):
        print(f"code      {document['errorCode']}")
    lines = error_lines(details)
    if lines and (isinstance(cause, dict) or lines[0].startswith("type ")):
        lines = lines[1:]  # the step's line, or the qualified type, is printed above
    if lines:
        print("traceback")
        for line in lines:
            print(f"  {line}")
    if document.get("status") == "failed" and document.get("rerunHint"):  # (_timeline.failed_run_hint)
        print(f"re-run    {document['rerunHint']}")
