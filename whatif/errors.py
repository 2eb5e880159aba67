"""``WhatIfInputError``, apart from the snapshot code so that the command line imports no Spark."""

from __future__ import annotations


class WhatIfInputError(ValueError):
    """A snapshot input that cannot be read: the message says where and how to fix it."""
