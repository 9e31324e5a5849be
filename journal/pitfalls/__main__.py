"""`python -m journal.pitfalls`: print the catalogue (Markdown) from the detectors' docstrings."""

from journal.pitfalls import catalogue_markdown

print(catalogue_markdown(), end="")
