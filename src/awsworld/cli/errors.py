"""What an operator sees when a command cannot do its job: one line, with a hint, and an exit code.

Ordinary mistakes (an unknown run, bad JSON, a workflow nobody registered, an emulator that is not running,
unset configuration) are the operator's to fix, so a traceback only gets in the way: ``describe`` turns each
into a sentence and says what to try. ``--debug`` brings the traceback back for the rare real bug.

Exit codes: 0 ok, 1 an operational error (the command was well formed, the world said no), 2 a usage error
(the command itself, or its configuration, is wrong: argparse uses 2 too; so is a workflow name nothing
registers, and arguments that do not fit the workflow).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .exit_codes import OK as OK  # (re-exported: the commands read their exit codes here)
from .exit_codes import OPERATIONAL as OPERATIONAL
from .exit_codes import USAGE as USAGE

RUNS_HINT = "`awsworld runs` lists recent runs"
CONFIG_HINT = ("start `awsworld dev` and paste the export lines it prints, or set the variables from your stack's "
               "outputs (AWSWORLD_TABLE, AWSWORLD_BUCKET, AWSWORLD_QUEUE_URL)")


@dataclass
class CliError(Exception):
    """A failure worth one line: ``message`` says what happened, ``hint`` what to do about it."""

    message: str
    hint: str | None = None
    code: int = OPERATIONAL

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


def usage(message: str, hint: str | None = None) -> CliError:
    return CliError(message, hint, USAGE)


JSON_HINT = "quote it for the shell, e.g. '[\"A-17\", 3]' or '{\"id\": 1}'"


SHOWN_JSON_CHARS = 120
"""A value that is not JSON is shown in its error up to this many characters, around where it broke: a 50 KB
argument pasted with one bad character was echoed whole, twice over the terminal."""


def check_run_listing(statuses: list[str] | None, limit: int, limit_hint: str) -> None:
    """A run listing's ``--status`` and ``--limit`` (``awsworld runs``, ``awsworld replay``): a usage error naming
    the flag, before any read. A ``--limit`` over a page used to reach the World and come back exit 1, ``limit
    must be between 1 and 100 (invalid-input)``, naming no flag."""
    from ..world.entities import RUN_STATUSES
    from ..world.pages import MAX_RUNS_PAGE

    for status in statuses or ():
        if status not in RUN_STATUSES:
            raise usage(f"unknown run status {status!r}",
                        f"--status takes {', '.join(RUN_STATUSES)}; repeat it for several")
    if not 1 <= limit <= MAX_RUNS_PAGE:
        raise usage(f"--limit must be between 1 and {MAX_RUNS_PAGE}, got {limit}", limit_hint)


def parse_json(text: str, what: str) -> object:
    """``text`` as JSON, or a usage error that shows where it broke and how to write it (``json_hint``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        shown = repr(text) if len(text) <= SHOWN_JSON_CHARS else (
            f"…{text[max(0, error.pos - SHOWN_JSON_CHARS // 2):error.pos + SHOWN_JSON_CHARS // 2]!r}… "
            f"({len(text)} characters)")
        raise usage(f"{what} is not JSON: {error.msg} at character {error.pos}: {shown}",
                    json_hint(text) if len(text) <= SHOWN_JSON_CHARS else JSON_HINT) from None


def read_input_file(path: str, option: str) -> str:
    """The text of the file an ``--*-file`` option names (``-``: standard input), for a value too long to paste
    (``start --args-file``, ``resume --payload-file``); a usage error naming the option and the file when it cannot
    be read, with the folder relative paths are read from."""
    import sys
    from pathlib import Path

    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
        what = "a folder, not a file" if isinstance(error, IsADirectoryError) else "no such file"
        raise usage(f"{option} {path}: {what} (paths are read from {Path.cwd()})",
                    f"give the JSON file's path, or {option} - to read standard input") from None
    except (PermissionError, UnicodeDecodeError) as error:
        raise usage(f"{option} {path} cannot be read: {error}", "give a UTF-8 JSON file you can read") from None


def parse_json_file(path: str, option: str) -> object:
    """The JSON in the file ``option`` names, or a usage error that says where it broke by line and column (the
    file is not echoed: it may be 50 KB)."""
    text = read_input_file(path, option)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise usage(f"{option} {path} is not JSON: {error.msg} at line {error.lineno} column {error.colno}",
                    "the file holds one JSON value, as the argument would") from None


def json_hint(text: str) -> str:
    """How to write what was meant, for the two mistakes a newcomer makes first: a bare word for a string
    (``A-17``: a JSON string takes double quotes, inside the shell's single quotes) and Python's quotes
    (``['A-17']``); else how to quote JSON for the shell."""
    stripped = text.strip()
    if stripped and stripped[0] not in "[{\"'-0123456789" and stripped not in ("true", "false", "null"):
        return f"a string is JSON in double quotes, inside the shell's single quotes: '{json.dumps(stripped)}'"
    if "'" in stripped and '"' not in stripped:
        fixed = stripped.replace("'", '"')
        try:
            json.loads(fixed)
        except json.JSONDecodeError:
            pass
        else:
            return f"JSON strings take double quotes: '{fixed}'"
    return JSON_HINT


SPLIT_HINT = ("the shell split a JSON value at its spaces or ate its quotes: pass it as one argument in single "
              "quotes, e.g. awsworld start shop.checkout '[\"A-17\", [\"kettle\"]]'")


def split_json(unrecognized: list[str]) -> bool:
    """Whether arguments argparse did not expect look like the pieces of a JSON value the shell split
    (``awsworld start shop.checkout ["A-17", ["kettle"]]`` reaches the CLI as ``[A-17,`` and ``[kettle]]``)."""
    return any(piece[:1] in "[{" or piece[-1:] in "]}," for piece in unrecognized if piece)


def describe(error: BaseException) -> CliError:
    """The one line an exception deserves. Unknown exceptions still get one line, pointing at ``--debug``."""
    from ..authoring.definitions import WorkflowNotRegisteredError
    from ..authoring.errors import RunNotEndedError, WorkflowRunCancelledError, WorkflowRunFailedError
    from ..world.errors import (
        CodecPayloadError,
        HookClosedError,
        HookNotFoundError,
        RunGoneError,
        RunNotFoundError,
        WorldError,
        WorldSetupError,
        WorldUnreachableError,
    )
    from ..world.rules.limiters import LimitInputError
    from ..world.schedules import ScheduleInputError

    if isinstance(error, CliError):
        return error
    if isinstance(error, RunNotFoundError):  # (a run that existed is gone once its retention after its end passed)
        return CliError(f"no such run: {error.message}", f"{RUNS_HINT}; a run is kept for its retention after it "
                        "ends (the stack's RunRetentionDays, 90 days by default, or its workflow's retention=), "
                        "then not found")
    if isinstance(error, HookClosedError):  # before HookNotFoundError: it is one (no live hook owns the token)
        return CliError(error.message, f"`awsworld describe {error.run_id}` shows how it ended")
    if isinstance(error, HookNotFoundError) and error.disposed_hook is not None:  # a late answer, not a typo
        return CliError(error.message, f"`awsworld hooks {error.disposed_hook[0]}` shows the hook and what it "
                        "received")
    if isinstance(error, HookNotFoundError):
        return CliError("no hook holds this token (it was never created, or its run has disposed it, or the run "
                        "was deleted once its retention passed)",
                        "`awsworld hooks RUN` lists a run's tokens, whole; if its run has not created the hook "
                        "yet, add --wait SECONDS to wait for it")
    if isinstance(error, RunGoneError):
        return CliError(error.message, "a finished run takes no more payloads")
    if isinstance(error, WorkflowRunFailedError | WorkflowRunCancelledError | RunNotEndedError):
        return CliError(str(error))
    if isinstance(error, WorkflowNotRegisteredError):  # a usage error: the command named what does not exist
        return usage(f"no workflow named {error.name!r} is registered {error.where} ({error.loaded()})"
                     f"{error.did_you_mean()}", "name a workflow your modules register (their `name=`)")
    if isinstance(error, TimeoutError):
        return CliError(str(error) or "timed out")
    if isinstance(error, LimitInputError):  # a usage error: a limit, key, rate or number that cannot be
        return usage(error.message, "see `awsworld limits --help`")
    if isinstance(error, ScheduleInputError):  # a usage error too: a schedule id or arguments that cannot be
        return usage(error.message, "see `awsworld schedules create --help`")
    if isinstance(error, CodecPayloadError):  # a usage error: the payload is not what the hook takes
        return usage(error.message)
    if isinstance(error, WorldError):
        return CliError(f"{error.message} ({error.code})")
    if isinstance(error, WorldUnreachableError | WorldSetupError):  # the World is not where the settings say
        return CliError(error.message, error.hint)
    botocore = _botocore(error)
    if botocore is not None:
        return botocore
    return CliError(f"unexpected {type(error).__name__}: {error}", "rerun with --debug for the traceback")


def _botocore(error: BaseException) -> CliError | None:
    """Another refusal of AWS's (a connection, credentials or a missing table, bucket or queue is already
    ``WorldUnreachableError`` or ``WorldSetupError``: ``aws/request_errors.py``)."""
    try:
        from botocore.exceptions import ClientError
    except ImportError:  # pragma: no cover - botocore comes with the package
        return None
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        code, message = info.get("Code", "?"), info.get("Message", "")
        return CliError(f"AWS refused the request: {code}: {message}")
    return None
