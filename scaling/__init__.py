"""``kce scale SWEEP.yaml``: how the controller's work, and this emulator's cost, grow with a cluster.

A sweep (``sweep``) lists cluster sizes and operations; each operation at each size becomes a
scenario (``operations``) played on a fresh emulated cluster, timed and counted (``play``,
``measure``); the rows are written as CSV, JSON, Markdown, PNG charts and an HTML report
(``outputs``, ``charts``), with each operation's growth exponent (``growth``). ``command`` is the
command line.
"""
