"""The rules by which a later fact shows a finding's condition gone: each detector names
those that apply to it in its module's ``RESOLVED_BY`` (the keys of :data:`RULES` and
:data:`FIGURE_RULES`), or gives a ``resolves(found, later, ids)`` function of its own
(:func:`rules_of`). The same step run again without the finding, a later probe that no longer
shows it, an install after which the variant asked for is there, a rollback that reached a set
from before, packages restored, a clean ``pip check``, a figure back within 5% of its reference.

:mod:`journal.pitfalls.lifecycle` offers each later run and figure to the open findings by
these rules; a rule's ``needs`` and ``refused_by`` let it skip the runs that cannot resolve
anything before any finding is looked at."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from journal.pitfalls.base import Finding
from journal.reading.bench import Figure
from journal.reading.subject import Run
from journal.runs import WENT_THROUGH

#: A rule: the sentence saying why ``later`` (a run on the finding's host, after it, whose
#: own findings have the ids ``ids``) shows the finding's condition gone, or None.
Rule = Callable[[Finding, Run, frozenset[str]], str | None]

#: In a rule's ``refused_by``: the run's own finding of the same pitfall.
SAME = "(the same pitfall)"


def _same_command(found: Finding, later: Run) -> bool:
    """Runs named after their command (imported, or typed in `journal shell`) are the same
    step only with the same command."""
    command = found.facts.get("command")
    by_command = found.facts.get("imported") or found.facts.get("interactive")
    return not (by_command or later.imported or later.interactive) or command == later.command


def rerun(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """The same step (for an imported or interactive command, the same command) went through
    again on the host without the finding."""
    if later.step != found.step or found.id in ids or not _same_command(found, later):
        return None
    if later.status not in WENT_THROUGH or later.exit_code not in (0, None):
        return None
    return f"{later.step} ran again on {later.host} and went through without {found.id}"


def probe(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A later probe on the host no longer shows the condition."""
    wanted = found.facts.get("probe", "torch-env")
    if wanted not in later.probes or found.id in ids:
        return None
    where = f"after {later.step}" if not later.key.startswith("probe-") else "on its own"
    return f"the {wanted} probe {where} on {later.host} no longer shows it"


def request_facts(req: Any) -> dict[str, Any]:
    """What a finding about an install request keeps of it, for :func:`installed` to know the
    same request again: its packages, their specs, its indexes and the variant it asks for."""
    return {
        "packages": sorted(req.names()),
        "specs": {r.key: r.spec or "" for r in req.packages},
        "indexes": sorted(_plain_url(u) for u in req.indexes),
        "variant": req.variant,
    }


def _plain_url(url: str) -> str:
    return url.strip().rstrip("/").lower()


def same_request(found: Finding, later: Run) -> set[str]:
    """The packages of ``found``'s request that an install in ``later``'s command asks for
    again: the same package, from the same variant (an index of it, or a pin of it) or the same
    index where the first named one, else with the same spec (the request repeated, with
    ``--reinstall`` or ``--upgrade``). A pin to another version, or the same name from another
    index, is another request: what it installs says nothing about the first."""
    from journal.reading.commands import install_requests, same_variant

    asked = set(found.facts.get("packages") or [])
    variant = found.facts.get("variant")
    indexes = set(found.facts.get("indexes") or [])
    specs: dict[str, str] = found.facts.get("specs") or {}
    again: set[str] = set()
    for req in install_requests(later.command):
        names = asked & req.names()
        if not names:
            continue
        theirs = {_plain_url(u) for u in req.indexes}
        for r in req.packages:
            if r.key not in names:
                continue
            if variant:
                if same_variant(r.variant or req.index_variant, variant):
                    again.add(r.key)
            elif indexes:
                if indexes & theirs:
                    again.add(r.key)
            elif (r.spec or "") == specs.get(r.key, "") and not theirs:
                again.add(r.key)
    return again


def installed(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A later install on the host of the same request took: the same package from the same
    variant (an index of it, or a pin of it) or the same index, or, where the first request
    named neither, with the same spec (the request repeated with `--reinstall`); the package
    snapshots show it changed, in the variant asked for (without snapshots, the torch-env
    probe shows torch in it), and neither a no-op nor a wrong variant was found about it. A pin
    to another version, or the same name from another index, asked for something else.

    (:func:`same_request` decides what the later install asked for again.)"""
    if ids & {"noop-install", "variant-not-switched"} or later.status not in WENT_THROUGH:
        return None
    again = same_request(found, later)
    if not again:
        return None
    variant = found.facts.get("variant")

    def fits(version: Any) -> bool:
        return not variant or _in_variant(version, variant)

    if later.after is not None:
        diff = later.diff
        changed = {k.lower() for k in diff.names()} if diff is not None else set()
        moved = sorted(n for n in again if n in changed)
        now = {n: (later.after.get(n) or {}).get("version") for n in moved}
        if not moved or not all(fits(v) for v in now.values()):
            return None
        was = later.before or {}
        shown = ", ".join(
            f"{n} {(was.get(n) or {}).get('version', '(new)')} -> {v}" for n, v in now.items()
        )
    else:
        torch = (later.probe("torch-env") or {}).get("torch")
        version = torch.get("version") if isinstance(torch, dict) else None
        if not variant or "torch" not in again or not fits(version):
            return None
        shown = f"torch {version} (its torch-env probe)"
    what = f": the {variant} build asked for" if variant else ", as asked for"
    return f"{later.step} on {later.host} asked for it again and installed {shown}{what}"


def _in_variant(version: Any, variant: str) -> bool:
    """Whether an installed version (``2.12.0+cu130``) is of the variant asked for."""
    from journal.reading.commands import same_variant
    from journal.versions import local_variant

    return isinstance(version, str) and same_variant(local_variant(version), variant)


def rolled_back(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A later `journal rollback` on the host reached its target set (no rollback-incomplete),
    and that set was recorded before the finding's run: the packages before that run
    (`before:STEP` of it), or those of an earlier run. What the run changed is undone."""
    target = later.rollback
    if not target or "rollback-incomplete" in ids or not went_through(later):
        return None
    if later.after is None or found.run is None:
        return None
    own = target.get("run") == found.run and target.get("phase") == "before"
    event = target.get("event")  # the target run's start: before the finding's run, or its own
    earlier = isinstance(event, int) and found.seq is not None and event < found.seq
    if not (own or earlier):
        return None
    return f"the rollback on {later.host} to {target.get('to') or 'an earlier set'} reached it"


def restored(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A later snapshot on the host shows every package the finding is about back at (or
    above) the version it had before, of the same build where it had one (`+cu128` back, not
    a `+cpu` or `+cu130` of a higher version)."""
    was: Mapping[str, str] = found.facts.get("restore") or {}
    snapshot = later.after
    if not was or snapshot is None:
        return None
    from journal.versions import local_variant, parse_version

    now = {}
    for name, version in was.items():
        entry = snapshot.get(name)
        if not entry or not isinstance(entry.get("version"), str):
            return None
        if parse_version(entry["version"]) < parse_version(version):
            return None
        if local_variant(version) and local_variant(entry["version"]) != local_variant(version):
            return None
        now[name] = entry["version"]
    shown = ", ".join(f"{n} {v}" for n, v in now.items())
    return f"after {later.step} on {later.host}: {shown} again"


#: What `pip check` and `uv pip check` print when nothing is broken.
CHECK_CLEAN = ("No broken requirements found", "All installed packages are compatible")
#: What a shell or python prints when the check itself never ran.
CHECK_NEVER_RAN = ("No module named", "command not found", "No such file or directory")


def pip_check(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A later `pip check` / `uv pip check` on the host found nothing broken: it said so
    (`No broken requirements found.`, uv's `All installed packages are compatible`), or exited
    0 where its exit status is known; one that never ran (`No module named pip`) says
    nothing."""
    if "pip check" not in later.command or found.id in ids or later.exit_code not in (0, None):
        return None
    if later.status not in WENT_THROUGH or later.has(*CHECK_NEVER_RAN):
        return None
    if later.exit_code is None and not later.has(*CHECK_CLEAN):
        return None
    return f"`{later.command.strip()[:80]}` on {later.host} found no broken requirement"


def probed(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A probe ran on the host after the change, in a run that changed no package itself (or
    on its own): what it saw is the change's result, not the next change's."""
    if not later.probes or (later.diff is not None and not later.diff.empty):
        return None
    names = ", ".join(sorted(later.probes))
    where = f"after {later.step}" if not later.key.startswith("probe-") else "on its own"
    return f"the {names} probe ran {where} on {later.host}"


def went_through(later: Run) -> bool:
    return later.status in WENT_THROUGH and later.exit_code in (0, None)


def has_probes(later: Run) -> bool:
    return bool(later.probes)


def has_snapshot(later: Run) -> bool:
    return later.after is not None


# What a run must have for each rule to resolve anything: checked once per run and rule.
rerun.needs = went_through  # type: ignore[attr-defined]
probe.needs = has_probes  # type: ignore[attr-defined]
installed.needs = lambda later: "install" in later.command and later.status in WENT_THROUGH  # type: ignore[attr-defined]
rolled_back.needs = lambda later: bool(later.rollback)  # type: ignore[attr-defined]
restored.needs = has_snapshot  # type: ignore[attr-defined]
pip_check.needs = lambda later: "pip check" in later.command  # type: ignore[attr-defined]
probed.needs = has_probes  # type: ignore[attr-defined]
for _rule in (rerun, probe, pip_check):
    _rule.refused_by = frozenset({SAME})  # type: ignore[attr-defined]
installed.refused_by = frozenset({"noop-install", "variant-not-switched"})  # type: ignore[attr-defined]

RULES: dict[str, Rule] = {
    "rerun": rerun,
    "probe": probe,
    "installed": installed,
    "rolled-back": rolled_back,
    "restored": restored,
    "pip-check": pip_check,
    "probed": probed,
}

#: Rules over figures: (finding, a later trusted figure on its host) -> why, or None.
FigureRule = Callable[[Finding, Figure], str | None]


def back_within(found: Finding, figure: Figure) -> str | None:
    """A later figure of the same series is back within the threshold of the reference: no
    lower than it for a figure better higher (a throughput, ``accept_length``), no higher for
    one better lower (a latency), by the figure's own direction."""
    series, reference = found.facts.get("series"), found.facts.get("reference")
    threshold = found.facts.get("threshold", 0.05)
    if series is None or reference is None or plain(_series(figure)) != plain(series):
        return None
    if not within(figure.value, reference, figure.direction, threshold):
        return None
    from journal.reading.bench import DISPLAY

    unit = f" {figure.unit}" if figure.unit else ""
    fallen = found.facts.get("fallen")
    against = (
        f" ({(figure.value - fallen) / fallen:+.1%} against {fallen:,.2f}{unit}; "
        f"the reference was {reference:,.2f}{unit})"
        if fallen
        else f" (the reference was {reference:,.2f}{unit})"
    )
    return f"{DISPLAY.get(figure.name, figure.name)} was back to {figure.value:,.2f}{unit}{against}"


def within(value: float, reference: float, direction: str, threshold: float) -> bool:
    """Whether ``value`` is back within ``threshold`` (a fraction) of ``reference``: no lower
    than it allows for a figure better higher, no higher for one better ``lower``."""
    if direction == "lower":
        return value <= reference * (1 + threshold)
    return value >= reference * (1 - threshold)


def plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists): facts compare the same whether a
    finding was just judged or read back from the stored projection."""
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def _series(figure: Figure) -> Any:
    from journal.reading.bench import figure_key

    return figure_key(figure)


FIGURE_RULES: dict[str, FigureRule] = {"figure": back_within}


def rules_of(module: Any) -> tuple[list[Rule], list[FigureRule]]:
    """A detector module's rules: its own ``resolves`` and the named ones of ``RESOLVED_BY``
    (``rerun`` where it names none)."""
    names = getattr(module, "RESOLVED_BY", ("rerun",))
    runs = [RULES[n] for n in names if n in RULES]
    figures = [FIGURE_RULES[n] for n in names if n in FIGURE_RULES]
    own = getattr(module, "resolves", None)
    if own is not None:
        runs.insert(0, own)
    own_figure = getattr(module, "resolves_figure", None)
    if own_figure is not None:
        figures.insert(0, own_figure)
    return runs, figures

