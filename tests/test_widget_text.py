"""What the widgets write: maths that renders, answer boxes that say what they take, colours
readable in light and dark themes, and layouts that fit a phone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import ipywidgets as widgets
import pytest

from conftest import ROOT, all_widgets
from course_lib._html import (
    HUES,
    TEXT_COLOURS,
    block,
    color,
    contrast_ratio,
    mixed,
    rgb,
    text_html,
)
from course_lib._layout import FULL_WIDTH, control_row, fitting
from course_lib.exercises import (
    ChoiceExercise,
    CodeExercise,
    Question,
    ValueExercise,
    ask,
    evaluate,
    get_exercise,
    hint,
    list_exercises,
    progress,
)
from course_lib.exercises._display import hints_html, options_html, result_html

LIBRARY = ROOT / "course_lib"
WIDGET_MODULES = [
    *sorted((LIBRARY / "explorers").glob("*.py")),
    LIBRARY / "exercises" / "_display.py",
    LIBRARY / "exercises" / "_student.py",
]

# ------------------------------------------------------------------------------------ maths

# Maths written as plain text: a superscript (W^Q, 10000^0), a subscripted symbol (d_model,
# W_1, k_1), a square root, a Greek letter or × written as a character or "x", a Python power.
BARE_MATHS = re.compile(
    r"\w\^|\b[A-Za-z]_\{|\b[dW]_\w+|\b[A-Za-z]_[a-z0-9]\b|\bsqrt\b|√|[α-ωε]"
    r"|\b\d+ x \d+\b|\*\*|\bsoftmax\(|\beps_\w+|\|V\||-log p\("
)


def bare_maths(text: str) -> list[str]:
    """The maths tokens of ``text`` outside ``$...$`` and outside `code`."""
    outside = re.sub(r"`[^`]*`", " ", re.sub(r"\$[^$]+\$", " ", text))
    return BARE_MATHS.findall(outside)


def shown_texts(exercise) -> dict[str, str]:
    """Every course text a widget of ``exercise`` shows: title, question, options, feedback,
    hints."""
    texts = {"title": exercise.title}
    texts |= {f"hint {n}": text for n, text in enumerate(exercise.hints, start=1)}
    if isinstance(exercise, ChoiceExercise | ValueExercise):
        texts["question"] = exercise.question
    if isinstance(exercise, ChoiceExercise):
        for option in exercise.options:
            texts[f"option {option.key}"] = option.text
            texts[f"feedback {option.key}"] = option.feedback
    if isinstance(exercise, ValueExercise):
        texts |= {f"mistake {n}": m.feedback for n, m in enumerate(exercise.mistakes, start=1)}
    return texts


def widget_descriptions() -> list[tuple[str, str]]:
    """Every constant ``description=`` of a widget in course_lib's widget modules."""
    found = []
    for path in WIDGET_MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "description":
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    found.append((f"{path.name}:{node.value.lineno}", node.value.value))
    return found


@pytest.mark.parametrize(
    "text",
    [
        "W^Q",
        "d_model = 4",
        "sqrt(d_k)",
        "224 x 224",
        "10000 ** (-2i / 8)",
        "ε_ls",
        "k_1",
        "eps_ls = 0.1",
        "1/|V|",
        "-log p(x)",
    ],
)
def test_the_detector_finds_maths_written_as_plain_text(text):
    assert bare_maths(text)


@pytest.mark.parametrize(
    "text", ["$W^Q$", "$d_{model} = 4$", "`x.view(batch, L, num_heads, d_head)`", "a 2 x plan"]
)
def test_the_detector_accepts_delimited_maths_and_code(text):
    assert bare_maths(text) == []


@pytest.mark.parametrize("exercise", list_exercises(), ids=lambda exercise: exercise.id)
def test_every_exercise_text_writes_its_maths_between_dollars(exercise):
    bare = {
        name: found for name, text in shown_texts(exercise).items() if (found := bare_maths(text))
    }
    assert not bare, f"{exercise.id}: maths outside $...$ in {bare}"


def test_every_widget_description_writes_its_maths_between_dollars():
    descriptions = widget_descriptions()
    assert len(descriptions) > 20  # the scan reaches the explorers' controls
    bare = {where: text for where, text in descriptions if bare_maths(text)}
    assert not bare, f"widget descriptions with maths outside $...$: {bare}"


def test_maths_and_code_in_a_text_become_html_for_mathjax():
    assert text_html("the `x < y` of $W^Q$ & <b>") == (
        "the <code style='color: inherit; background: rgba(127, 127, 127, 0.18); "
        "padding: 0 2px;'>x &lt; y</code> of $W^Q$ &amp; &lt;b&gt;"
    )


def test_text_html_refuses_what_is_not_a_text():
    with pytest.raises(TypeError, match="expected a text, got int"):
        text_html(3)


def test_a_question_shows_its_prompt_options_and_feedback_in_htmlmath():
    question = ask("add-norm-order")
    prompt, listing = question.children[:2]
    assert isinstance(prompt, widgets.HTMLMath) and isinstance(listing, widgets.HTMLMath)
    assert isinstance(question.feedback, widgets.HTMLMath)
    assert "$\\mathrm{LayerNorm}" not in listing.value  # the feedback waits for a check
    question.answer.value = "a"
    question.button.click()
    assert "$\\mathrm{LayerNorm}(x + \\mathrm{Sublayer}(x))$" in question.feedback.value


def test_the_hints_and_the_check_panel_are_htmlmath():
    result = evaluate("mha-parameter-count", 787968)
    assert "$W^O$ is missing" in result_html(result, get_exercise("mha-parameter-count"))
    from course_lib.exercises._display import result_panel

    panel = result_panel(result, get_exercise("mha-parameter-count"), lambda: "")
    assert isinstance(panel.children[0], widgets.HTMLMath)
    assert isinstance(panel.children[-1], widgets.HTMLMath)  # where the hints appear
    assert "$W_m^Q$" in hint("mha-parameter-count")._repr_html_()


# ------------------------------------------------------------------------------ answer boxes


def numbers_expected(exercise: ValueExercise) -> list[float]:
    return [float(v) for v in exercise.expected().reshape(-1)]


VALUE_EXERCISES = [e for e in list_exercises() if isinstance(e, ValueExercise)]


@pytest.mark.parametrize("exercise", VALUE_EXERCISES, ids=lambda exercise: exercise.id)
def test_every_answer_box_says_how_many_numbers_its_exercise_takes(exercise):
    count = len(numbers_expected(exercise))
    wanted = "one number" if count == 1 else f"{count} numbers separated by commas"
    assert ask(exercise.id).answer.placeholder == wanted


@pytest.mark.parametrize("exercise", VALUE_EXERCISES, ids=lambda exercise: exercise.id)
def test_an_answer_typed_as_the_placeholder_says_is_accepted(exercise):
    question = ask(exercise.id)
    question.answer.value = ", ".join(f"{v:.10g}" for v in numbers_expected(exercise))
    assert question.submit_answer().passed


@pytest.mark.parametrize(
    "exercise",
    [e for e in list_exercises() if isinstance(e, ChoiceExercise)],
    ids=lambda exercise: exercise.id,
)
def test_every_choice_question_offers_exactly_its_options_keys(exercise):
    answer = ask(exercise.id).answer
    assert isinstance(answer, widgets.RadioButtons)
    assert [value for _, value in answer.options] == exercise.keys()


def test_code_exercises_take_a_function_not_an_answer_box():
    code = [e for e in list_exercises() if isinstance(e, CodeExercise)]
    assert code
    for exercise in code:
        with pytest.raises(TypeError, match="write the function"):
            Question(exercise)


# ----------------------------------------------------------------------------------- colours


@pytest.mark.parametrize("name", sorted(HUES))
@pytest.mark.parametrize("theme", sorted(TEXT_COLOURS))
def test_each_status_colour_reaches_4_5_to_1_in_every_theme(name, theme):
    text, background = TEXT_COLOURS[theme]
    assert contrast_ratio(rgb(mixed(name, text)), rgb(background)) >= 4.5


def test_status_colours_keep_their_hue_in_light_and_dark_themes():
    for text in ("#222832", "#ced6dd"):  # the book's text, light and dark
        red, green = mixed("fail", text), mixed("pass", text)
        assert int(red[1:3], 16) > int(red[3:5], 16) and int(green[3:5], 16) > int(green[1:3], 16)


def test_a_status_colour_is_its_hue_mixed_with_the_text_colour():
    assert color("fail") == "color-mix(in srgb, #d1242f 55%, currentColor)"
    assert mixed("fail", "#000000") == "#73141a"


def test_an_unknown_status_colour_is_refused_with_the_names_there_are():
    with pytest.raises(ValueError, match="no status colour 'red'; choose one of pass, fail"):
        color("red")


# A colour the HTML sets: a colour property (color, background, border...) whose value holds a
# hex colour, rgb() or a colour name, once the status colours (a hue mixed with the text
# colour) and the neutral grey tint of inline code are set aside.
CSS_COLOUR_PROPERTY = re.compile(
    r"(?<![-\w])(?:color|background(?:-color)?|border(?:-\w+)?)\s*:\s*([^;'\"]*)"
)
COLOUR_VALUE = re.compile(
    r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\b(?:black|white|red|green|gr[ae]y|blue)\b"
)


def fixed_colours(html: str) -> list[str]:
    html = html.replace("rgba(127, 127, 127, 0.18)", "tint")
    html = re.sub(r"color-mix\(in srgb, #[0-9a-fA-F]{6} \d+%, currentColor\)", "mix", html)
    return [
        m.group(0) for m in CSS_COLOUR_PROPERTY.finditer(html) if COLOUR_VALUE.search(m.group(1))
    ]


def test_the_fixed_colour_detector_finds_light_only_colours():
    assert fixed_colours("<div style='color:#1a7f37'>") and fixed_colours(
        "<td style='background: white'>"
    )
    assert fixed_colours("<div style='color: color-mix(in srgb, #d1242f 55%, white)'>")
    assert not fixed_colours(f"<div style='color:{color('pass')}'>")


def rendered_html() -> dict[str, str]:
    """The HTML of every kind of panel the exercises show."""
    code = get_exercise("positional-encoding")
    value = get_exercise("mha-parameter-count")
    return {
        "failed": result_html(evaluate(value.id, 787968), value),
        "passed": result_html(evaluate(value.id, 1050624), value),
        "not attempted": result_html(evaluate(code.id, None), code),
        "hints": hints_html(value, 2),
        "options": options_html([("a", "one"), ("b", "two")]),
        "progress": progress()._repr_html_(),
    }


PANEL_KINDS = ["failed", "hints", "not attempted", "options", "passed", "progress"]


# The panels are made inside the test, with the test's own progress folder: made while the tests
# are collected, the answers they check would land in the session's folder, where the chapters'
# progress tables (run by nbval later) would show them.
@pytest.mark.parametrize("kind", PANEL_KINDS)
def test_the_exercise_panels_use_no_fixed_light_colour(kind):
    assert fixed_colours(rendered_html()[kind]) == []


@pytest.mark.parametrize("path", WIDGET_MODULES, ids=lambda path: path.name)
def test_the_widget_modules_write_no_fixed_colour_into_html(path):
    assert fixed_colours(path.read_text(encoding="utf-8")) == []


def test_the_panels_scroll_sideways_rather_than_spill_out_of_a_narrow_page():
    value = get_exercise("mha-parameter-count")
    for html in (result_html(evaluate(value.id, 787968), value), hints_html(value, 1)):
        assert html.startswith("<div class='course-lib' style='overflow-x: auto'>")
    assert block("x").endswith(">x</div>")


def test_inline_code_takes_the_pages_text_colour():
    code = get_exercise("positional-encoding")
    stub = result_html(evaluate(code.id, None), code)
    assert "<code style='color: inherit;" in stub
    assert "<code style='color: inherit;" in progress()._repr_html_()


# ------------------------------------------------------------------------------------ layout


def test_no_widget_module_gives_a_control_a_fixed_pixel_width():
    for path in WIDGET_MODULES:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bwidth=\"\d+px\"", text), f"{path.name} fixes a width in px"


@pytest.mark.parametrize("exercise", VALUE_EXERCISES[:1], ids=lambda exercise: exercise.id)
def test_the_answer_box_fills_a_narrow_page_and_stops_at_420_px(exercise):
    layout = ask(exercise.id).answer.layout
    assert (layout.width, layout.max_width) == (FULL_WIDTH, "420px")


def test_a_row_of_controls_wraps_where_the_page_is_too_narrow():
    row = control_row([widgets.IntSlider(), widgets.IntSlider()])
    assert row.layout.flex_flow == "row wrap"


def test_a_fitting_layout_needs_a_css_width():
    with pytest.raises(ValueError, match="max_width is a CSS width such as '340px', got ''"):
        fitting("")


def test_the_explorers_rows_wrap():
    from course_lib.explorers.at_work import RecipeExplorer

    rows = [w for w in all_widgets(RecipeExplorer()) if isinstance(w, widgets.HBox)]
    assert rows and all(row.layout.flex_flow == "row wrap" for row in rows)


def test_the_widget_modules_are_the_ones_there_are():
    names = {path.name for path in WIDGET_MODULES}
    assert {"base.py", "foundations.py", "attention.py", "building.py", "at_work.py"} <= names
    assert all(Path(path).is_file() for path in WIDGET_MODULES)


@pytest.mark.parametrize(
    "exercise_id, heading",
    [("add-norm-order", "<b>Which order is the paper's?</b>"), ("mha-parameter-count",
     "<b>Count the parameters of multi-head attention.</b>")],
)  # fmt: skip
def test_a_questions_title_ends_with_one_mark(exercise_id, heading):
    assert ask(exercise_id).children[0].value.startswith(heading.replace("'", "&#x27;"))
