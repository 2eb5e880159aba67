"""The limits on kce's inputs, in one place (docs/scenarios.md, "Limits", lists them).

Each is checked before what it bounds is allocated: a file's size before it is read, a line's
length while it is read, a YAML node's depth while it is composed, a count before the rows it
counts are generated. A limit crossed is an input error (exit 2) whose message names the limit.
"""

from __future__ import annotations

# -- the cluster ---------------------------------------------------------------------------------
# Far above any Kafka cluster (and ten times the largest table the emulator is measured on, 1e7
# partitions): an absurd count is refused at once rather than exhausting memory or running for days.
MAX_BROKERS = 100_000  # brokers a cluster may have (generated, listed, or added by a what-if)
MAX_PARTITIONS = 100_000_000  # partitions a cluster may hold, at any time of a scenario

# -- input files ---------------------------------------------------------------------------------
# PyYAML's pure-Python loader holds about 100 times a file's size in memory (3 MB of state rows:
# 300 MB) and reads well under 1 MB a second; a larger scenario generates its cluster instead.
MAX_YAML_BYTES = 8 << 20  # a scenario, quickstart config or sweep file
MAX_YAML_DEPTH = 64  # nested mappings and lists of a YAML file (a scenario needs 8)
MAX_PLAN_BYTES = 64 << 20  # a reassignment plan (JSON)
# One line of --describe text or --rack-map/--sizes CSV, and one YAML scalar: a partition line
# names at most 31 replicas in each of its lists, far below this.
MAX_FIELD_CHARS = 1 << 20

# -- sweeps and samples --------------------------------------------------------------------------
# K-broker sets `kce whatif fail --any K` evaluates, each against every partition in one job
MAX_SAMPLES = 1_000_000
MAX_SWEEP_POINTS = 10_000  # points of a `kce scale` sweep (the combinations of its axes)

# -- messages ------------------------------------------------------------------------------------
MAX_MESSAGE_LINES = 3  # lines of one error message
MAX_LINE_CHARS = 400  # characters of one line of it
MAX_VALUE_CHARS = 200  # characters of an input value quoted in it
