"""Benchmarks: built-in GPU measurements run by a host's target python (issue 6 builds the rest)."""
