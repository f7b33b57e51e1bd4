"""Shared fixtures: every async test runs on trio and on asyncio (debug mode)."""

from __future__ import annotations

import compileall
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

pytest.register_assert_rewrite("_support")

# Hypothesis' per-example deadline (200 ms) measures the machine's load as much as the code: on
# a busy two-core machine an example that normally takes 70 ms took 250 ms. The properties are
# about behaviour; speed lives in benchmarks/.
settings.register_profile("project", deadline=None)
settings.load_profile("project")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the checkout's package once, in the controlling process, before any worker
    starts. The CLI and sandbox processes the tests start import it from the checkout, and
    where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``, the sandbox's ``-B``) each of
    those thousands of processes would otherwise compile every module it imports again."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(Path(__file__).resolve().parents[1] / "dsh_workflow", quiet=1)


@pytest.fixture(
    params=[
        pytest.param("trio", id="trio"),
        pytest.param(("asyncio", {"debug": True}), id="asyncio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture(autouse=True, scope="session")
def _private_config_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The record key that durable runs make (docs/providers.md) goes to a configuration
    folder of the test session, inherited by the CLI processes tests start, never the user's."""
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config"))
    yield
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` (tens of seconds each) run first: on two workers a long test
    that starts last keeps the other worker idle until it ends. The rest keep their order."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
