"""The record of awsworld's files in a user's project (``MANIFEST_PATH``), which ``awsworld init`` writes beside
them: the sha256 of each file as it wrote it, and the awsworld version that wrote them.

Why: ``awsworld init --upgrade`` rewrites the files that are awsworld's (``_owned_files`` in
``awsworld/deploy/init.py``), and users edit them all the same (an IAM statement in ``template.yaml`` for a step,
a VPC, an alarm). Rewritten without a look, such an edit was lost silently, and the next ``sam deploy`` took the
permission out of production. With the record, an upgrade tells a file awsworld wrote (its digest matches: it is
rewritten) from one changed since (``find_edits``: the upgrade refuses, or under ``--force`` saves the copy
beside it first, ``save_copy``).

Where: ``infra/``, beside the build's Makefile, not in the functions' code folder (``src/``, the one folder
``sam build`` packs: ``awsworld/deploy/build_function.py``), so it never reaches an artifact. Deterministic: JSON
with sorted keys, one file a line, a final newline and no time in it, so the same files give the same bytes and
a commit of it diffs by the lines of the files that changed.

Digests are of a file's bytes with CRLF line endings read as LF: a checkout that turned them into CRLF (git's
``core.autocrlf`` on Windows) did not edit the file, and ``init`` writes text in the platform's line endings.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from . import MANIFEST_PATH

_ABOUT = ("written by awsworld init: the sha256 of each of awsworld's files as it wrote it, by which "
          "init --upgrade tells your edits from its own files (docs/operate/deploy.md); commit it, don't edit it")


class ManifestError(Exception):
    """The project's ``MANIFEST_PATH`` is not a record awsworld wrote (not JSON, or not its shape)."""


@dataclass(frozen=True)
class Recorded:
    """What ``MANIFEST_PATH`` holds: the version of awsworld that wrote the files, and each one's digest by path."""

    version: str
    digests: Mapping[str, str]


@dataclass(frozen=True)
class Edits:
    """The files on disk that writing would lose something of, in the order they were given.

    ``edited``: the record has a digest of the file and the file no longer matches it (the user changed it since
    awsworld wrote it). ``unrecorded``: the file differs from what is about to be written and the record has no
    digest of it (no record at all, in a project an earlier awsworld initialised; or a file that is not
    awsworld's, ``samconfig.toml`` under ``init --force``): an edit cannot be told from an older version."""

    edited: list[str]
    unrecorded: list[str]


def digest(content: bytes) -> str:
    """The sha256 of ``content`` with CRLF line endings read as LF (hex)."""
    return hashlib.sha256(content.replace(b"\r\n", b"\n")).hexdigest()


def manifest_text(files: Mapping[str, str]) -> str:
    """The record of ``files`` (path -> the text written), as ``MANIFEST_PATH`` holds it."""
    record = {"about": _ABOUT, "awsworld": __version__,
              "files": {path: digest(text.encode("utf-8")) for path, text in files.items()}}
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def read_recorded(directory: Path) -> Recorded | None:
    """The record in ``directory`` (a project's root); None when it has none. ``ManifestError`` when it is not one
    awsworld wrote: nothing can be told from it, and a guess could lose an edit."""
    path = directory / MANIFEST_PATH
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_bytes())
    except ValueError as error:  # (UnicodeDecodeError and json's JSONDecodeError both are)
        raise ManifestError(f"{MANIFEST_PATH} is not JSON ({error})") from None
    files = record.get("files") if isinstance(record, dict) else None
    version = record.get("awsworld") if isinstance(record, dict) else None
    if not isinstance(files, dict) or not isinstance(version, str) or not all(
            isinstance(value, str) for value in files.values()):
        raise ManifestError(f"{MANIFEST_PATH} is not the record awsworld init writes "
                            "(an object with \"awsworld\", a version, and \"files\", path -> sha256)")
    return Recorded(version, {str(name): value for name, value in files.items()})


def find_edits(directory: Path, files: Mapping[str, str], recorded: Recorded | None,
               carried: Callable[[str, str], Iterable[str]] | None = None) -> Edits:
    """Which of ``files`` (path -> the text about to be written there) exist in ``directory`` with content that
    writing them would lose. A file that is missing, or already holds that text, loses nothing; nor does one whose
    digest is the record's. ``carried(path, text)``: the file's text with each change the writer carries over
    undone (``init --upgrade`` keeps the template's ``Architectures``): one of them matching the record is not an
    edit either."""
    variants = carried or (lambda path, text: ())
    edited: list[str] = []
    unrecorded: list[str] = []
    for path, text in files.items():
        target = directory / path
        if not target.is_file():
            continue
        content = target.read_bytes().replace(b"\r\n", b"\n")
        if content == text.encode("utf-8"):
            continue
        wrote = recorded.digests.get(path) if recorded is not None else None
        if wrote is None:
            unrecorded.append(path)
        elif digest(content) != wrote and all(
                digest(variant.encode("utf-8")) != wrote
                for variant in variants(path, content.decode("utf-8", errors="replace"))):
            edited.append(path)
    return Edits(edited, unrecorded)


def saved_name(path: str, number: int = 1) -> str:
    """The name of the ``number``-th copy of ``path`` saved before an overwrite: ``path.edited``, then
    ``path.2.edited``, ... The suffix is the one the build leaves out of every artifact (``SAVED_COPY_SUFFIX``,
    ``awsworld/deploy/build_function.py``), so ``src/flow.py.edited`` never ships."""
    from .build_function import SAVED_COPY_SUFFIX  # (subprocess, tempfile, email: only when a copy is named)

    return f"{path}{'' if number == 1 else f'.{number}'}{SAVED_COPY_SUFFIX}"


def save_copy(directory: Path, path: str) -> str:
    """Copy the file ``path`` of ``directory`` beside it before it is overwritten, under its first free
    ``saved_name``; return that name (relative, as ``path``). An earlier saved copy is never overwritten: it is
    the user's too."""
    source = directory / path
    for number in range(1, 1000):
        name = saved_name(path, number)
        try:
            with (directory / name).open("xb") as copy:
                copy.write(source.read_bytes())
        except FileExistsError:
            continue
        shutil.copymode(source, directory / name)
        return name
    raise ManifestError(f"{path} has 999 saved copies beside it: move them away")
