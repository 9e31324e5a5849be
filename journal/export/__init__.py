"""Exports of the record: a step's output as asciicast v2 (the postmortem comes later)."""
