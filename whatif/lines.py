"""Lines of a text input (``--describe``, ``--rack-map``, ``--sizes``), each bounded while it is
read: a line longer than ``MAX_FIELD_CHARS`` (a replica list naming millions of brokers) is
refused before it is held, let alone split into ids."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

from spark_app.limits import MAX_FIELD_CHARS
from whatif.errors import WhatIfInputError


def bounded_lines(f: TextIO, where: str) -> Iterator[str]:
    """The lines of ``f``; ``WhatIfInputError`` at the first longer than ``MAX_FIELD_CHARS``."""
    number = 0
    while line := f.readline(MAX_FIELD_CHARS + 1):
        number += 1
        if len(line) > MAX_FIELD_CHARS:
            raise WhatIfInputError(
                f"{where}:{number}: a line longer than {MAX_FIELD_CHARS:,} characters, the most "
                "a line of this input may have — fix the file"
            )
        yield line
