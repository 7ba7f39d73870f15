"""Specification of the answers engine's records: what an answer's run reports, typed."""

from __future__ import annotations

import pytest

from course_lib import answers
from course_lib.answers import OUTCOME_STATUSES, Outcome, Verdict, check_status
from course_lib.exercises import get_exercise


def test_an_outcome_of_an_unknown_status_is_refused_with_the_statuses_it_may_have():
    with pytest.raises(ValueError, match=r"status must be one of \('done', 'timeout'"):
        Outcome("finished")


def test_an_outcome_keeps_its_messages_as_a_tuple_that_cannot_change():
    messages = [{"event": "load", "status": "ok"}]
    outcome = Outcome("done", messages)
    messages.append({"event": "done"})
    assert outcome.messages == ({"event": "load", "status": "ok"},)
    with pytest.raises(AttributeError):
        outcome.status = "timeout"  # type: ignore[misc]


@pytest.mark.parametrize("status", OUTCOME_STATUSES)
def test_every_outcome_status_is_judged_into_a_verdict(status):
    exercise = get_exercise("positional-encoding")
    prepared = answers.prepare(exercise, exercise.seed)
    verdict = answers.interpret(exercise, prepared, Outcome(status, exit="killed"), 10.0)
    assert isinstance(verdict, Verdict) and not verdict.ok


def test_check_status_names_the_allowed_values_and_what_came():
    with pytest.raises(ValueError, match=r"status must be one of \('a', 'b'\), got 'c'"):
        check_status("c", ("a", "b"))
