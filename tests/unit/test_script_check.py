"""``check_body`` remembers bodies that passed: a body started again is not compiled twice, and
nothing that failed, nothing too long and no ``str`` subclass is ever answered from memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_workflow import WorkflowError, WorkflowErrorCode, _script


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the checks that reach the QuickJS checker; starts with nothing remembered."""
    count = [0]
    real = _script._checker

    def counting() -> object:
        count[0] += 1
        return real()

    monkeypatch.setattr(_script, "_passed", {})
    monkeypatch.setattr(_script, "_checker", counting)
    yield count


def test_a_body_that_passed_is_not_compiled_again(compiles: list[int]) -> None:
    _script.check_body("return 1")
    _script.check_body("return 1")
    assert compiles[0] == 1
    _script.check_body("return 2")
    assert compiles[0] == 2


@pytest.mark.parametrize("body", ["return (;", "}); globalThis.x = 1; (async () => {",
                                  "export const meta = {}; return 1", "return '\x00'"])
def test_a_refused_body_is_refused_every_time(compiles: list[int], body: str) -> None:
    for _ in range(2):
        with pytest.raises(WorkflowError) as caught:
            _script.check_body(body)
        assert caught.value.code is WorkflowErrorCode.SCRIPT_PARSE
    assert body not in _script._passed


def test_long_bodies_are_not_remembered(compiles: list[int]) -> None:
    body = "return 1;" + " " * _script._PASSED_MAX_CHARS
    _script.check_body(body)
    _script.check_body(body)
    assert compiles[0] == 2
    assert not _script._passed


def test_memory_is_bounded_and_drops_the_oldest(compiles: list[int]) -> None:
    bodies = [f"return {i}" for i in range(_script._PASSED_MAX + 5)]
    for body in bodies:
        _script.check_body(body)
    assert len(_script._passed) == _script._PASSED_MAX
    assert bodies[0] not in _script._passed
    assert bodies[-1] in _script._passed


def test_a_str_subclass_is_always_compiled(compiles: list[int]) -> None:
    class Sneaky(str):
        # found under a remembered body's hash, and equal to anything
        def __hash__(self) -> int:
            return hash("return 1")

        def __eq__(self, other: object) -> bool:
            return True

    _script.check_body("return 1")
    sneaky = Sneaky("}); globalThis.x = 1; (async () => {")
    with pytest.raises(WorkflowError):
        _script.check_body(sneaky)
    assert compiles[0] == 2
