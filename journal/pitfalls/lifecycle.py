"""What became of each finding: open, acknowledged by hand, or resolved by a later fact.

Findings are judged on read; their lifecycle is a fold over the same record, in the order things
happened. A finding opens at its run (or at the figure that fell). Each later step run, standalone
probe or figure on the same host is offered to every finding still open there, and the first one
that shows the condition gone resolves it (``resolved_by``). What shows it gone is each detector's
rule (its module's ``RESOLVED_BY``: names of the rules of :mod:`journal.pitfalls.resolution`, or a
``resolves(found, later, ids)`` function of its own): the same step run again without the finding, a
later probe that no longer shows it, an install after which the variant asked for is there, a figure
back within 5% of its reference, a clean ``pip check``. A condition that comes back after it was
resolved is a new open finding naming the earlier one (``regression_of``). Acknowledgements are
events too, and so is withdrawing one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from journal.pitfalls.base import Acknowledgement, Finding, Resolution
from journal.pitfalls.resolution import SAME, FigureRule, Rule, rerun, rules_of
from journal.reading.bench import Figure
from journal.reading.subject import Run


@dataclass
class AckBook:
    """The acknowledgements in force, folded from PitfallAcknowledged and
    PitfallUnacknowledged events: target (a finding's key or a pitfall id) -> acknowledgement."""

    acks: dict[str, Acknowledgement] = field(default_factory=dict)

    def acknowledged(self, target: str, note: str, by: str, at: str, event: int) -> None:
        self.acks[target] = Acknowledgement(note, by, at, event, target)

    def withdrawn(self, target: str) -> None:
        self.acks.pop(target, None)

    def of(self, found: Finding) -> Acknowledgement | None:
        """The acknowledgement covering ``found``: of its key, or of its pitfall id when that
        was given after the finding was made (a condition that comes later is new)."""
        own = self.acks.get(found.key)
        if own is not None:
            return own
        wide = self.acks.get(found.id)
        if wide is not None and (found.seq is None or wide.event > found.seq):
            return wide
        return None

    def __bool__(self) -> bool:
        return bool(self.acks)



class Stored:
    """Where the open findings of earlier folds are kept (the ledger's rows): which pitfalls
    have open findings on a host, and those findings, loaded only when a fact could resolve
    them."""

    def ids(self, host: str | None) -> Iterable[str]:
        return ()

    def load(self, host: str | None, id: str) -> list[Finding]:
        return []


@dataclass
class Lifecycle:
    """The open findings per host and pitfall, and the latest resolved one per (pitfall,
    host), folded in the order of the record: :meth:`opened` adds findings, :meth:`ran` and
    :meth:`measured` offer later facts to those still open (each pitfall's only when one of
    its rules could apply, so a host with thousands of open findings costs little)."""

    open: dict[str | None, dict[str, list[Finding]]] = field(default_factory=dict)
    #: (pitfall id, host) -> the key of the latest finding resolved there
    resolved: dict[tuple[str, str | None], str] = field(default_factory=dict)
    done: dict[int, Finding] = field(default_factory=dict)  # id(opened) -> resolved
    #: the findings ``done`` is keyed by, held: a finding freed once resolved (a stored one,
    #: loaded for this fold) would leave its id to the next one made, which ``done`` would
    #: then take for it (its resolution lost, or given to another finding)
    resolved_from: list[Finding] = field(default_factory=list)
    stored: Stored = field(default_factory=Stored)
    #: (host, id) whose stored open findings were loaded into ``open``
    loaded: set[tuple[str | None, str]] = field(default_factory=set)

    def opened(self, found: Finding) -> Finding:
        """Add a finding; one whose condition was resolved before names that finding."""
        earlier = self.resolved.get((found.id, found.host))
        if earlier is not None and found.regression_of is None:
            found = replace(found, regression_of=earlier)
        self.open.setdefault(found.host, {}).setdefault(found.id, []).append(found)
        return found

    def open_of(self, host: str | None, id: str) -> list[Finding]:
        """The open findings of one pitfall on a host, the stored ones loaded first."""
        mine = self.open.setdefault(host, {}).setdefault(id, [])
        if (host, id) not in self.loaded:
            self.loaded.add((host, id))
            mine[:0] = self.stored.load(host, id)
        return mine

    def ids(self, host: str | None) -> list[str]:
        return list(dict.fromkeys([*self.stored.ids(host), *self.open.get(host, {})]))

    def ran(self, later: Run, ids: frozenset[str]) -> list[Finding]:
        """Offer a run (on its host) to the open findings; those it resolved."""
        _load_rules()
        gone = []
        for id in self.ids(later.host):
            rules = [r for r in _RULES.get(id, ([rerun], []))[0] if _applies(r, later, id, ids)]
            if rules:
                gone += self._offer(later.host, id, lambda f, rs=rules: _by_run(f, later, ids, rs))
        return gone

    def measured(self, figure: Figure) -> list[Finding]:
        """Offer a trusted figure (on its host) to the open findings; those it resolved."""
        if figure.invalid:
            return []
        _load_rules()
        gone = []
        for id in self.ids(figure.host):
            if _RULES.get(id, ([], []))[1]:
                gone += self._offer(figure.host, id, lambda f: _by_figure(f, figure))
        return gone

    def _offer(
        self, host: str | None, id: str, test: Callable[[Finding], Resolution | None]
    ) -> list[Finding]:
        mine = self.open_of(host, id)
        still, gone = [], []
        for found in mine:
            resolution = test(found)
            if resolution is None:
                still.append(found)
                continue
            done = replace(found, resolved_by=resolution)
            self.resolved[(found.id, found.host)] = done.key
            self.done[id_of(found)] = done
            self.resolved_from.append(found)
            gone.append(done)
        if gone:
            mine[:] = still
        return gone


id_of = id


def _applies(rule: Rule, later: Run, id: str, ids: frozenset[str]) -> bool:
    """Whether ``rule`` could resolve anything of pitfall ``id`` with ``later`` (whose own
    findings have the ids ``ids``): asked once per run, pitfall and rule, before any finding
    is looked at. A rule's ``needs`` is what the run must have; its ``refused_by``, the ids of
    the run's own findings that keep it from resolving anything (``SAME``: the pitfall's own),
    so that a host with thousands of open findings of a pitfall costs nothing for the many
    runs that cannot resolve them."""
    refused = getattr(rule, "refused_by", ())
    if refused and (ids & refused or (SAME in refused and id in ids)):
        return False
    need = getattr(rule, "needs", None)
    return need is None or need(later)



def _by_run(
    found: Finding, later: Run, ids: frozenset[str], rules: list[Rule]
) -> Resolution | None:
    for rule in rules:
        why = rule(found, later, ids)
        if why:
            kind = "probe" if later.key.startswith("probe-") else "run"
            run = None if kind == "probe" else later.key
            return Resolution(kind, run, later.step, later.host, later.event, why)
    return None


def _by_figure(found: Finding, figure: Figure) -> Resolution | None:
    if found.seq is not None and figure.event is not None and figure.event <= found.seq:
        return None
    for rule in _RULES.get(found.id, ([], []))[1]:
        why = rule(found, figure)
        if why:
            return Resolution("figure", figure.run, None, figure.host, figure.event, why)
    return None


_RULES: dict[str, tuple[list[Rule], list[FigureRule]]] = {}


def _load_rules() -> None:
    if not _RULES:
        from journal.pitfalls import detectors

        for module in detectors():
            _RULES[module.ID] = rules_of(module)


def follow(
    runs: Iterable[Run],
    figures: Iterable[Figure],
    findings: Iterable[Finding],
    acks: AckBook | None = None,
) -> list[Finding]:
    """The findings with their lifecycle: each offered the later runs and figures of its
    host in the order of the record, then acknowledgements applied. The order is kept."""
    return with_acks(follow_from(Lifecycle(), runs, figures, findings), acks)


def follow_from(
    life: Lifecycle, runs: Iterable[Run], figures: Iterable[Figure], findings: Iterable[Finding]
) -> list[Finding]:
    """Go on folding ``life`` (findings still open from before, the latest resolved ones)
    with these runs, figures and new findings; the new findings as they end (the earlier ones
    it resolved are in ``life.done``)."""
    _load_rules()
    findings = list(findings)
    by_run: dict[str, set[str]] = {}
    for found in findings:
        if found.run:
            by_run.setdefault(found.run, set()).add(found.id)
    # The record in order: runs and figures by their event, findings opening at theirs.
    stream: list[tuple[int, int, Any]] = []
    for run in runs:
        stream.append((run.event or 0, 1, run))
    for figure in figures:
        if figure.event is not None:
            stream.append((figure.event, 2, figure))
    pending = sorted((f for f in findings), key=lambda f: f.seq if f.seq is not None else -1)
    stream.sort(key=lambda item: (item[0], item[1]))
    made: dict[int, Finding] = {}  # id(original) -> as it ends
    at = 0
    for seq, kind, item in stream:
        while at < len(pending) and (pending[at].seq or -1) < seq:
            made[id(pending[at])] = life.opened(pending[at])
            at += 1
        if kind == 1:
            life.ran(item, frozenset(by_run.get(item.key, ())))
        else:
            life.measured(item)
    while at < len(pending):
        made[id(pending[at])] = life.opened(pending[at])
        at += 1
    out = []
    for found in findings:
        now = made.get(id(found), found)
        out.append(life.done.get(id(now), now))
    return out


def with_acks(findings: list[Finding], acks: AckBook | None) -> list[Finding]:
    """The findings with the acknowledgements in force applied (and withdrawn ones taken off)."""
    if not acks and not any(f.acknowledged for f in findings):
        return findings
    out = []
    for found in findings:
        ack = acks.of(found) if acks else None
        out.append(found if ack == found.acknowledged else replace(found, acknowledged=ack))
    return out
