"""The self-contained HTML report both ``kce whatif`` and ``kce run`` write: the page
(``page``) and its inline SVG charts (``charts``). It imports neither ``spark_app`` nor
``whatif``, so both can use it."""
