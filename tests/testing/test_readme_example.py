"""The README's "Testing your workflows" example, run as a user would: its code block saved as a test file in
an empty directory (no conftest, no pytest configuration: pytest-asyncio in its default strict mode) and run
by pytest in a fresh process, which finds the ``awsworld_env`` fixture through the package's entry point."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"<!-- testing-example:begin -->\s*```python\n(.*?)```\s*<!-- testing-example:end -->", re.S)


def test_the_readme_testing_example_passes_as_written(tmp_path: Path) -> None:
    found = BLOCK.search(README.read_text())
    assert found, "README.md lost its testing example (between the testing-example markers)"
    (tmp_path / "test_orders.py").write_text(found.group(1))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_orders.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout
