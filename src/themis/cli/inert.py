"""Text from elsewhere (the arbiter, a state directory) made inert before it reaches a
terminal.

App names are checked at submit, but what an app's trials log, the errors they raise,
reasons that quote them and an arbiter's error details are anyone's bytes. Written raw,
``\\x1b[2J`` clears the reader's screen, ``\\x1b]0;...\\x07`` retitles the window,
``\\x1b]52;c;...\\x07`` writes the clipboard, ``\\x1b]8;;URL\\x07`` hides a link, and a
bidi control turns ``invoice_\\u202egpj.exe`` into ``invoice_exe.jpg`` on screen.

:func:`inert` escapes every C0 and C1 control character, DEL and the Unicode bidi
controls and line separators, visibly (``\\x1b``, ``\\u202e``), so the reader sees that
they were there. rich does not do it: ``Text`` strips only BEL, BS, VT, FF and CR (ESC
passes), and ``rich.markup.escape`` only escapes ``[`` so that markup (``[link=...]``,
itself an OSC 8 hyperlink) is not parsed; a rich cell must also be a ``Text``, never a
markup string (:func:`cell`).
"""

from __future__ import annotations

from rich.text import Text

#: Unicode bidi controls: embeddings and overrides (U+202A-202E), isolates
#: (U+2066-2069), marks (U+200E, U+200F, U+061C).
BIDI_CONTROLS = (
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0x200E,
    0x200F,
    0x061C,
)
#: Characters that end a line without being a newline in a terminal's eyes.
LINE_SEPARATORS = (0x2028, 0x2029)

_TABLE: dict[int, str] = {
    **{code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))},
    **{code: f"\\u{code:04x}" for code in (*BIDI_CONTROLS, *LINE_SEPARATORS)},
}


def inert(text: object) -> str:
    """``text`` (made a string) with every control character escaped visibly."""
    return str(text).translate(_TABLE)


def cell(text: object) -> Text:
    """A rich table cell of ``text``: inert, and never parsed as markup."""
    return Text(inert(text))
