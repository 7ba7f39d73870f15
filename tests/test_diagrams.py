"""Specification of course_lib.diagrams: the architecture diagram and the course map."""

import itertools
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from course_lib.diagrams import course_map_figsize, draw_course_map, draw_transformer

CHAPTERS = [
    ("Transformers at a glance", "why drop recurrence, tokens from signals, the architecture"),
    ("Positional encoding", "word order and the sinusoidal formula"),
    ("Attention", "queries, keys and values"),
    ("Multi-head attention", "heads in parallel, concatenation and the output projection"),
    ("The encoder", ""),
]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def transformer(figsize=(7, 8), **flags):
    fig, ax = plt.subplots(figsize=figsize)
    draw_transformer(ax, **flags)
    fig.canvas.draw()
    return ax


def course_map(chapters=CHAPTERS, current=None, figsize=None, **options):
    figsize = figsize or course_map_figsize(len(chapters), options.get("columns", 3))
    fig, ax = plt.subplots(figsize=figsize)
    draw_course_map(ax, chapters, current, **options)
    fig.canvas.draw()
    return ax


def labels(ax) -> list[str]:
    """Every text of the axes, line breaks read as spaces."""
    return [text.get_text().replace("\n", " ") for text in ax.texts]


def patches(ax, gid: str) -> list:
    return [patch for patch in ax.patches if patch.get_gid() == gid]


def box_of(ax, label: str) -> list[FancyBboxPatch]:
    """The boxes whose centre holds a text reading ``label``."""
    found = []
    for text in ax.texts:
        if text.get_text().replace("\n", " ") != label:
            continue
        x, y = text.get_position()
        for patch in patches(ax, "box"):
            if isinstance(patch, FancyBboxPatch) and patch.get_bbox().contains(x, y):
                found.append(patch)
    return found


def polyline(arrow: FancyArrowPatch) -> np.ndarray:
    """The points, in data coordinates, that the arrow was drawn through (matplotlib keeps
    the path it was given; ``get_path()`` returns the outline with the head instead)."""
    return arrow._path_original.vertices


def end_of(arrow: FancyArrowPatch) -> tuple[float, float]:
    x, y = polyline(arrow)[-1]
    return float(x), float(y)


def on_edge(point, box, side: str) -> bool:
    x, y = point
    bounds = box.get_bbox()
    if side in ("left", "right"):
        edge_x = bounds.x0 if side == "left" else bounds.x1
        return np.isclose(x, edge_x) and bounds.y0 < y < bounds.y1
    return np.isclose(y, bounds.y0) and bounds.x0 < x < bounds.x1


def window_extents(ax, texts=None):
    renderer = ax.figure.canvas.get_renderer()
    return [text.get_window_extent(renderer) for text in (texts or ax.texts)]


# --- the architecture -----------------------------------------------------------------------


def test_transformer_returns_the_axes_it_drew_into():
    _, ax = plt.subplots()
    assert draw_transformer(ax) is ax


def test_encoder_decoder_has_every_part_of_the_architecture():
    found = labels(transformer())
    for label in [
        "Inputs",
        "Input Embedding",
        "Outputs (shifted right)",
        "Output Embedding",
        "Multi-Head Attention",
        "Masked Multi-Head Attention",
        "Multi-Head Attention (cross-attention)",
        "Linear",
        "Softmax",
        "Output Probabilities",
        "Encoder",
        "Decoder",
    ]:
        assert found.count(label) == 1, label
    assert found.count("Add & Norm") == 5  # 2 in the encoder layer, 3 in the decoder layer
    assert found.count("Feed Forward") == 2
    assert found.count("Positional Encoding") == 2
    assert found.count("N×") == 2


def test_number_of_layers_label_is_shown_on_both_stacks():
    found = labels(transformer(num_layers_label=6))
    assert found.count("6×") == 2
    assert "N×" not in found


def test_every_add_and_norm_has_a_residual_arrow_into_its_side():
    ax = transformer()
    norms = box_of(ax, "Add & Norm")
    residuals = patches(ax, "residual")
    assert len(norms) == len(residuals) == 5
    for arrow in residuals:
        end = end_of(arrow)
        assert any(on_edge(end, box, "left") or on_edge(end, box, "right") for box in norms)


def test_residual_arrows_start_below_the_sub_layer_they_bypass():
    ax = transformer()
    for arrow in patches(ax, "residual"):
        start_y, end_y = polyline(arrow)[0][1], end_of(arrow)[1]
        assert end_y - start_y > 0.9  # around a sub-layer box and up to its Add & Norm


def test_encoder_output_feeds_keys_and_values_of_the_cross_attention():
    ax = transformer()
    (cross,) = box_of(ax, "Multi-Head Attention (cross-attention)")
    arrows = patches(ax, "encoder-output")
    assert len(arrows) == 2  # keys and values
    assert all(on_edge(end_of(arrow), cross, "bottom") for arrow in arrows)
    (encoder_norm, *_) = sorted(box_of(ax, "Add & Norm"), key=lambda b: (b.get_x(), -b.get_y()))
    start_y = polyline(arrows[0])[0][1]
    assert np.isclose(start_y, encoder_norm.get_bbox().y1)  # from the encoder's last layer


def test_every_box_is_fed_by_an_arrow():
    ax = transformer()
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    ends = [end_of(arrow) for arrow in arrows]
    for label in ["Input Embedding", "Multi-Head Attention", "Feed Forward", "Linear", "Softmax"]:
        for box in box_of(ax, label):
            assert any(on_edge(end, box, "bottom") for end in ends), label


def test_encoder_only_has_no_decoder_parts():
    found = labels(transformer(show_decoder=False))
    assert "Encoder" in found and "Decoder" not in found
    assert "Masked Multi-Head Attention" not in found
    assert "Multi-Head Attention (cross-attention)" not in found
    assert found.count("Add & Norm") == 2
    assert {"Linear", "Softmax", "Output Probabilities"} <= set(found)


def test_encoder_only_has_two_residuals_and_no_encoder_output_arrow():
    ax = transformer(show_decoder=False)
    assert len(patches(ax, "residual")) == 2
    assert patches(ax, "encoder-output") == []


def test_decoder_only_has_masked_attention_and_no_cross_attention():
    ax = transformer(show_encoder=False)
    found = labels(ax)
    assert "Masked Multi-Head Attention" in found
    assert "Multi-Head Attention (cross-attention)" not in found
    assert "Inputs" not in found and "Encoder" not in found
    assert found.count("Add & Norm") == 2
    assert len(patches(ax, "residual")) == 2
    assert patches(ax, "encoder-output") == []


@pytest.mark.parametrize(
    "flags", [{}, {"show_decoder": False}, {"show_encoder": False}], ids=["both", "enc", "dec"]
)
def test_no_two_texts_overlap_at_the_recommended_size(flags):
    ax = transformer(**flags)
    texts = zip(window_extents(ax), labels(ax), strict=True)
    for (a, text_a), (b, text_b) in itertools.combinations(texts, 2):
        assert not a.overlaps(b), (text_a, text_b)


@pytest.mark.parametrize("figsize", [(7, 8), (3.5, 4)])
def test_box_labels_fit_inside_their_boxes(figsize):
    ax = transformer(figsize)
    renderer = ax.figure.canvas.get_renderer()
    checked = 0
    boxes = [p for p in patches(ax, "box") if isinstance(p, FancyBboxPatch)]
    for text in ax.texts:
        for box in [box for box in boxes if box.get_bbox().contains(*text.get_position())]:
            outer = box.get_window_extent(renderer)
            inner = text.get_window_extent(renderer)
            assert outer.x0 < inner.x0 and inner.x1 < outer.x1, text.get_text()
            assert outer.y0 < inner.y0 and inner.y1 < outer.y1, text.get_text()
            checked += 1
    assert checked == 14  # embeddings, sub-layers, Add & Norms, linear, softmax


def test_all_text_stays_inside_the_figure():
    ax = transformer()
    figure = ax.figure.bbox
    for extent in window_extents(ax):
        assert figure.x0 <= extent.x0 and extent.x1 <= figure.x1
        assert figure.y0 <= extent.y0 and extent.y1 <= figure.y1


def test_diagram_is_drawn_from_patches_and_text_only():
    ax = transformer()
    assert len(ax.images) == len(ax.lines) == len(ax.collections) == 0
    assert not ax.axison


def test_diagram_is_identical_every_time():
    pixels = [np.asarray(transformer().figure.canvas.buffer_rgba()).copy() for _ in range(2)]
    assert np.array_equal(*pixels)


def test_nothing_to_draw_raises():
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="show_encoder and show_decoder are both False"):
        draw_transformer(ax, show_encoder=False, show_decoder=False)


@pytest.mark.parametrize("bad", ["", "  ", None, True, 2.5])
def test_bad_layers_label_raises(bad):
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="num_layers_label must be a non-empty string or"):
        draw_transformer(ax, num_layers_label=bad)


def test_transformer_needs_axes():
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes, got Figure"):
        draw_transformer(plt.figure())


# --- the course map -------------------------------------------------------------------------


def chapter_boxes(ax) -> list[FancyBboxPatch]:
    return [p for p in ax.patches if p.get_gid() in ("chapter", "current")]


def test_course_map_returns_the_axes_it_drew_into():
    _, ax = plt.subplots()
    assert draw_course_map(ax, CHAPTERS) is ax


def test_one_numbered_box_per_chapter_in_reading_order():
    ax = course_map()
    boxes = chapter_boxes(ax)
    assert len(boxes) == len(CHAPTERS)
    for number, (box, (title, _)) in enumerate(zip(boxes, CHAPTERS, strict=True), start=1):
        (heading,) = [t for t in ax.texts if t.get_text().startswith(f"{number}. ")]
        assert heading.get_text().replace("\n", " ") == f"{number}. {title}"
        assert box.get_bbox().contains(*heading.get_position())
    first_row, second_row = boxes[:3], boxes[3:]
    assert [b.get_x() for b in first_row] == sorted(b.get_x() for b in first_row)
    assert all(b.get_y() < first_row[0].get_y() for b in second_row)
    assert second_row[0].get_x() == first_row[0].get_x()


def test_an_arrow_leads_from_each_chapter_to_the_next():
    ax = course_map()
    arrows = patches(ax, "arrow")
    assert len(arrows) == len(CHAPTERS) - 1
    boxes = chapter_boxes(ax)
    for arrow, target in zip(arrows, boxes[1:], strict=True):
        bounds = target.get_bbox()
        x, y = end_of(arrow)
        assert np.isclose(x, bounds.x0) or np.isclose(y, bounds.y1)  # its left side or its top


def test_the_current_chapter_is_highlighted():
    ax = course_map(current="Attention")
    boxes = chapter_boxes(ax)
    (current,) = patches(ax, "current")
    assert current is boxes[2]
    others = [box for box in boxes if box is not current]
    assert all(box.get_facecolor() != current.get_facecolor() for box in others)
    assert all(box.get_linewidth() < current.get_linewidth() for box in others)
    assert labels(ax).count("you are here") == 1


def test_without_a_current_chapter_nothing_is_highlighted():
    ax = course_map()
    assert patches(ax, "current") == []
    assert "you are here" not in labels(ax)


def test_summaries_are_shown_and_empty_ones_left_out():
    found = labels(course_map())
    assert "word order and the sinusoidal formula" in found
    assert "" not in found


def test_long_summaries_are_shortened_to_three_lines():
    chapters = [("Long", "word " * 60)]
    summary = next(t for t in course_map(chapters).texts if t.get_text().startswith("word"))
    assert summary.get_text().count("\n") == 2
    assert summary.get_text().endswith("…")


@pytest.mark.parametrize("figsize", [None, (6.4, 4.8), (12, 3)])
def test_chapter_texts_fit_inside_their_boxes_at_any_figure_size(figsize):
    ax = course_map(current="Attention", figsize=figsize)
    renderer = ax.figure.canvas.get_renderer()
    boxes = [box.get_window_extent(renderer) for box in chapter_boxes(ax)]
    inside = 0
    for text in ax.texts:
        if text.get_text() == "you are here":
            continue
        extent = text.get_window_extent(renderer)
        assert any(
            box.x0 < extent.x0 and extent.x1 < box.x1 and box.y0 < extent.y0 and extent.y1 < box.y1
            for box in boxes
        ), text.get_text()
        inside += 1
    assert inside == 2 * len(CHAPTERS) - 1  # every title, every non-empty summary


def test_columns_sets_the_boxes_per_row():
    ax = course_map(columns=2)
    ys = [round(box.get_y(), 6) for box in chapter_boxes(ax)]
    assert ys[0] == ys[1] != ys[2] == ys[3] != ys[4]


def test_figsize_grows_with_the_number_of_rows():
    assert course_map_figsize(6)[1] > course_map_figsize(3)[1]
    assert course_map_figsize(3)[0] == course_map_figsize(30)[0]


def test_unknown_current_chapter_raises_listing_the_titles():
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match=re.escape("current must be one of the chapter titles")):
        draw_course_map(ax, CHAPTERS, current="Attention is all you need")


@pytest.mark.parametrize(
    ("chapters", "message"),
    [
        ([], "chapters must be a non-empty list"),
        ("Attention", "chapters must be a non-empty list"),
        ([("Attention",)], "chapter 0 must be a (title, summary) pair"),
        ([("A", "x"), ("", "y")], "chapter 1 must be a (title, summary) pair"),
        ([("A", "x"), ("A", "y")], "chapter titles must be unique, got ['A']"),
    ],
)
def test_malformed_chapters_raise(chapters, message):
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match=re.escape(message)):
        draw_course_map(ax, chapters)


def test_columns_must_be_positive():
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="columns must be a positive integer, got 0"):
        draw_course_map(ax, CHAPTERS, columns=0)
