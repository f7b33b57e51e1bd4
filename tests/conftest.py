"""Shared fixtures: every async test runs on trio and on asyncio (debug mode)."""

from __future__ import annotations

import pytest
from hypothesis import settings

pytest.register_assert_rewrite("_support")

# Hypothesis' per-example deadline (200 ms) measures the machine's load as much as the code: on
# a busy two-core machine an example that normally takes 70 ms took 250 ms. The properties are
# about behaviour; speed lives in benchmarks/.
settings.register_profile("project", deadline=None)
settings.load_profile("project")


@pytest.fixture(
    params=[
        pytest.param("trio", id="trio"),
        pytest.param(("asyncio", {"debug": True}), id="asyncio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param
