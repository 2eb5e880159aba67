"""``kce scale SWEEP.yaml``: how the controller's work, and this emulator's cost, grow with a cluster.

A sweep (``sweep``) lists cluster sizes and operations; each operation at each size becomes a
scenario (``operations``) played on a fresh emulated cluster (``play``) and measured
(``measure``); the rows (``results``) are written as CSV, JSON, Markdown, PNG charts and an HTML
report (``outputs``, ``report``), with each operation's growth exponent (``growth``).
``command`` is the command line.
"""
