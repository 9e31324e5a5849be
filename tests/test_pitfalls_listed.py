"""The detectors are the modules ``journal.pitfalls.DETECTORS`` lists: no more, no fewer."""

from __future__ import annotations

import importlib
import pkgutil

import journal.pitfalls as pitfalls


def _detector_modules() -> set[str]:
    """The modules of the pitfalls package that define ``ID`` and ``detect``."""
    found = set()
    for info in pkgutil.iter_modules(pitfalls.__path__):
        module = importlib.import_module(f"{pitfalls.__name__}.{info.name}")
        if hasattr(module, "ID") and hasattr(module, "detect"):
            found.add(info.name)
    return found


def test_every_detector_module_is_listed_and_only_those() -> None:
    found = _detector_modules()
    listed = set(pitfalls.DETECTORS)
    unlisted = sorted(found - listed)
    assert not unlisted, (
        f"{unlisted} define ID and detect but are not in journal.pitfalls.DETECTORS: "
        "list each new detector there, or the catalogue and judge() never run it"
    )
    not_detectors = sorted(listed - found)
    assert not not_detectors, (
        f"journal.pitfalls.DETECTORS lists {not_detectors}, which define no ID and detect"
    )
    assert len(pitfalls.DETECTORS) == len(listed), "a module is listed twice"
    assert len(pitfalls.detectors()) == len(listed)
