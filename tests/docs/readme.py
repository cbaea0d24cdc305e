"""The README's code blocks, copied from the example files the tests run.

GitHub shows the README as it is, without the docs' snippet includes, so its Python blocks are written out; each is
preceded by ``<!-- example: PATH[:SECTION] -->`` and must equal that file (or that section of it: the lines between
``# --8<-- [start:SECTION]`` and ``# --8<-- [end:SECTION]``, dedented, as the docs include it). ``python -m
tests.docs.readme`` rewrites them from the files; ``tests/docs/test_pages.py`` fails when one differs."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- example: (?P<ref>[^ ]+) -->\n```python\n)(?P<code>.*?)(```)", re.S)
MARKER = re.compile(r"^\s*# --8<-- \[(?:start|end):[\w-]+\]\s*$")


def section(ref: str) -> str:
    """The text the docs include for ``ref`` (``path`` or ``path:section``)."""
    path, _, name = ref.partition(":")
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines(keepends=True)
    if name:
        start = next(i for i, line in enumerate(lines) if line.strip() == f"# --8<-- [start:{name}]")
        end = next(i for i, line in enumerate(lines) if line.strip() == f"# --8<-- [end:{name}]")
        lines = lines[start + 1:end]
    return textwrap.dedent("".join(line for line in lines if not MARKER.match(line)))


def with_examples(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + section(m.group("ref")) + m.group(4), text)


def references(text: str) -> list[str]:
    return [m.group("ref") for m in BLOCK.finditer(text)]


if __name__ == "__main__":
    README.write_text(with_examples(README.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"{README}: {len(references(README.read_text(encoding='utf-8')))} example blocks rewritten",
          file=sys.stderr)
