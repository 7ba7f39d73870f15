"""One explorer, two worlds: live from Python in a kernel, and stored with the chapter for the book.

An explorer is a list of **controls** (sliders, menus, buttons, switches, text boxes) and a list
of **parts** (HTML texts and matplotlib figures). Each part names the controls it depends on and
is drawn by a function of their values, ``draw(**values) -> str | Figure``. The same functions
draw in both worlds:

- **Live** (Jupyter, JupyterLab, Colab; ipywidgets 7.7 and 8): a control takes any value its
  widget allows, free text included, and every change redraws the parts that depend on it.
- **Book** (when the chapter is executed for the book: ``COURSE_EXPLORERS=book``, which
  ``tasks.py execute`` sets, or ``book=True``): each control offers the values its ``book``
  lists (a text box becomes a menu of prepared inputs). Every part is drawn once for every
  combination of those values of the controls it depends on, and the drawings are stored in a
  tree of ``Stack`` containers, one level per control. ``jsdlink`` ties each control's
  ``index`` to the ``selected_index`` of the stacks of its level, so that in the HTML book, with
  no kernel and no network, moving a control shows the stored drawing for its value: the
  widget manager only switches views.

A control whose options depend on other controls (the query tokens of a sentence chosen above)
has one widget per combination of those controls' values in the book, in a stack of its own.

Sizes: a part's drawings number the product of its controls' book values, so a part should
depend on no control it does not use; figures are stored as 256-colour PNGs
(:func:`course_lib.plotting.figure_output`). Controls, stacks and leaves share their layout
models.

In the built page each explorer is marked for the browser tests: the explorer has the CSS
class ``course-explorer``, a control ``course-control course-control-<name>`` (and, for one of a
dependent control's widgets, ``course-instance-<parents' indices>``), and every stored drawing
``course-state course-part-<part>`` and ``course-key-<part>--<control>-<index>...``.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython import get_ipython
from IPython.display import clear_output, display
from matplotlib.figure import Figure

from course_lib._html import color
from course_lib._layout import FULL_WIDTH, control_row, fitting
from course_lib.plotting import figure_output

__all__ = [
    "BOOK_VARIABLE",
    "Control",
    "Explorer",
    "Part",
    "book_mode",
    "figure_part",
    "menu",
    "slider",
    "switch",
    "text_box",
    "text_part",
]

BOOK_VARIABLE = "COURSE_EXPLORERS"
"""Set to ``book`` (as ``tasks.py execute`` does) to build every explorer for the book."""

Option = tuple[str, Any]  # (label shown, value)
BookKind = Literal["slider", "menu", "buttons"]


def book_mode() -> bool:
    """True when the explorers are built for the book (``COURSE_EXPLORERS=book``)."""
    return os.environ.get(BOOK_VARIABLE, "").strip().lower() == "book"


@dataclass(frozen=True)
class Control:
    """One control of an explorer.

    Attributes:
        name: the keyword its value is passed under to the parts' ``draw`` functions.
        label: the widget's description (``$maths$`` allowed).
        value: its first value (a text for a text box).
        live: builds the live widget; None for a menu, whose live widget is a ``Dropdown``
            of ``options``.
        book: the values the book offers, in order; they must include ``value``. For a menu,
            None offers all its options.
        kind: the book's widget: ``slider`` (``SelectionSlider``), ``menu`` (``Dropdown``) or
            ``buttons`` (``ToggleButtons``).
        options: for a menu, its ``(label, value)`` options, given the values of the controls
            in ``depends`` as keywords.
        depends: the controls this one's options depend on (controls without ``depends``).
            A live menu's options follow them; a control with a ``live`` widget of its own
            follows them as its explorer makes it (a slider's ``max``, say).
        read: turns the widget's value into the value the parts get (a text box's text into a
            number, say); raises ``ValueError`` with a message for the reader.
        show: a book value's label.
    """

    name: str
    label: str
    value: Any
    live: Callable[[], widgets.ValueWidget] | None = None
    book: Sequence[Any] | None = None
    kind: BookKind = "slider"
    options: Callable[..., Sequence[Option]] | None = None
    depends: tuple[str, ...] = ()
    read: Callable[[Any], Any] | None = None
    show: Callable[[Any], str] = str

    def menu_options(self, parents: Mapping[str, Any]) -> list[Option]:
        """A menu's ``(label, value)`` options given its parents' values (all of them: what
        the live menu offers)."""
        assert self.options is not None, f"control {self.name!r} is not a menu"
        return list(self.options(**{name: parents[name] for name in self.depends}))

    def book_options(self, parents: Mapping[str, Any]) -> list[Option]:
        """The ``(label, value)`` pairs the book offers, given the parents' values."""
        if self.options is not None:
            offered = self.menu_options(parents)
            if self.book is not None:
                offered = [option for option in offered if option[1] in self.book]
        else:
            offered = [(self.show(value), value) for value in self.book or ()]
        if not offered:
            raise ValueError(f"control {self.name!r} offers no value in the book")
        return offered

    def value_of(self, raw: Any) -> Any:
        """The value the parts get for the widget value ``raw``."""
        return raw if self.read is None else self.read(raw)


def slider(
    name: str,
    label: str,
    value: Any,
    book: Sequence[Any],
    live: Callable[[], widgets.ValueWidget],
    show: Callable[[Any], str] = str,
) -> Control:
    """A slider: ``live`` builds the kernel's slider (any value); the book offers ``book``."""
    return Control(name, label, value, live=live, book=tuple(book), kind="slider", show=show)


def menu(
    name: str,
    label: str,
    value: Any,
    options: Sequence[Option] | Callable[..., Sequence[Option]],
    depends: Sequence[str] = (),
    book: Sequence[Any] | None = None,
    kind: BookKind = "menu",
) -> Control:
    """A menu of ``(label, value)`` options, or a function of the ``depends`` controls'
    values giving them; the book offers all of them, or those whose value is in ``book``."""
    given = options if callable(options) else (lambda: list(options))
    return Control(
        name, label, value, book=None if book is None else tuple(book), kind=kind,
        options=given, depends=tuple(depends),
    )  # fmt: skip


def switch(name: str, label: str, value: bool) -> Control:
    """On or off: a ``Checkbox`` in a kernel, two buttons (off, on) in the book."""
    return Control(
        name, label, bool(value), book=(False, True), kind="buttons",
        live=lambda: widgets.Checkbox(value=bool(value), description=label, indent=False),
        show=lambda on: "on" if on else "off",
    )  # fmt: skip


def text_box(
    name: str,
    label: str,
    value: str,
    prepared: Sequence[str],
    read: Callable[[str], Any] | None = None,
    width: str = "520px",
) -> Control:
    """Free text in a kernel (read when the reader presses Enter); in the book a menu of the
    ``prepared`` texts. ``read`` turns a text into the parts' value or raises ``ValueError``."""
    return Control(
        name, label, value, book=tuple(prepared), kind="menu", read=read,
        live=lambda: widgets.Text(value=value, description=label, continuous_update=False,
                                  layout=fitting(width)),
    )  # fmt: skip


@dataclass(frozen=True)
class Part:
    """One part of what an explorer shows: an HTML text or a figure.

    Attributes:
        name: its name (the live widget is the explorer's attribute of that name).
        depends: the controls it depends on; their values are ``draw``'s keywords.
        draw: returns the HTML (``$maths$`` allowed) or a matplotlib ``Figure``.
        figure: True if ``draw`` returns a figure.
    """

    name: str
    depends: tuple[str, ...]
    draw: Callable[..., str | Figure]
    figure: bool = False


def text_part(name: str, depends: Sequence[str], draw: Callable[..., str]) -> Part:
    """An HTML part, shown in an ``HTMLMath`` widget."""
    return Part(name, tuple(depends), draw, figure=False)


def figure_part(name: str, depends: Sequence[str], draw: Callable[..., Figure]) -> Part:
    """A figure part, shown in an ``Output`` widget as the book's PNG."""
    return Part(name, tuple(depends), draw, figure=True)


def _content(part: Part, values: Mapping[str, Any]) -> str | dict:
    """What ``part`` shows for ``values``: its HTML, or a figure's output (the figure is
    closed)."""
    drawn = part.draw(**{name: values[name] for name in part.depends})
    if not part.figure:
        if not isinstance(drawn, str):
            raise TypeError(f"part {part.name!r} must return HTML, got {type(drawn).__name__}")
        return drawn
    if not isinstance(drawn, Figure):
        raise TypeError(f"part {part.name!r} must return a Figure, got {type(drawn).__name__}")
    try:
        return figure_output(drawn)
    finally:
        plt.close(drawn)


@dataclass
class _Book:
    """The widgets of an explorer built for the book."""

    # a part's stacks take the page's width; its states too, inside their 2-px margins
    layout: widgets.Layout = field(default_factory=lambda: widgets.Layout(width="100%"))
    # (at most the page's width: a figure wider than a phone's column scrolls inside it)
    leaf: widgets.Layout = field(
        default_factory=lambda: widgets.Layout(width=FULL_WIDTH, max_width="100%")
    )
    buttons: widgets.Layout = field(
        default_factory=lambda: widgets.Layout(
            display="flex", align_items="center", flex="0 0 auto", margin="2px 12px 2px 0"
        )
    )
    style: widgets.Widget | None = None  # the HTMLMath leaves share one style model
    controls: dict[str, dict[tuple[int, ...], widgets.Widget]] = field(default_factory=dict)
    placed: dict[str, widgets.Widget] = field(default_factory=dict)
    links: list[widgets.Widget] = field(default_factory=list)


class Explorer(widgets.VBox):
    """Controls and the parts they redraw; live in a kernel, stored states in the book.

    Subclasses set what their ``draw`` functions need, then call ``super().__init__`` with
    their controls and parts.

    Args:
        controls: the controls, in order; a control's ``depends`` must come before it.
        parts: the parts, shown in this order below the controls.
        rows: the controls' names, row by row (default: one row of all).
        book: build for the book (default: :func:`book_mode`).
        offer: control name -> the values the book offers instead of the control's ``book``
            (a chapter's choice, or a test's few).
        width, label_width: the controls' largest width and their labels' width (CSS).

    Attributes:
        book: True if built for the book.
        controls: name -> the control's widget (in the book: its first widget).
        parts: name -> the live ``HTMLMath`` or ``Output`` widget (in the book: the root of
            its stack tree).
        states: in the book, part name -> {the controls' indices: the stored widget}.
        message: live only, an HTML line telling what is wrong with a value typed in.
    """

    def __init__(
        self,
        controls: Sequence[Control],
        parts: Sequence[Part],
        rows: Sequence[Sequence[str]] | None = None,
        *,
        book: bool | None = None,
        offer: Mapping[str, Sequence[Any]] | None = None,
        width: str = "340px",
        label_width: str = "90px",
    ) -> None:
        controls = [_offering(control, offer or {}) for control in controls]
        unknown = set(offer or {}) - {control.name for control in controls}
        if unknown:
            raise ValueError(f"offer names unknown controls {sorted(unknown)}")
        self._specs = {control.name: control for control in controls}
        self._parts = list(parts)
        _check_specs(list(controls), self._parts, rows)
        self.book = book_mode() if book is None else bool(book)
        self._layout = fitting(width)
        self._style = {"description_width": label_width}
        self.controls: dict[str, widgets.Widget] = {}
        self.parts: dict[str, widgets.Widget] = {}
        self.states: dict[str, dict[tuple[int, ...], widgets.Widget]] = {}
        if self.book:
            shown = self._build_book()
        else:
            shown = self._build_live()
        rows = rows if rows is not None else [[control.name for control in controls]]
        placed = [control_row([shown[name] for name in row]) for row in rows]
        children = placed + ([] if self.book else [self.message])
        super().__init__(children + [self.parts[part.name] for part in self._parts])
        self.add_class("course-explorer")
        if not self.book:
            self.redraw()

    # ---------------------------------------------------------------- live

    def _build_live(self) -> dict[str, widgets.Widget]:
        self.message = widgets.HTML(layout=widgets.Layout(display="none"))
        self._refreshing = False
        for spec in self._specs.values():
            if spec.live is not None:
                control = spec.live()
            else:
                options = spec.menu_options(self._live_values(spec.depends))
                values = [value for _, value in options]
                control = widgets.Dropdown(
                    options=options, value=spec.value if spec.value in values else values[0],
                    description=spec.label,
                )  # fmt: skip
            self._dress(control, spec)
            control.observe(self._on_change(spec.name), names="value")
            self.controls[spec.name] = control
            _set_attribute(self, spec.name, control)
        for part in self._parts:
            kind = widgets.Output if part.figure else widgets.HTMLMath
            view = kind(layout=widgets.Layout(width=FULL_WIDTH))  # not an HTML widget's 300 px
            view.add_class(f"course-part-{part.name}")
            self.parts[part.name] = view
            _set_attribute(self, part.name, view)
        return dict(self.controls)

    def _dress(self, control: widgets.Widget, spec: Control) -> None:
        control.add_class("course-control")
        control.add_class(f"course-control-{spec.name}")
        if isinstance(control, widgets.Checkbox | widgets.ToggleButtons):
            return  # they size themselves
        if "description_width" in control.style.keys and not control.style.description_width:
            control.style.description_width = self._style["description_width"]
        if control.layout.width is None and control.layout.max_width is None:
            control.layout = self._layout

    def _live_values(self, names: Sequence[str]) -> dict[str, Any]:
        return {name: self._specs[name].value_of(self.controls[name].value) for name in names}

    def _on_change(self, name: str) -> Callable[[dict], None]:
        def changed(_: dict) -> None:
            if self._refreshing:
                return  # a menu whose options follow this change: redrawn below, once
            self._refreshing = True
            try:
                self._refresh_menus_of(name)
            finally:
                self._refreshing = False
            self.redraw(name)

        return changed

    def _refresh_menus_of(self, name: str) -> None:
        """Give the live menus whose options follow control ``name`` their new options."""
        for spec in self._specs.values():
            if name in spec.depends and spec.live is None:
                self._refresh_options(spec)

    def _refresh_options(self, spec: Control) -> None:
        control = self.controls[spec.name]
        try:
            options = spec.menu_options(self._live_values(spec.depends))
        except ValueError:
            return  # the parent's text is wrong: the message says so
        index = min(control.index or 0, len(options) - 1)
        control.options = options  # one after the other: ipywidgets 8 resets the index to 0
        control.index = index  # after options set under hold_trait_notifications

    def set(self, **values: Any) -> None:
        """Set several controls at once (widget values, by name) and redraw once."""
        if self.book:
            raise RuntimeError("an explorer built for the book shows stored states only")
        unknown = set(values) - set(self.controls)
        if unknown:
            known = list(self.controls)
            raise ValueError(f"no controls {sorted(unknown)}; the controls are {known}")
        self._refreshing = True
        try:
            for name in self._specs:  # in order: a menu's options follow its parents first
                if name in values:
                    self.controls[name].value = values[name]
                    self._refresh_menus_of(name)
        finally:
            self._refreshing = False
        self.redraw()

    def redraw(self, changed: str | None = None) -> None:
        """Redraw the parts that depend on control ``changed`` (all parts if None)."""
        if self.book:
            raise RuntimeError("an explorer built for the book shows stored states only")
        try:
            values = self._live_values(list(self._specs))
        except ValueError as error:
            self.message.value = (
                f"<span style='color:{color('fail')}'>{html.escape(str(error))}</span>"
            )
            self.message.layout.display = None
            return
        self.message.layout.display = "none"
        changed_too = {changed} | {
            name for name, spec in self._specs.items() if changed in spec.depends
        }
        for part in self._parts:
            if changed is None or changed_too & self._closure(part.depends):
                _show(self.parts[part.name], _content(part, values), live=True)

    # ---------------------------------------------------------------- book

    def _build_book(self) -> dict[str, widgets.Widget]:
        if not hasattr(widgets, "Stack"):
            raise RuntimeError(
                "building an explorer for the book needs ipywidgets 8 (its Stack widget); "
                f"this is ipywidgets {widgets.__version__}. In a kernel, leave "
                f"{BOOK_VARIABLE} unset: the explorer runs live."
            )
        self._book = _Book()
        for spec in self._specs.values():
            self._book.controls[spec.name] = {}
            self._book.placed[spec.name] = self._tree(
                list(spec.depends), {}, lambda chosen, spec=spec: self._book_control(spec, chosen)
            )
            self._keep_in_step(spec)
            self.controls[spec.name] = self._book.controls[spec.name][
                tuple(self.controls[parent].index for parent in spec.depends)
            ]
        for part in self._parts:
            self.states[part.name] = {}
            levels = [name for name in self._specs if name in self._closure(part.depends)]
            root = self._tree(levels, {}, lambda chosen, part=part: self._leaf(part, chosen))
            self.parts[part.name] = root
        return self._book.placed

    def _book_control(self, spec: Control, chosen: Mapping[str, int]) -> widgets.Widget:
        options = spec.book_options(self._values(spec.depends, chosen))
        index = _index_of(spec.value, options)
        kind = {"slider": widgets.SelectionSlider, "menu": widgets.Dropdown,
                "buttons": widgets.ToggleButtons}[spec.kind]  # fmt: skip
        extra = {"continuous_update": True} if spec.kind == "slider" else {}
        control = kind(options=options, index=index, description=spec.label, **extra)
        control.add_class("course-control")
        control.add_class(f"course-control-{spec.name}")
        if spec.kind == "buttons":
            # the label beside the buttons (a ToggleButtons box is a block otherwise, its label
            # above them), and buttons as wide as their labels: two or three such controls
            # share a row
            control.layout = self._book.buttons
            control.style.button_width = "auto"
            control.style.description_width = "initial"
        else:
            control.layout = self._layout
            control.style.description_width = self._style["description_width"]
        key = tuple(chosen[name] for name in spec.depends)
        if key:  # one of a dependent control's widgets: which parents' values it serves
            control.add_class("course-instance-" + "-".join(str(i) for i in key))
        self._book.controls[spec.name][key] = control
        return control

    def _keep_in_step(self, spec: Control) -> None:
        """A dependent control's widgets (one per value of its parents) move together when
        they offer as many options: the reader who picks the last dimension and then another
        ``d_model`` still sees the last dimension. They start where the one for the parents'
        first values starts."""
        instances = self._book.controls[spec.name]
        if len(instances) < 2 or len({len(w.options) for w in instances.values()}) != 1:
            return
        first = instances[tuple(self.controls[parent].index for parent in spec.depends)]
        for instance in instances.values():
            if instance is not first:
                instance.index = first.index
                self._book.links.append(widgets.jslink((first, "index"), (instance, "index")))

    def _leaf(self, part: Part, chosen: Mapping[str, int]) -> widgets.Widget:
        names = [name for name in self._specs if name in chosen]
        values = self._values(names, chosen)
        try:
            content = _content(part, {name: values[name] for name in part.depends})
        except Exception as error:
            raise RuntimeError(
                f"part {part.name!r} failed for the book's values {values}: {error}"
            ) from error
        if part.figure:
            leaf = widgets.Output(layout=self._book.leaf)
        else:
            leaf = widgets.HTMLMath(layout=self._book.leaf, **_shared(self._book))
        _show(leaf, content)
        key = tuple(chosen[name] for name in names)
        leaf.add_class("course-state")
        leaf.add_class(f"course-part-{part.name}")
        leaf.add_class("--".join([f"course-key-{part.name}"] +
                                 [f"{name}-{chosen[name]}" for name in names]))  # fmt: skip
        if not part.figure and self._book.style is None:
            self._book.style = leaf.style
        self.states[part.name][key] = leaf
        return leaf

    def _tree(
        self,
        levels: list[str],
        chosen: dict[str, int],
        leaf: Callable[[dict[str, int]], widgets.Widget],
    ) -> widgets.Widget:
        """A leaf for ``chosen``, or a stack over the first level's book values, selected by
        that control, with a tree of the other levels under each value."""
        if not levels:
            return leaf(chosen)
        name, rest = levels[0], levels[1:]
        spec = self._specs[name]
        options = spec.book_options(self._values(spec.depends, chosen))
        children = [self._tree(rest, {**chosen, name: i}, leaf) for i in range(len(options))]
        control = self._book.controls[name][tuple(chosen[p] for p in spec.depends)]
        # A stack of a dependent control's widgets takes a control's width; a part's stacks
        # the part's (the page's width).
        is_control = "course-control" in getattr(children[0], "_dom_classes", ())
        layout = self._layout if is_control else self._book.layout
        stack = widgets.Stack(children, selected_index=control.index, layout=layout)
        self._book.links.append(widgets.jsdlink((control, "index"), (stack, "selected_index")))
        return stack

    def _values(self, names: Sequence[str], chosen: Mapping[str, int]) -> dict[str, Any]:
        """The parts' values of the controls ``names`` at the book indices ``chosen``."""
        return {name: self._specs[name].value_of(self._raw(name, chosen)) for name in names}

    def _raw(self, name: str, chosen: Mapping[str, int]) -> Any:
        """The widget value of control ``name`` at the book indices ``chosen``."""
        spec = self._specs[name]
        return spec.book_options(self._values(spec.depends, chosen))[chosen[name]][1]

    # ---------------------------------------------------------------- both

    def _closure(self, names: Sequence[str]) -> set[str]:
        """``names`` with the controls their options depend on."""
        found = set(names)
        for name in names:
            found |= set(self._specs[name].depends)
        return found

    def state_values(self, part: str, key: tuple[int, ...]) -> dict[str, Any]:
        """The widget values of the controls behind the book state ``key`` of ``part`` (a
        key of :attr:`states`), in control order: set a live explorer's controls to them and
        it shows that state."""
        names = [name for name in self._specs if name in self._closure(self._part(part).depends)]
        chosen = dict(zip(names, key, strict=True))
        return {name: self._raw(name, chosen) for name in names}

    def _part(self, name: str) -> Part:
        for part in self._parts:
            if part.name == name:
                return part
        raise KeyError(f"no part {name!r}; the parts are {[p.name for p in self._parts]}")


def _check_specs(
    controls: list[Control], parts: list[Part], rows: Sequence[Sequence[str]] | None
) -> None:
    names = [control.name for control in controls]
    if len(set(names)) != len(names):
        raise ValueError(f"control names must be unique, got {names}")
    for index, control in enumerate(controls):
        earlier = names[:index]
        for parent in control.depends:
            if parent not in earlier or controls[names.index(parent)].depends:
                raise ValueError(
                    f"control {control.name!r} depends on {parent!r}, which must be an earlier "
                    "control without dependencies of its own"
                )
        if control.live is None and control.options is None:
            raise ValueError(f"control {control.name!r} needs a live widget or options")
    for part in parts:
        unknown = set(part.depends) - set(names)
        if unknown:
            raise ValueError(f"part {part.name!r} depends on unknown controls {sorted(unknown)}")
    if rows is not None:
        listed = [name for row in rows for name in row]
        if sorted(listed) != sorted(names):
            raise ValueError(f"rows must list every control once, got {listed} for {names}")


def _shared(book: _Book) -> dict[str, Any]:
    """The style the book's HTML leaves share (the first leaf makes it)."""
    return {} if book.style is None else {"style": book.style}


def _offering(control: Control, offer: Mapping[str, Sequence[Any]]) -> Control:
    if control.name not in offer:
        return control
    values = tuple(offer[control.name])
    if control.value not in values and control.read is None:
        raise ValueError(
            f"the book must offer the first value of {control.name!r} ({control.value!r}), "
            f"got {list(values)}"
        )
    return replace(control, book=values)


def _index_of(value: Any, options: Sequence[Option]) -> int:
    for index, (_, option) in enumerate(options):
        if option == value:
            return index
    return 0


def _set_attribute(explorer: Explorer, name: str, widget: widgets.Widget) -> None:
    if hasattr(widgets.VBox, name):
        raise ValueError(f"{name!r} is a VBox attribute: choose another control or part name")
    setattr(explorer, name, widget)


def _show(view: widgets.Widget, content: str | dict, live: bool = False) -> None:
    """Put a part's content into its widget: HTML into an ``HTMLMath``, a figure's output into
    an ``Output``, replacing what it showed.

    A live figure in a kernel is displayed into the ``Output`` (as ``interactive_output``
    does, which every front-end supports, Colab's included); elsewhere, and in the book, the
    output is stored in the widget's state.
    """
    if not isinstance(view, widgets.Output):
        view.value = content
        return
    shell = get_ipython() if live else None
    if shell is None or getattr(shell, "kernel", None) is None:
        view.outputs = (content,)
        return
    with view:
        clear_output(wait=True)
        display(content["data"], metadata=content["metadata"], raw=True)
