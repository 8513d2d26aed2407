"""The wheels workflow cannot run here; at least it must be valid YAML that
matches GitHub's workflow schema (yamllint, and check-jsonschema's vendored
schema, both from PyPI, offline)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "wheels.yml"


def run(tool: str, *args: str) -> None:
    # The tools sit beside the interpreter running the tests, even when its environment is not activated.
    exe = shutil.which(tool, path=str(Path(sys.executable).parent)) or shutil.which(tool)
    if exe is None:
        pytest.skip(f"{tool} is not installed (it comes with the dev extra)")
    if not WORKFLOW.is_file():
        pytest.skip(f"{WORKFLOW} is not in this checkout")
    done = subprocess.run([exe, *args], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_workflow_is_clean_yaml() -> None:
    run("yamllint", "-c", str(REPO / ".yamllint.yml"), str(WORKFLOW))


def test_workflow_matches_the_github_schema() -> None:
    run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(WORKFLOW))


def test_workflow_builds_every_platform() -> None:
    if not WORKFLOW.is_file():
        pytest.skip("workflow not in this checkout")
    text = WORKFLOW.read_text(encoding="utf-8")
    for needle in ("windows-latest", "ubuntu-24.04-arm", "macos-14", "PyO3/maturin-action", "command: sdist"):
        assert needle in text
