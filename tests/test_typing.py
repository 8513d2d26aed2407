"""The package and the README's examples pass `mypy --strict`: a user who
type-checks their agent can import the public names and pass the official
SDKs' typed messages without casts."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (it is in the dev extra)")

REPO = Path(__file__).resolve().parent.parent

# Names the README's snippets use without defining them, typed as a user's code would have them.
PREAMBLE = '''\
from typing import Any

from openai.types.chat import ChatCompletionMessageParam

big_text: str = ""
text: str = ""
ids: list[int] = []
item_id: str = ""
tool_call: dict[str, Any] = {}
messages: list[ChatCompletionMessageParam] = []
system: str = ""
model: Any = None
tools: Any = None
prompt: Any = None
agent: Any = None
create_agent: Any = None
create_react_agent: Any = None
Runner: Any = None
SQLiteSession: Any = None
'''


def readme_snippets() -> list[str]:
    """The README's Python blocks, cut where a paragraph starts with its own
    imports (one block shows several frameworks' adapters side by side)."""
    blocks = re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(encoding="utf-8"), re.S | re.M)
    assert len(blocks) >= 4, "the README's Python examples were not found"
    snippets: list[list[str]] = []
    for block in blocks:
        snippets.append([])
        for paragraph in block.strip().split("\n\n"):
            code = [line for line in snippets[-1] if not line.startswith(("from ", "import "))]
            if paragraph.startswith(("from ", "import ")) and code:
                snippets.append([])
            snippets[-1].extend(paragraph.splitlines())
    return ["\n".join(lines) for lines in snippets]


def readme_script() -> str:
    """Each snippet in its own async function: `await` is valid and each
    snippet's names stay its own."""
    functions = [
        f"async def example_{n}() -> None:\n" + textwrap.indent(snippet, "    ") + "\n"
        for n, snippet in enumerate(readme_snippets())
    ]
    return "\n\n".join([PREAMBLE, *functions])


def mypy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--hide-error-context", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900,
    )


def test_the_script_holds_every_readme_example() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    script = readme_script()
    blocks = re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)
    assert len(blocks) == readme.count("```python"), "a Python block of the README was not read"
    for line in (line.strip() for block in blocks for line in block.splitlines()):
        assert line in script, f"README line missing from the checked script: {line}"
    # The SDK's typed messages reach `optimize`: `messages` is list[ChatCompletionMessageParam].
    assert "messages: list[ChatCompletionMessageParam]" in script and ".optimize(messages" in script


def test_the_readme_examples_pass_mypy_strict(tmp_path: Path) -> None:
    script = tmp_path / "readme_examples.py"
    script.write_text(readme_script(), encoding="utf-8")
    done = mypy(str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_package_passes_mypy_strict() -> None:
    done = mypy(cwd=REPO)  # files and options from pyproject.toml
    assert done.returncode == 0, done.stdout + done.stderr
