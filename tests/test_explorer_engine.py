"""Specification of the explorers' engine (course_lib/explorers/base.py): one explorer, live in
a kernel and as stored states linked to its controls in the book."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest
from explorer_checks import assert_book_matches_live

from course_lib.explorers.base import (
    BOOK_VARIABLE,
    Explorer,
    book_mode,
    figure_part,
    menu,
    slider,
    switch,
    text_box,
    text_part,
)
from course_lib.plotting import figure_output


def read_count(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"type a whole number of words, got {text!r}")
    return int(text)


def words(sentence: str) -> list[tuple[str, int]]:
    return [(word, index) for index, word in enumerate(sentence.split())]


class Toy(Explorer):
    """A sentence, a word of it, a size and a switch; a text for each and a figure."""

    def __init__(self, *, book: bool | None = None, offer=None, calls=None) -> None:
        self.calls = [] if calls is None else calls
        controls = [
            text_box("sentence", "sentence", "a b c", ["a b c", "d e", "f g h i"]),
            menu("word", "word", 0, words, depends=["sentence"]),
            slider("size", "size", 2, [1, 2, 3],
                   lambda: widgets.IntSlider(value=2, min=1, max=9, description="size")),
            switch("loud", "loud", False),
            text_box("count", "count", "3", ["1", "3", "5"], read=read_count),
        ]  # fmt: skip
        parts = [
            text_part("readout", ["sentence", "word", "loud"], self.describe),
            text_part("sized", ["size", "count"], lambda size, count: f"{size}x{count}"),
            figure_part("figure", ["size"], self.draw),
        ]
        rows = [["sentence"], ["word", "size"], ["loud", "count"]]
        super().__init__(controls, parts, rows, book=book, offer=offer)

    def describe(self, sentence: str, word: int, loud: bool) -> str:
        self.calls.append(("readout", sentence, word, loud))
        chosen = sentence.split()[word]
        return f"<b>{chosen.upper() if loud else chosen}</b> of $n = {len(sentence.split())}$"

    def draw(self, size: int):
        self.calls.append(("figure", size))
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.bar(range(size), range(1, size + 1))
        ax.set_title(f"{size} bars")
        fig.tight_layout()
        return fig


def test_the_book_mode_follows_the_environment_variable(monkeypatch):
    monkeypatch.delenv(BOOK_VARIABLE, raising=False)
    assert not book_mode() and not Toy().book
    monkeypatch.setenv(BOOK_VARIABLE, "book")
    assert book_mode() and Toy().book


def test_live_controls_are_the_kernels_own_widgets():
    toy = Toy(book=False)
    assert isinstance(toy.sentence, widgets.Text) and isinstance(toy.word, widgets.Dropdown)
    assert isinstance(toy.size, widgets.IntSlider) and isinstance(toy.loud, widgets.Checkbox)
    assert toy.readout.value == "<b>a</b> of $n = 3$"
    assert toy.sized.value == "2x3"


def test_a_live_change_redraws_only_the_parts_that_depend_on_it():
    toy = Toy(book=False)
    toy.calls.clear()
    toy.loud.value = True
    assert toy.calls == [("readout", "a b c", 0, True)]
    assert toy.readout.value == "<b>A</b> of $n = 3$"


def test_a_live_menu_follows_the_control_its_options_depend_on():
    toy = Toy(book=False)
    toy.word.value = 2
    toy.sentence.value = "d e"
    assert [label for label, _ in toy.word.options] == ["d", "e"]
    assert toy.readout.value == "<b>e</b> of $n = 2$"  # the index kept where it fits


def test_a_text_that_cannot_be_read_shows_a_message_and_keeps_the_parts():
    toy = Toy(book=False)
    toy.count.value = "three"
    assert "type a whole number of words, got &#x27;three&#x27;" in toy.message.value
    assert toy.message.layout.display is None
    assert toy.sized.value == "2x3"
    toy.count.value = "4"
    assert toy.message.layout.display == "none" and toy.sized.value == "2x4"


def test_set_changes_several_controls_and_redraws_once():
    toy = Toy(book=False)
    toy.calls.clear()
    toy.set(sentence="f g h i", word=3, size=1)
    assert toy.readout.value == "<b>i</b> of $n = 4$"
    assert [call[0] for call in toy.calls] == ["readout", "figure"]


def test_set_refuses_an_unknown_control():
    with pytest.raises(ValueError, match=r"no controls \['colour'\]; the controls are"):
        Toy(book=False).set(colour="red")


def test_the_book_stores_each_part_once_per_combination_of_what_it_depends_on():
    toy = Toy(book=True)
    words = 3 + 2 + 4  # the words of the three prepared sentences
    assert len(toy.states["readout"]) == words * 2  # x loud off/on
    assert len(toy.states["sized"]) == 3 * 3
    assert len(toy.states["figure"]) == 3
    assert sorted(call[1] for call in toy.calls if call[0] == "figure") == [1, 2, 3]


def test_the_book_turns_a_text_box_into_a_menu_of_the_prepared_texts():
    toy = Toy(book=True)
    sentence = toy.controls["sentence"]
    assert isinstance(sentence, widgets.Dropdown)
    assert [value for _, value in sentence.options] == ["a b c", "d e", "f g h i"]
    assert isinstance(toy.controls["size"], widgets.SelectionSlider)
    assert isinstance(toy.controls["loud"], widgets.ToggleButtons)
    assert [label for label, _ in toy.controls["loud"].options] == ["off", "on"]


def test_a_dependent_menu_has_one_widget_per_value_of_its_parent_in_a_linked_stack():
    toy = Toy(book=True)
    words = toy.children[1].children[0]
    assert isinstance(words, widgets.Stack)
    assert [[label for label, _ in menu.options] for menu in words.children] == [
        ["a", "b", "c"], ["d", "e"], ["f", "g", "h", "i"],
    ]  # fmt: skip
    links = [w for w in toy._book.links if w.target == (words, "selected_index")]
    assert [link.source for link in links] == [(toy.controls["sentence"], "index")]


def test_every_stack_of_a_part_is_linked_to_the_control_of_its_level():
    toy = Toy(book=True)
    root = toy.parts["sized"]
    assert isinstance(root, widgets.Stack) and len(root.children) == 3
    targets = {id(link.target[0]): link.source[0] for link in toy._book.links}
    assert targets[id(root)] is toy.controls["size"]
    for child in root.children:
        assert targets[id(child)] is toy.controls["count"]
        assert all(isinstance(leaf, widgets.HTMLMath) for leaf in child.children)


def test_the_book_starts_every_control_and_stack_at_the_first_values():
    toy = Toy(book=True)
    assert toy.controls["size"].value == 2 and toy.controls["count"].value == "3"
    assert toy.parts["sized"].selected_index == 1
    assert toy.parts["sized"].children[1].selected_index == 1
    assert toy.parts["sized"].children[1].children[1].value == "2x3"


def test_stored_states_carry_classes_that_name_their_part_and_control_indices():
    toy = Toy(book=True)
    leaf = toy.states["readout"][(2, 3, 1)]
    assert leaf.value == "<b>I</b> of $n = 4$"
    assert set(leaf._dom_classes) == {
        "course-state", "course-part-readout", "course-key-readout--sentence-2--word-3--loud-1",
    }  # fmt: skip
    assert "course-explorer" in toy._dom_classes
    assert "course-control-size" in toy.controls["size"]._dom_classes


def test_book_leaves_share_one_layout_and_one_style():
    toy = Toy(book=True)
    leaves = list(toy.states["readout"].values())
    assert len({id(leaf.layout) for leaf in leaves}) == 1
    assert len({id(leaf.style) for leaf in leaves}) == 1


def test_a_figure_part_stores_the_figure_output_of_its_drawing():
    toy = Toy(book=True)
    stored = toy.states["figure"][(0,)].outputs
    assert len(stored) == 1 and stored[0]["metadata"]["image/png"]["natural_width_px"] == 300
    assert stored[0] == figure_output(Toy(book=False).draw(1))


def test_every_stored_state_is_what_the_live_explorer_shows():
    assert_book_matches_live(Toy, most=20)


def test_offer_replaces_the_values_the_book_offers():
    toy = Toy(book=True, offer={"size": [2, 3]})
    assert len(toy.states["figure"]) == 2


def test_offer_must_keep_a_controls_first_value():
    with pytest.raises(ValueError, match=r"the book must offer the first value of 'size' \(2\)"):
        Toy(book=True, offer={"size": [1, 3]})


def test_offer_refuses_an_unknown_control():
    with pytest.raises(ValueError, match=r"offer names unknown controls \['colour'\]"):
        Toy(book=True, offer={"colour": ["red"]})


def test_a_part_that_fails_in_the_book_names_itself_and_the_values():
    class Broken(Toy):
        def describe(self, sentence, word, loud):
            raise ZeroDivisionError("oops")

    with pytest.raises(RuntimeError, match=r"part 'readout' failed for the book's values"):
        Broken(book=True)


def test_a_part_must_depend_on_known_controls():
    with pytest.raises(ValueError, match=r"part 'p' depends on unknown controls \['nope'\]"):
        Explorer([switch("a", "a", True)], [text_part("p", ["nope"], str)], book=False)


def test_a_control_must_depend_on_an_earlier_independent_control():
    controls = [menu("b", "b", 0, lambda a: [("x", 0)], depends=["a"]), switch("a", "a", True)]
    with pytest.raises(ValueError, match="depends on 'a', which must be an earlier control"):
        Explorer(controls, [], book=False)


def test_the_rows_must_list_every_control_once():
    with pytest.raises(ValueError, match="rows must list every control once"):
        Explorer([switch("a", "a", True), switch("b", "b", True)], [], [["a"]], book=False)


def test_building_for_the_book_needs_ipywidgets_8(monkeypatch):
    monkeypatch.delattr(widgets, "Stack")
    with pytest.raises(RuntimeError, match=r"needs ipywidgets 8 .* leave COURSE_EXPLORERS unset"):
        Toy(book=True)


def test_a_book_explorer_cannot_be_redrawn_or_set():
    toy = Toy(book=True)
    with pytest.raises(RuntimeError, match="shows stored states only"):
        toy.set(size=1)


def test_a_live_explorer_uses_core_widgets_of_ipywidgets_7_7():
    live = Toy(book=False)
    seen = set()
    stack = [live]
    while stack:
        widget = stack.pop()
        seen.add(type(widget).__name__)
        stack += list(getattr(widget, "children", ()))
    assert seen - {"Toy"} <= {"VBox", "HBox", "Text", "Dropdown", "IntSlider", "Checkbox",
                              "HTML", "HTMLMath", "Output"}  # fmt: skip


def test_a_live_menu_offers_every_option_and_the_book_only_its_book_values():
    offered = [menu("m", "m", 1, [("one", 1), ("two", 2), ("three", 3)], book=[1, 3])]
    parts = [text_part("p", ["m"], lambda m: f"<b>{m}</b>")]
    live = Explorer(offered, parts, book=False)
    assert [value for _, value in live.controls["m"].options] == [1, 2, 3]
    book = Explorer(offered, parts, book=True)
    assert [value for _, value in book.controls["m"].options] == [1, 3]


def test_a_parts_stacks_take_the_pages_width_and_a_controls_stack_a_controls():
    toy = Toy(book=True)
    words = toy.children[1].children[0]
    assert words.layout.max_width == "340px"
    readout = toy.parts["readout"]
    assert readout.layout.max_width is None and readout.layout.width == "100%"


def test_the_books_buttons_put_their_label_beside_them_and_fit_their_labels():
    loud = Toy(book=True).controls["loud"]
    assert loud.layout.display == "flex" and loud.layout.align_items == "center"
    assert loud.style.button_width == "auto" and loud.style.description_width == "initial"


def test_text_parts_take_the_explorers_width_live_and_in_the_book():
    assert Toy(book=False).readout.layout.width == "calc(100% - 4px)"
    leaf = Toy(book=True).states["readout"][(0, 0, 0)]
    assert leaf.layout.width == "calc(100% - 4px)"
