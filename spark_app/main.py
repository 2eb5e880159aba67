"""``spark-submit spark_app/main.py COMMAND ...``: the same commands as ``kce``."""

from __future__ import annotations

import sys

from spark_app.cli import main

if __name__ == "__main__":
    sys.exit(main())
