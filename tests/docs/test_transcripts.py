"""The transcripts the docs show are what the commands print: ``awsworld demo``, ``awsworld dev`` (as a process, on
the embedded emulator), a CLI session against it and ``awsworld init`` run now, each compared with its file under
``docs/snippets/transcripts/`` by shape (``transcripts.shape``: ids, times, durations and ports aside). When a
command's output changes on purpose, ``python -m tests.docs.transcripts`` rewrites the files."""

from __future__ import annotations

import difflib
import shlex
from pathlib import Path

import pytest

from . import transcripts


@pytest.fixture(scope="module")
def produced() -> dict[str, str]:
    return transcripts.produce()


@pytest.mark.parametrize("name", transcripts.NAMES)
def test_the_transcript_is_what_the_command_prints(produced: dict[str, str], name: str) -> None:
    shown = transcripts.shape(transcripts.path(name).read_text(encoding="utf-8"))
    now = transcripts.shape(produced[name])
    difference = "\n".join(difflib.unified_diff(shown, now, "the page", "now", lineterm=""))
    assert now == shown, (f"docs/snippets/transcripts/{name}.txt no longer matches what the command prints "
                          f"(its lines' shapes, sorted): run `python -m tests.docs.transcripts` and read the diff.\n"
                          f"{difference}\n--- now:\n{produced[name]}")


def test_the_shape_ignores_what_varies_and_keeps_the_words() -> None:
    one = "started run wrun_01M91X36PQHY8Z8B732H2E7GAR at 01:29:14.636 (took 12 ms) on 127.0.0.1:38165"
    two = "started run wrun_01M91X3N4BZGJYDJWAT1YDRRM3 at 02:03:04.000 (took 7 s) on 127.0.0.1:4000"
    assert transcripts.shape(one) == transcripts.shape(two)
    assert transcripts.shape(one) != transcripts.shape(one.replace("started", "failed"))


def test_every_transcript_is_shown_by_a_page() -> None:
    pages = "".join(p.read_text(encoding="utf-8") for p in (transcripts.ROOT / "docs").rglob("*.md"))
    assert [n for n in transcripts.NAMES if f'docs/snippets/transcripts/{n}.txt"' not in pages] == []


def test_the_cli_pages_start_commands_start_runs_of_the_first_workflow_under_dev(tmp_path: Path) -> None:
    """Get started's CLI page is read in the shell of ``awsworld dev checkout`` (the page before it): each
    ``awsworld start`` line of its first block, as written, starts a run there (they named the demo's workflow,
    which that ``dev`` does not serve: exit 2 on the reader's first command)."""
    page = (transcripts.ROOT / "docs" / "get-started" / "cli.md").read_text(encoding="utf-8")
    block = page.split("```bash\n", 1)[1].split("```", 1)[0]
    starts = [shlex.split(line.split("  #", 1)[0])[1:] for line in block.splitlines()
              if line.startswith("awsworld start ")]
    assert len(starts) == 2, block
    with transcripts.running_dev(transcripts.first_workflow_project(tmp_path), "checkout") as server:
        for args in starts:
            done = server(*args)
            assert done.returncode == 0 and done.stdout.startswith("wrun_"), (args, done.stdout, done.stderr)


def test_dev_without_state_says_its_runs_end_with_it(tmp_path: Path) -> None:
    """Without ``--state`` a session's runs are in the emulator's memory: the banner says they end with ``dev`` and
    what keeps them, before anyone starts one; with it (the transcript above) the state line says where they are."""
    with transcripts.running_dev(transcripts.first_workflow_project(tmp_path), "checkout") as server:
        banner = "\n".join(server.banner)
    assert "runs live in memory only: they end with this process (--state DIR keeps them" in banner, banner
    assert "state in " not in banner
