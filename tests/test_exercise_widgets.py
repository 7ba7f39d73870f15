"""The exercise widgets: core ipywidgets only, working in ipywidgets 7.7 (Colab) and 8."""

from __future__ import annotations

import re

import ipywidgets as widgets
import pytest

from conftest import all_widgets, render_in_kernel
from course_lib._html import text_html
from course_lib.exercises import Question, ask, evaluate, get_exercise, progress
from course_lib.exercises._display import result_html, result_panel

CORE_WIDGETS_IN_7_7 = {
    "VBox",
    "HBox",
    "HTML",
    "HTMLMath",
    "Button",
    "RadioButtons",
    "Text",
    "Layout",
}


def row_of(exercise_id: str) -> dict:
    """The progress row of one exercise (rows follow the course's reading order)."""
    return next(row for row in progress().rows if row["id"] == exercise_id)


def wrong_encoding(max_len, d_model):
    import torch

    return torch.zeros(max_len, d_model)


def test_the_result_panel_uses_core_widgets_of_ipywidgets_7_7_only():
    result = evaluate("positional-encoding", wrong_encoding)
    panel = result_panel(result, get_exercise("positional-encoding"), lambda: "hint")
    used = {type(w).__name__ for w in all_widgets(panel)}
    assert used <= CORE_WIDGETS_IN_7_7


def test_the_result_panel_shows_each_check_and_escapes_messages():
    result = evaluate("positional-encoding", wrong_encoding)
    text = result_html(result, get_exercise("positional-encoding"))
    assert "<b>FAILED</b>: 1 of 8 checks passed, 0/4 points" in text
    assert text.count("<tr>") == len(result.checks)
    assert "max_len=50, d_model=16" in text


def test_the_not_attempted_panel_tells_the_student_what_to_do():
    result = evaluate("positional-encoding", None)
    text = result_html(result, get_exercise("positional-encoding"))
    assert re.search(
        r"Not attempted yet: replace <code[^>]*>raise NotImplementedError</code>", text
    )


def test_the_hint_button_reveals_the_next_hint():
    revealed = []
    result = evaluate("positional-encoding", wrong_encoding)
    panel = result_panel(result, get_exercise("positional-encoding"), lambda: revealed.append(1)
                         or f"hint {len(revealed)}")  # fmt: skip
    button = next(w for w in all_widgets(panel) if isinstance(w, widgets.Button))
    button.click()
    button.click()
    assert panel.children[-1].value == "hint 2"


def test_a_choice_question_starts_unanswered_and_records_the_checked_answer():
    question = ask("pe-doubled-index-bug")
    assert isinstance(question, Question) and isinstance(question.answer, widgets.RadioButtons)
    assert question.answer.value is None and question.feedback.value == ""
    question.answer.value = "c"
    question.button.click()
    assert "FAILED" in question.feedback.value and "No: the paper puts sines" in (
        question.feedback.value
    )
    question.answer.value = "b"
    question.button.click()
    assert question.result.passed and "PASSED" in question.feedback.value
    row = next(r for r in progress().rows if r["id"] == "pe-doubled-index-bug")
    assert (row["status"], row["attempts"]) == ("passed", 2)


def test_a_choice_question_lists_the_option_texts_and_its_buttons_carry_only_the_keys():
    exercise = get_exercise("add-norm-order")
    question = ask("add-norm-order")
    listing = question.children[1]
    assert isinstance(listing, widgets.HTMLMath)
    for option in exercise.options:
        assert f"<b>({option.key})</b> {text_html(option.text)}" in listing.value
    labels = [label for label, _ in question.answer.options]
    assert labels == [f"({option.key})" for option in exercise.options]


def test_a_value_question_reads_the_numbers_typed_in():
    question = ask("pe-worked-example")
    assert isinstance(question.answer, widgets.Text)
    question.answer.value = "0.909, -0.416, 0.020, 1.000"
    question.button.click()
    assert question.result.passed


@pytest.mark.parametrize(
    "exercise_id, placeholder",
    [("mha-parameter-count", "one number"), ("pe-worked-example", "4 numbers separated by commas")],
)
def test_the_answer_box_says_how_many_numbers_it_takes(exercise_id, placeholder):
    assert ask(exercise_id).answer.placeholder == placeholder


def test_pressing_check_with_nothing_chosen_records_nothing():
    question = ask("pe-doubled-index-bug")
    question.button.click()
    assert question.result.status == "not attempted"
    assert row_of("pe-doubled-index-bug")["attempts"] == 0


def test_code_exercises_have_no_question_widget():
    with pytest.raises(TypeError, match="call check\\('positional-encoding', your_function\\)"):
        ask("positional-encoding")


# ----------------------------------------------------------------------------- in a kernel

KERNEL_CELLS = [
    "import ipywidgets, torch\nprint(ipywidgets.__version__)",
    "from course_lib.exercises import ask, check, hint",
    "def zeros(max_len, d_model):\n    return torch.zeros(max_len, d_model)",
    'check("positional-encoding", zeros)',
    'question = ask("pe-doubled-index-bug")\nquestion',
    'question.answer.value = "b"\nquestion.button.click()\nprint(question.result.status)',
    'hint("positional-encoding")',
]


def test_the_panels_render_in_a_kernel(tmp_path, widget_kernel):
    rendered = render_in_kernel(KERNEL_CELLS, tmp_path, widget_kernel)
    assert len(rendered.views) == 3  # the check panel, the question, the hints
    assert {"VBoxModel", "HTMLMathModel", "ButtonModel", "RadioButtonsModel"} <= (
        rendered.model_names()
    )
    html = rendered.values()
    assert "<b>FAILED</b>: 1 of 8 checks passed" in html  # the check panel
    assert "<b>PASSED</b>: 1 of 1 checks passed" in html  # the answered question
    assert "Hints for positional-encoding" in html
    printed = "".join(o.get("text", "") for o in rendered.outputs)
    assert "passed\n" in printed
