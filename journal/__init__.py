"""journal: an event-sourced upgrade journal for GPU servers."""

__version__ = "0.1.0"
