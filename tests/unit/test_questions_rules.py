"""The rules every answerer of a question shares (``dsh_workflow._questions``): timeouts,
answer checks, journal keys and the JSON form of a question."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import Question, WorkflowError, WorkflowErrorCode
from dsh_workflow._questions import (
    MAX_TIMEOUT_S,
    PendingQuestions,
    answer_schema,
    check_answer,
    parse_timeout,
    question_data,
    question_from_data,
    question_key,
)


def ask(**fields: object) -> Question:
    kind = fields.pop("kind", "ask")
    schema = fields.pop("script_schema", None)
    choices = fields.get("choices")
    multiple = bool(fields.get("multiple", False))
    return Question(qid="q1", seq=1, kind=kind,  # type: ignore[arg-type]
                    question=str(fields.pop("question", "What?")),
                    schema=answer_schema(kind, schema, choices, multiple),  # type: ignore[arg-type]
                    **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "seconds"), [
    (30, 30.0), (0.5, 0.5), ("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("24h", 86400.0),
    ("7d", 604800.0), (" 2 h ", 7200.0), ("250ms", 0.25), ("1.5h", 5400.0)])
def test_timeouts_are_seconds_or_durations(text: object, seconds: float) -> None:
    assert parse_timeout(text) == seconds


@pytest.mark.parametrize("text", [0, -1, True, None, "", "soon", "5w", "1e3", float("nan"),
                                  float("inf"), MAX_TIMEOUT_S + 1, [30]])
def test_bad_timeouts_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match="timeout must be"):
        parse_timeout(text)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["s", "m", "h", "d", ""]))
def test_every_whole_duration_parses_to_its_seconds(amount: int, unit: str) -> None:
    factor = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 1}[unit]
    if amount * factor > MAX_TIMEOUT_S:
        with pytest.raises(ValueError):
            parse_timeout(f"{amount}{unit}")
    else:
        assert parse_timeout(f"{amount}{unit}") == amount * factor


def test_a_checkpoint_takes_a_boolean_only() -> None:
    question = ask(kind="checkpoint")
    assert check_answer(question, True) is True and check_answer(question, False) is False
    for wrong in (1, 0, "true", None, [True]):
        with pytest.raises(WorkflowError) as refused:
            check_answer(question, wrong)
        assert refused.value.code is WorkflowErrorCode.INVALID_ARGUMENT
        assert "q1" in refused.value.message


def test_choices_take_one_or_several_distinct_choices() -> None:
    one = ask(choices=("a", "b"))
    assert check_answer(one, "b") == "b"
    wrongs: list[object] = ["c", ["a"], 1, None]
    for wrong in wrongs:
        with pytest.raises(WorkflowError):
            check_answer(one, wrong)
    many = ask(choices=("a", "b"), multiple=True)
    assert check_answer(many, ["b", "a"]) == ["b", "a"] and check_answer(many, []) == []
    wrongs = ["a", ["a", "a"], ["c"], [1]]
    for wrong in wrongs:
        with pytest.raises(WorkflowError):
            check_answer(many, wrong)


def test_a_plain_ask_takes_text_and_a_schema_ask_a_valid_value() -> None:
    assert check_answer(ask(), "free text") == "free text"
    with pytest.raises(WorkflowError, match="text"):
        check_answer(ask(), 3)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
              "required": ["n"]}
    shaped = ask(script_schema=schema)
    assert check_answer(shaped, {"n": 2}) == {"n": 2}
    for wrong in ({"n": 0}, {}, "n", {"n": "2"}):
        with pytest.raises(WorkflowError, match="/"):
            check_answer(shaped, wrong)
    with pytest.raises(WorkflowError, match="not JSON data"):
        check_answer(shaped, {"n": float("nan")})


def test_the_key_is_the_question_not_its_label_phase_default_or_deadline() -> None:
    base = ask(choices=("a", "b"), details="why")
    same = replace(base, qid="q9", seq=7, label="shown", phase="P", default="a",
                   has_default=True, deadline=datetime(2030, 1, 1, tzinfo=UTC))
    assert question_key(base) == question_key(same)
    for other in (replace(base, question="Other?"), replace(base, details=None),
                  replace(base, choices=("a", "c")), replace(base, multiple=True),
                  replace(base, kind="checkpoint")):
        assert question_key(other) != question_key(base)


def test_a_question_survives_its_json_form() -> None:
    question = replace(ask(choices=("a", "b"), details="d", label="l"), has_default=True,
                       default="a", deadline=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert question_from_data(question_data(question)) == question


async def _awaited(pending: PendingQuestions) -> PendingQuestions:
    return await pending


def test_pending_is_a_list_that_may_be_awaited() -> None:
    import anyio

    pending = PendingQuestions([ask()])
    assert pending == [ask()]
    assert anyio.run(_awaited, pending) is pending
