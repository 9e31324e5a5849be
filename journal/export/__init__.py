"""Exports of the record: the postmortem (Markdown, single-file HTML, JSON), the SVG charts
they share with the web UI, and a step's output as asciicast v2."""
