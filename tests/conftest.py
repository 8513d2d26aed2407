"""Shared fixtures. Tests are hermetic: nothing here reads outside the repo or tmp_path."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a test that takes more than a few seconds")
