"""Readers of what a run typed and printed: install commands, printed versions and facts,
benchmark figures, output windows, and the judged-run vocabulary they read (:mod:`subject`).

The pitfall detectors (:mod:`journal.pitfalls`), the services and the exports read runs
through these modules; nothing here imports the detectors.
"""
