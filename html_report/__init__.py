"""The self-contained HTML report both ``kce whatif`` and ``kce run`` write: the page
(``page``), its inline SVG charts (``charts``) and step lines over time (``timeline``). It imports
neither ``spark_app`` nor ``whatif``, so both can use it."""
