"""Offline demo of journal: re-enacts a GPU-server upgrade on a CPU machine with stand-in wheels."""
