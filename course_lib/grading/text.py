"""Text that students control (file names, ids, messages, printed output), made safe for where
it goes: the terminal, the gradebook, CSV files and HTML pages.

- :func:`terminal_safe`, for a line printed on a terminal. A file name or an exception message
  can hold escape sequences (``ESC [ 2 J`` clears the screen, ``ESC ] 52`` writes to the
  clipboard on some terminals), carriage returns and line feeds that forge or hide lines, and
  bidirectional overrides that show text in another order than it has. Every such character
  is written as an escape (``\\x1b``, ``\\r``, ``\\u202e``), so the terminal shows it instead
  of obeying it.
- :func:`storable`, for text stored in the gradebook (and from there written to CSV files
  and feedback pages): characters that SQLite cannot store or that act on a reader are
  written as escapes, and its length is capped, with a note saying how much was cut.
- :func:`inert` and :func:`csv_text`, for CSV files that a spreadsheet opens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "CHECK_MESSAGE_LIMIT",
    "MESSAGE_LIMIT",
    "NAME_LIMIT",
    "OUTPUT_LIMIT",
    "csv_text",
    "inert",
    "storable",
    "terminal_safe",
]

# C0 controls (tab and line feed included: a message is one line), DEL, C1 controls, the
# bidirectional marks, embeddings, overrides and isolates, the line and paragraph separators,
# and the UTF-16 surrogates (U+D800 to U+DFFF), which no UTF-8 text can hold (a file name that
# is not UTF-8 has them; printing or storing them raises "surrogates not allowed").
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)
UNSTORABLE = UNSAFE  # what :func:`storable` escapes; in text of several lines, not \n and \t:
UNSTORABLE_IN_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
    "\ud800-\udfff]"
)

# Limits of what the gradebook keeps of each text an answer produces (in characters).
MESSAGE_LIMIT = 2000  # the grader's message for an exercise
CHECK_MESSAGE_LIMIT = 1000  # the message of one check
OUTPUT_LIMIT = 10_000  # what the code printed
NAME_LIMIT = 200  # a check's name, an exercise id

NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    if character in NAMED:
        return NAMED[character]
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: object) -> str:
    """``text`` as a string in which no character acts on a terminal: control characters,
    escape sequences and bidirectional controls are shown escaped (``\\x1b[2J``), everything
    else as it is."""
    return UNSAFE.sub(_escape, str(text))


def _cut_note(cut: int) -> str:
    return f" ... [{cut} more characters cut]"


def storable(text: object, limit: int | None = None, *, lines: bool = False) -> str:
    """``text`` as a string that SQLite, a CSV file, an HTML page and a terminal all take
    as it is, of at most ``limit`` characters (``None``: any length).

    - Lone UTF-16 surrogates (``chr(0xD800)``), NUL and every other control character, DEL,
      the C1 controls, the bidirectional controls and the line and paragraph separators are
      written as escapes: ``\\ud800``, ``\\x00``, ``\\x1b``, ``\\u202e``.
    - With ``lines`` (printed output, messages of several lines), line feeds and tabs stay,
      and carriage returns become line feeds (``\\r\\n`` one line feed); without it they are
      escaped too (``\\n``, ``\\t``, ``\\r``), so the text is one line.
    - Text longer than ``limit`` once escaped keeps its beginning and ends with
      `` ... [N more characters cut]``, N counting the characters of ``text`` left out; the
      whole is at most ``limit`` characters.
    """
    if not isinstance(text, str):
        text = str(text)
    total = len(text)
    # Escapes only lengthen text, so no more than `limit` characters of it can be kept; cut
    # before escaping, so that 32 MB of control characters never become 128 MB of escapes.
    head = text if limit is None else text[: limit + 1]
    if lines:
        head = head.replace("\r\n", "\n").replace("\r", "\n")
        cleaned = UNSTORABLE_IN_LINES.sub(_escape, head)
    else:
        cleaned = UNSTORABLE.sub(_escape, head)
    if limit is None or (total <= limit and len(cleaned) <= limit):
        return cleaned
    return _cut(text, limit, lines)


def _cut(text: str, limit: int, lines: bool) -> str:
    """The beginning of ``text``, escaped as :func:`storable` does, with the note of what was
    cut, in at most ``limit`` characters."""
    room = limit - len(_cut_note(len(text)))  # the longest the note can be
    pattern = UNSTORABLE_IN_LINES if lines else UNSTORABLE
    kept: list[str] = []
    length = 0
    used = 0  # characters of `text` kept
    while used < len(text) and room > 0:
        character = text[used]
        step = 1
        if lines and character == "\r":
            piece = "\n"
            if text[used + 1 : used + 2] == "\n":
                step = 2
        elif pattern.fullmatch(character):
            piece = _escape(pattern.fullmatch(character))  # type: ignore[arg-type]
        else:
            piece = character
        if length + len(piece) > room:
            break
        kept.append(piece)
        length += len(piece)
        used += step
    return "".join(kept) + _cut_note(len(text) - used)


# ----------------------------------------------------------------------------- CSV

# A spreadsheet runs a cell as a formula when it starts with one of these (after any spaces
# or line breaks); the full-width forms are taken as the same by some spreadsheets.
FORMULA_STARTS = ("=", "+", "-", "@", "＝", "＋", "－", "＠")
# What may come before the formula's first character: whitespace (spaces, tabs, line breaks)
# and zero-width characters.
LEADING = re.compile("[\\s\u200b\u200c\u200d\u2060\ufeff]*")
CSV_QUOTED = re.compile('[",\r\n\t]')


def inert(cell: object) -> object:
    """``cell``, with a ``'`` in front when it is text a spreadsheet would run as a formula:
    text that starts with a tab, a carriage return or a line feed, or whose first character
    other than whitespace (spaces, tabs, line breaks) and zero-width characters is ``=``,
    ``+``, ``-`` or ``@`` (or their full-width forms)."""
    if not isinstance(cell, str):
        return cell
    start = LEADING.match(cell).end()  # type: ignore[union-attr]
    if cell.startswith(("\t", "\r", "\n")) or cell[start:].startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


def _csv_cell(cell: object) -> str:
    if cell is None:
        return ""
    text = inert(storable(cell, lines=True)) if isinstance(cell, str) else str(cell)
    assert isinstance(text, str)
    if CSV_QUOTED.search(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_text(rows: Iterable[Iterable[object]]) -> str:
    """``rows`` as CSV text (RFC 4180 quoting, a line feed after each row), the one way every
    CSV file of the grader is written. Each text cell is made :func:`storable` (lines kept)
    and :func:`inert`; a cell is quoted (``"..."``, with ``""`` for a ``"``) when it holds a
    comma, a quote, a carriage return, a line feed or a tab, so that every reader sees one
    cell where there is one. ``None`` is an empty cell."""
    return "".join(",".join(_csv_cell(c) for c in row) + "\n" for row in rows)
