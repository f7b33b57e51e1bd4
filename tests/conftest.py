"""Shared fixtures: every async test runs on trio and on asyncio (debug mode)."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("_support")


@pytest.fixture(
    params=[
        pytest.param("trio", id="trio"),
        pytest.param(("asyncio", {"debug": True}), id="asyncio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param
