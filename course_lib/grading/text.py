"""Showing text that students control (file names, ids, exception messages) on a terminal.

A file name or an exception message can hold escape sequences (``ESC [ 2 J`` clears the
screen, ``ESC ] 52`` writes to the clipboard on some terminals), carriage returns and line
feeds that forge or hide lines, and bidirectional overrides that show text in another order
than it has. :func:`terminal_safe` writes every such character as an escape (``\\x1b``,
``\\r``, ``\\u202e``), so the terminal shows it instead of obeying it.
"""

from __future__ import annotations

import re

__all__ = ["terminal_safe"]

# C0 controls (tab and line feed included: a message is one line), DEL, C1 controls, the
# bidirectional marks, embeddings, overrides and isolates, and the line and paragraph
# separators.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


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
