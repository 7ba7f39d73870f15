"""Diagrams drawn by code: the Transformer architecture and the map of the course.

Everything is built from matplotlib patches (rounded boxes, circles, arrows) and text, with
no randomness and no external images, so a chapter can redraw it anywhere. Every function
draws into an ``Axes`` it is given and returns it. The patches carry a ``gid`` saying what
they are (``"box"``, ``"block"``, ``"arrow"``, ``"residual"``, ``"encoder-output"``,
``"chapter"``, ``"current"``), which the tests use and which ends up in SVG output.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path
from matplotlib.text import Text

from course_lib._checks import positive_int

__all__ = ["course_map_figsize", "draw_course_map", "draw_transformer"]

COLORS = {
    "embedding": "#f6d0d0",
    "attention": "#fbdcb0",
    "norm": "#f3eeb0",
    "feed_forward": "#cce4f6",
    "linear": "#dcd4f1",
    "softmax": "#cfeacd",
    "block": "#f1f1f1",
    "line": "#333333",
    "block_edge": "#9a9a9a",
}

# Geometry of the architecture diagram, in data units (the axes are 10 units wide).
BOX_WIDTH = 2.6
BLOCK_HALF_WIDTH = 1.75
LANE = 1.52  # distance from a column's centre to its residual connections
FORK = 0.24  # from the stream's entry into a sub-layer to the point where it branches
PRONG = 0.3  # from the branch point up to the sub-layer
SUBLAYER_HEIGHT = 0.68
NORM_GAP = 0.24
NORM_HEIGHT = 0.38
FONT_SIZE = 9
PLUS_RADIUS = 0.17  # the circled plus adding the positional encoding
CROSS_KEY, CROSS_VALUE = 0.95, 0.45  # keys and values enter a cross-attention this far left
# Font sizes are given for this scale (points per data unit: a (7, 8) inch figure) and scaled
# with the axes, so that the text fits its boxes at any figure size.
DESIGN_SCALE = 39.0


@dataclass(frozen=True)
class _Sublayer:
    label: str
    color: str
    kind: str  # "self" (three prongs: Q, K, V), "cross" (Q from below, K, V from the encoder)
    #           or "single" (one input)


ENCODER_LAYER = (
    _Sublayer("Multi-Head\nAttention", COLORS["attention"], "self"),
    _Sublayer("Feed\nForward", COLORS["feed_forward"], "single"),
)
DECODER_ONLY_LAYER = (
    _Sublayer("Masked Multi-Head\nAttention", COLORS["attention"], "self"),
    _Sublayer("Feed\nForward", COLORS["feed_forward"], "single"),
)
DECODER_LAYER = (
    DECODER_ONLY_LAYER[0],
    _Sublayer("Multi-Head Attention\n(cross-attention)", COLORS["attention"], "cross"),
    DECODER_ONLY_LAYER[1],
)


def _box(
    ax: Axes, cx: float, bottom: float, height: float, label: str, color: str, **text
) -> float:
    """A rounded box centred on ``cx``; returns its top."""
    ax.add_patch(
        FancyBboxPatch(
            (cx - BOX_WIDTH / 2, bottom),
            BOX_WIDTH,
            height,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor=color,
            edgecolor=COLORS["line"],
            linewidth=1.0,
            gid="box",
            zorder=2,
        )
    )
    ax.text(cx, bottom + height / 2, label, ha="center", va="center", fontsize=FONT_SIZE, **text)
    return bottom + height


def _line(ax: Axes, points: Sequence[tuple[float, float]], gid: str = "arrow", head=True) -> None:
    """A polyline through ``points``, with an arrow head at the last one if ``head``."""
    codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
    ax.add_patch(
        FancyArrowPatch(
            path=Path(points, codes),
            arrowstyle="-|>" if head else "-",
            mutation_scale=9,
            linewidth=1.1,
            color=COLORS["line"],
            joinstyle="miter",
            gid=gid,
            zorder=3,
        )
    )


def _sublayer(
    ax: Axes, cx: float, entry: float, sublayer: _Sublayer, side: int
) -> tuple[float, float]:
    """One sub-layer with its Add & Norm and residual connection, fed from ``(cx, entry)``.

    Returns the top of the Add & Norm box and the height of the branch point (where a
    cross-attention's keys and values arrive).
    """
    branch = entry + FORK
    bottom = branch + PRONG
    if sublayer.kind == "self":
        _line(ax, [(cx, entry), (cx, branch)], head=False)
        _line(ax, [(cx - 0.7, branch), (cx + 0.7, branch)], head=False)
        for dx in (-0.7, 0.0, 0.7):  # queries, keys and values all come from the stream
            _line(ax, [(cx + dx, branch), (cx + dx, bottom)])
    elif sublayer.kind == "cross":  # the queries come from the stream, on the residual side
        _line(
            ax, [(cx, entry), (cx, branch), (cx + side * 0.55, branch), (cx + side * 0.55, bottom)]
        )
    else:
        _line(ax, [(cx, entry), (cx, bottom)])
    top = _box(ax, cx, bottom, SUBLAYER_HEIGHT, sublayer.label, sublayer.color)
    norm_bottom = top + NORM_GAP
    _line(ax, [(cx, top), (cx, norm_bottom)])
    norm_top = _box(ax, cx, norm_bottom, NORM_HEIGHT, "Add & Norm", COLORS["norm"])
    middle = norm_bottom + NORM_HEIGHT / 2
    lane = cx + side * LANE
    _line(
        ax,
        [(cx, branch), (lane, branch), (lane, middle), (cx + side * BOX_WIDTH / 2, middle)],
        gid="residual",
    )
    return norm_top, branch


def _positional_encoding(ax: Axes, cx: float, y: float, side: int) -> float:
    """The sum of embedding and positional encoding (a circled plus fed by a small sine
    wave); returns the top of the circle."""
    radius = PLUS_RADIUS
    ax.add_patch(Circle((cx, y), radius, facecolor="white", edgecolor=COLORS["line"], gid="box"))
    ax.text(cx, y, "+", ha="center", va="center", fontsize=12)
    icon_x = cx + side * 0.8
    ax.add_patch(
        Circle((icon_x, y), radius, facecolor="white", edgecolor=COLORS["line"], gid="box")
    )
    wave = [(icon_x + 0.11 * (t / 8 - 1), y + 0.07 * math.sin(math.pi * t / 4)) for t in range(17)]
    ax.add_patch(
        FancyArrowPatch(path=Path(wave), arrowstyle="-", linewidth=1.0, color=COLORS["line"])
    )
    _line(ax, [(icon_x - side * radius, y), (cx + side * radius, y)])
    ax.text(
        icon_x + side * 0.28,
        y,
        "Positional\nEncoding",
        ha="right" if side < 0 else "left",
        va="center",
        fontsize=FONT_SIZE,
    )
    return y + radius


@dataclass(frozen=True)
class _Column:
    top: float  # top of the last Add & Norm
    block_top: float
    cross_branch: float | None  # where the encoder output meets a cross-attention


def _column(
    ax: Axes,
    cx: float,
    side: int,
    layer: Sequence[_Sublayer],
    *,
    input_label: str,
    embedding_label: str,
    caption: str,
    layers_label: str,
) -> _Column:
    """Inputs, embedding, positional encoding and one block of ``layer`` sub-layers, repeated
    ``layers_label`` times; ``side`` (-1 left, +1 right) is where the residuals and labels go."""
    ax.text(cx, 0.62, input_label, ha="center", va="top", fontsize=FONT_SIZE)
    _line(ax, [(cx, 0.66), (cx, 0.95)])
    embedding_top = _box(ax, cx, 0.95, SUBLAYER_HEIGHT, embedding_label, COLORS["embedding"])
    plus = embedding_top + 0.45  # centre of the circled plus
    entry = _positional_encoding(ax, cx, plus, side)
    _line(ax, [(cx, embedding_top), (cx, plus - PLUS_RADIUS)])
    block_bottom = entry + 0.1
    cross_branch = None
    for sublayer in layer:
        top, branch = _sublayer(ax, cx, entry, sublayer, side)
        if sublayer.kind == "cross":
            cross_branch = branch
        entry = top
    block_top = entry + 0.2
    ax.add_patch(
        FancyBboxPatch(
            (cx - BLOCK_HALF_WIDTH, block_bottom),
            2 * BLOCK_HALF_WIDTH,
            block_top - block_bottom,
            boxstyle="round,pad=0,rounding_size=0.18",
            facecolor=COLORS["block"],
            edgecolor=COLORS["block_edge"],
            linewidth=1.2,
            gid="block",
            zorder=1,
        )
    )
    outside = cx + side * (BLOCK_HALF_WIDTH + 0.15)
    align = "right" if side < 0 else "left"
    middle = (block_bottom + block_top) / 2
    ax.text(outside, middle, f"{layers_label}×", ha=align, va="center", fontsize=13)
    ax.text(
        outside,
        middle - 0.35,
        caption,
        ha=align,
        va="top",
        fontsize=FONT_SIZE - 1,
        style="italic",
        color="#555555",
    )
    return _Column(entry, block_top, cross_branch)


def _output_head(ax: Axes, cx: float, column: _Column) -> float:
    """Linear, softmax and the output probabilities above a column; returns the top."""
    linear_bottom = column.block_top + 0.3
    _line(ax, [(cx, column.top), (cx, linear_bottom)])
    top = _box(ax, cx, linear_bottom, 0.45, "Linear", COLORS["linear"])
    _line(ax, [(cx, top), (cx, top + 0.3)])
    top = _box(ax, cx, top + 0.3, 0.45, "Softmax", COLORS["softmax"])
    _line(ax, [(cx, top), (cx, top + 0.3)])
    ax.text(cx, top + 0.34, "Output\nProbabilities", ha="center", va="bottom", fontsize=FONT_SIZE)
    return top + 0.34 + 0.45


def _scale_fonts(ax: Axes, texts: Sequence[Text], width: float, height: float, design: float):
    """Scale the font of ``texts`` by (points per data unit of ``ax``) / ``design``.

    ``width`` and ``height`` are the data extent shown with equal aspect; the axes' box
    (before aspect adjustment) decides how many points a data unit gets.
    """
    figure_width, figure_height = ax.figure.get_size_inches()
    box = ax.get_position()
    scale = 72 * min(box.width * figure_width / width, box.height * figure_height / height)
    for text in texts:
        text.set_fontsize(text.get_fontsize() * scale / design)


def _layers_label(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise ValueError(
            f"num_layers_label must be a non-empty string or an integer (e.g. 'N' or 6), "
            f"got {value!r}"
        )
    return str(value).strip()


def draw_transformer(
    ax: Axes,
    num_layers_label: str | int = "N",
    show_encoder: bool = True,
    show_decoder: bool = True,
) -> Axes:
    """Draw the Transformer architecture (Vaswani et al., 2017, figure 1) as a block diagram.

    From the bottom: the inputs, their embedding plus the positional encoding, a block of
    layers repeated ``num_layers_label`` times, and on top of the last block a linear layer,
    a softmax and the output probabilities. An encoder layer holds multi-head self-attention
    and a feed-forward network, each followed by Add & Norm with a residual connection around
    it. A decoder layer holds masked multi-head self-attention, cross-attention (queries from
    the decoder, keys and values from the encoder output) and a feed-forward network, each
    followed by Add & Norm.

    - ``show_encoder=True, show_decoder=True``: the encoder-decoder model (translation);
    - ``show_decoder=False``: an encoder-only model (BERT, ViT);
    - ``show_encoder=False``: a decoder-only model (GPT-2): no cross-attention.

    Args:
        ax: where to draw; the axes are set to equal aspect with no frame. A figure of about
            ``(7, 8)`` inches shows the encoder-decoder model at a readable size.
        num_layers_label: how many times the layers repeat, shown as e.g. "N×" or "6×".
        show_encoder: whether to draw the encoder.
        show_decoder: whether to draw the decoder.

    Returns:
        ``ax``.

    Raises:
        ValueError: if both parts are switched off or the label is empty.
    """
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    layers = _layers_label(num_layers_label)
    if not (show_encoder or show_decoder):
        raise ValueError("nothing to draw: show_encoder and show_decoder are both False")
    first_text = len(ax.texts)
    both = show_encoder and show_decoder
    encoder = decoder = None
    if show_encoder:
        encoder_x = 2.55 if both else 5.0
        encoder = _column(
            ax,
            encoder_x,
            -1,
            ENCODER_LAYER,
            input_label="Inputs",
            embedding_label="Input\nEmbedding",
            caption="Encoder",
            layers_label=layers,
        )
    if show_decoder:
        decoder_x = 7.45 if both else 5.0
        decoder = _column(
            ax,
            decoder_x,
            1,
            DECODER_LAYER if both else DECODER_ONLY_LAYER,
            input_label="Outputs\n(shifted right)",
            embedding_label="Output\nEmbedding",
            caption="Decoder",
            layers_label=layers,
        )
    if encoder is not None and decoder is not None and decoder.cross_branch is not None:
        route = encoder.block_top + 0.3
        middle = (encoder_x + decoder_x) / 2
        branch = decoder.cross_branch
        key_x, value_x = decoder_x - CROSS_KEY, decoder_x - CROSS_VALUE
        _line(
            ax,
            [
                (encoder_x, encoder.top),
                (encoder_x, route),
                (middle, route),
                (middle, branch),
                (key_x, branch),
                (key_x, branch + PRONG),
            ],
            gid="encoder-output",
        )
        _line(
            ax,
            [(key_x, branch), (value_x, branch), (value_x, branch + PRONG)],
            gid="encoder-output",
        )
    last_x, last = (decoder_x, decoder) if decoder is not None else (encoder_x, encoder)
    top = _output_head(ax, last_x, last)
    left, right = (0.0, 10.0) if both else (5.0 - 2.8, 5.0 + 2.8)
    ax.set_xlim(left, right)
    ax.set_ylim(0, top + 0.1)
    _scale_fonts(ax, ax.texts[first_text:], right - left, top + 0.1, DESIGN_SCALE)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return ax


# Geometry of the course map, in data units.
MAP_BOX = (3.2, 1.45)  # width, height of a chapter's box
MAP_GAP = (0.75, 0.85)  # horizontal, vertical space between boxes
MAP_MARGIN = 0.2
MAP_DESIGN_SCALE = 50.0  # points per data unit the font sizes are given for
MAP_COLORS = {
    "chapter": ("#eef3f9", "#6b8fb8"),  # face, edge
    "current": ("#ffd98a", "#b36b00"),
}


def _chapters(chapters: object) -> list[tuple[str, str]]:
    if isinstance(chapters, (str, bytes)) or not isinstance(chapters, Sequence) or not chapters:
        raise ValueError(
            f"chapters must be a non-empty list of (title, summary) pairs, got {chapters!r}"
        )
    pairs = []
    for index, chapter in enumerate(chapters):
        if (
            not isinstance(chapter, (tuple, list))
            or len(chapter) != 2
            or not all(isinstance(part, str) for part in chapter)
            or not chapter[0].strip()
        ):
            raise ValueError(
                f"chapter {index} must be a (title, summary) pair of strings with a non-empty "
                f"title, got {chapter!r}"
            )
        pairs.append((chapter[0], chapter[1]))
    titles = [title for title, _ in pairs]
    repeated = sorted({title for title in titles if titles.count(title) > 1})
    if repeated:
        raise ValueError(f"chapter titles must be unique, got {repeated} more than once")
    return pairs


def course_map_figsize(num_chapters: int, columns: int = 3) -> tuple[float, float]:
    """A figure size (inches) at which :func:`draw_course_map` fits its text in the boxes."""
    num_chapters = positive_int("num_chapters", num_chapters)
    columns = min(positive_int("columns", columns), num_chapters)
    rows = -(-num_chapters // columns)
    width, height = _map_extent(rows, columns)
    inches = MAP_DESIGN_SCALE / 72  # per data unit; the axes fill matplotlib's default
    return (round(width * inches / 0.775, 2), round(height * inches / 0.77, 2))  # subplot box


def _map_extent(rows: int, columns: int) -> tuple[float, float]:
    (width, height), (gap_x, gap_y) = MAP_BOX, MAP_GAP
    return (
        columns * width + (columns - 1) * gap_x + 2 * MAP_MARGIN,
        rows * height + (rows - 1) * gap_y + 2 * MAP_MARGIN + 0.3,  # 0.3: "you are here"
    )


def draw_course_map(
    ax: Axes,
    chapters: Sequence[tuple[str, str]],
    current: str | None = None,
    *,
    columns: int = 3,
) -> Axes:
    """Draw the chapters of the course as numbered boxes in reading order, linked by arrows.

    Boxes run left to right, ``columns`` to a row; an arrow leads from each chapter to the
    next (from the end of a row down to the start of the next one). The ``current`` chapter
    is filled in amber, framed thicker and marked "you are here"; its box patch has the
    ``gid`` ``"current"``, the others ``"chapter"``.

    Args:
        ax: where to draw; the axes are set to equal aspect with no frame. Use a figure of
            :func:`course_map_figsize` so that the text fits the boxes.
        chapters: ``(title, summary)`` for every chapter, in reading order; titles must be
            unique, a summary may be empty. Titles are wrapped to two lines, summaries to
            three (longer ones are shortened with "…").
        current: the title of the chapter to highlight, or ``None``.
        columns: boxes per row.

    Returns:
        ``ax``.

    Raises:
        ValueError: for an empty or malformed list of chapters, repeated titles, or a
            ``current`` that is not one of the titles.
    """
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    pairs = _chapters(chapters)
    titles = [title for title, _ in pairs]
    if current is not None and current not in titles:
        raise ValueError(f"current must be one of the chapter titles {titles}, got {current!r}")
    columns = min(positive_int("columns", columns), len(pairs))
    (width, height), (gap_x, gap_y) = MAP_BOX, MAP_GAP
    first_text = len(ax.texts)

    def corner(index: int) -> tuple[float, float]:
        """Left and top of chapter ``index``'s box."""
        row, column = divmod(index, columns)
        return column * (width + gap_x), -row * (height + gap_y)

    for index, (title, summary) in enumerate(pairs):
        left, top = corner(index)
        kind = "current" if title == current else "chapter"
        face, edge = MAP_COLORS[kind]
        ax.add_patch(
            FancyBboxPatch(
                (left, top - height),
                width,
                height,
                boxstyle="round,pad=0,rounding_size=0.12",
                facecolor=face,
                edgecolor=edge,
                linewidth=2.4 if kind == "current" else 1.2,
                gid=kind,
                zorder=2,
            )
        )
        heading = textwrap.wrap(f"{index + 1}. {title}", 22, max_lines=2, placeholder=" …")
        ax.text(
            left + 0.18,
            top - 0.16,
            "\n".join(heading),
            ha="left",
            va="top",
            fontsize=10,
            fontweight="bold",
            zorder=3,
        )
        if summary.strip():
            lines = textwrap.wrap(summary, 30, max_lines=3, placeholder=" …")
            ax.text(
                left + 0.18,
                top - 0.26 - 0.24 * len(heading),
                "\n".join(lines),
                ha="left",
                va="top",
                fontsize=8.5,
                color="#333333",
                zorder=3,
            )
        if kind == "current":
            ax.text(
                left + width,
                top + 0.07,
                "you are here",
                ha="right",
                va="bottom",
                fontsize=8.5,
                style="italic",
                color=edge,
            )
        if index + 1 < len(pairs):
            next_left, next_top = corner(index + 1)
            if next_top == top:  # same row
                points = [(left + width, top - height / 2), (next_left, top - height / 2)]
            else:  # down to the start of the next row
                x, next_x = left + width / 2, next_left + width / 2
                turn = top - height - gap_y / 2
                points = [(x, top - height), (x, turn), (next_x, turn), (next_x, next_top)]
            _line(ax, points)
    rows = -(-len(pairs) // columns)
    extent_x, extent_y = _map_extent(rows, columns)
    ax.set_xlim(-MAP_MARGIN, extent_x - MAP_MARGIN)
    ax.set_ylim(MAP_MARGIN + 0.3 - extent_y, MAP_MARGIN + 0.3)
    _scale_fonts(ax, ax.texts[first_text:], extent_x, extent_y, MAP_DESIGN_SCALE)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return ax
