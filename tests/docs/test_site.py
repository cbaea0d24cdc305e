"""The site builds as CI builds it (``mkdocs build --strict``: a warning fails it), and what it holds is complete:
a reference entry for every public name (read from the inventory mkdocstrings writes, ``objects.inv``), every
command of the CLI and every setting on their generated pages, a search index, and the pictures it shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import awsworld
import awsworld.testing
from awsworld.cli import build_parser
from awsworld.settings import Settings

from .test_pages import ROOT

BUILT_SITE = "CI_BUILT_DOCS_SITE"
"""Set by ``.ci/run`` to the site its ``mkdocs build --strict`` step built from this tree moments before: the tests
read that build rather than make the same one again (8-10 s of CPU)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = os.environ.get(BUILT_SITE)
    if built:
        return Path(built)
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def inventory(site: Path) -> set[str]:
    """The names in a Sphinx inventory (version 2): four header lines, then zlib-compressed ``name domain:role ...``
    lines."""
    data = (site / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    body = zlib.decompress(data[header_end:]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if line}


def test_every_public_name_has_a_reference_entry(site: Path) -> None:
    names = inventory(site)
    wanted = {f"awsworld.{name}" for name in awsworld.__all__}
    wanted |= {f"awsworld.testing.{name}" for name in awsworld.testing.__all__}
    wanted |= {"awsworld.local.LocalAWS", "awsworld.aws.AWSWorld", "awsworld.Client.list_runs",
               "awsworld.world.RunPage", "awsworld.world.Run"}
    assert sorted(wanted - names) == []


def test_the_cli_reference_has_every_command(site: Path) -> None:
    page = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    commands = list(getattr(subparsers, "choices", {}))
    assert len(commands) > 15
    assert [c for c in commands if f"awsworld {c}</code>" not in page] == []


def test_the_cli_reference_names_no_private_module(site: Path) -> None:
    """The commands' descriptions (``awsworld CMD --help``, and this page made from them) send a reader to pages and
    to the public API, never to awsworld's private modules (``_engine.parking``, ``dev_state``), which a user cannot
    look up."""
    page = re.sub(r"<[^>]+>", "", (site / "reference" / "cli.html").read_text(encoding="utf-8"))
    cli_modules = [p.stem for p in (Path(awsworld.__file__).parent / "cli").glob("*.py") if "_" in p.stem.strip("_")]
    private = re.findall(r"(?<![\w/.-])_[a-z]+\.\w+|awsworld\._\w+", page)
    internal = [name for name in cli_modules if re.search(rf"(?<![\w/.-]){name}(?![\w/.-])", page)]
    assert (private, internal) == ([], [])


def test_the_settings_page_has_every_variable(site: Path) -> None:
    page = (site / "reference" / "settings.html").read_text(encoding="utf-8")
    assert [v.env for v in Settings.variables() if f"<code>{v.env}</code>" not in page] == []


def test_the_folder_is_a_site_a_host_can_serve(site: Path) -> None:
    """Relative links (no directory URLs), a search index, the run viewer's screenshots, no snippet sources."""
    assert (site / "index.html").exists() and (site / "search" / "search_index.json").stat().st_size > 100_000
    assert (site / "how-to" / "run-viewer.html").exists()
    for picture in ("ui-run.png", "ui-runs.png"):
        assert (site / "images" / picture).stat().st_size > 10_000
    assert not (site / "snippets").exists() and not (site / "hooks").exists()
