"""Bounded error messages: whatever the input, a message is at most ``MAX_MESSAGE_LINES`` lines of
at most ``MAX_LINE_CHARS`` characters, and a value quoted in it at most ``MAX_VALUE_CHARS``.

``cut`` shortens a value where a message quotes it (a 10 MB YAML string, a describe line naming a
million brokers); ``bounded`` is the last step before any message reaches the terminal
(``spark_app.cli``), so no loader can print an unbounded one.
"""

from __future__ import annotations

from spark_app.limits import MAX_LINE_CHARS, MAX_MESSAGE_LINES, MAX_VALUE_CHARS


def cut(text: str, most: int = MAX_VALUE_CHARS) -> str:
    """``text``, or its start and end around a note of how much was left out: the end often
    holds what a reader needs (the fix, the closing quote)."""
    if len(text) <= most:
        return text
    gone = len(text) - most
    note = f" …[{gone:,} characters cut]… "
    keep = max(most - len(note), 2)
    head = keep * 2 // 3
    return text[:head] + note + text[len(text) - (keep - head) :]


def bounded(message: str) -> str:
    """``message`` cut to ``MAX_MESSAGE_LINES`` lines of ``MAX_LINE_CHARS`` characters; the last
    line kept says how many more there were (the first ones name what to fix first)."""
    lines = [cut(line, MAX_LINE_CHARS) for line in message.splitlines()] or [""]
    if len(lines) <= MAX_MESSAGE_LINES:
        return "\n".join(lines)
    more = len(lines) - (MAX_MESSAGE_LINES - 1)
    shown = lines[: MAX_MESSAGE_LINES - 1]
    return "\n".join([*shown, f"  … and {more:,} more line(s): fix these first, then run again"])
