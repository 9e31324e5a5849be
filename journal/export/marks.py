"""The step runs that may change a figure, as the impact and the charts look them up between
figures: a :class:`Mark` each (what a :class:`~journal.projections.timeline.StepRunView` has of
it too), or for a long journal :class:`Marks`, held in columns."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from journal.columns import Texts


@dataclass(frozen=True, slots=True)
class Mark:
    """A step run that may change a figure, as the impact and the charts look it up (its
    ``seq``, ``started``, ``step`` and ``host``, as a :class:`StepRunView` has them)."""

    seq: int
    started: str
    step: str
    host: str


class Marks(Sequence[Mark]):
    """The step runs that may change a figure, in seq order, held in columns (a year's
    journal holds a hundred thousand: 40 bytes each, not 170 as objects); each is made a
    :class:`Mark` as it is read."""

    def __init__(self) -> None:
        self.seqs = array("q")
        self._started = Texts()
        self._names: dict[str, int] = {}  # step and host names, numbered
        self._named: list[str] = []
        self._steps = array("i")
        self._hosts = array("i")

    def _number(self, name: str) -> int:
        found = self._names.get(name)
        if found is None:
            found = self._names[name] = len(self._named)
            self._named.append(name)
        return found

    def add(self, seq: int, started: str, step: str, host: str) -> None:
        self.seqs.append(seq)
        self._started.append(started)
        self._steps.append(self._number(step))
        self._hosts.append(self._number(host))

    def __len__(self) -> int:
        return len(self.seqs)

    @overload
    def __getitem__(self, index: int) -> Mark: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mark]: ...

    def __getitem__(self, index: int | slice) -> Mark | Sequence[Mark]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return Mark(
            self.seqs[index],
            self._started[index],
            self._named[self._steps[index]],
            self._named[self._hosts[index]],
        )

    def __iter__(self) -> Iterator[Mark]:
        return (self[i] for i in range(len(self)))

    def sort(self) -> None:
        """In seq order (items come in timeline order, a run placed by its own time)."""
        seqs, started = self.seqs, self._started
        if all(a <= b for a, b in zip(seqs, seqs[1:], strict=False)):
            return
        order = sorted(range(len(seqs)), key=seqs.__getitem__)
        self._started = Texts(started[i] for i in order)
        self.seqs = array("q", (seqs[i] for i in order))
        self._steps = array("i", (self._steps[i] for i in order))
        self._hosts = array("i", (self._hosts[i] for i in order))

    def only(self, hosts: Iterable[str | None]) -> Marks:
        """The marks of ``hosts``."""
        kept = Marks()
        wanted = {self._names[h] for h in hosts if h in self._names}
        for i, host in enumerate(self._hosts):
            if host in wanted:
                mark = self[i]
                kept.add(mark.seq, mark.started, mark.step, mark.host)
        return kept


def of_hosts(marks: Sequence[Any], hosts: Iterable[str | None]) -> Sequence[Any]:
    """The marks (or runs) of ``hosts``."""
    if isinstance(marks, Marks):
        return marks.only(hosts)
    wanted = set(hosts)
    return [m for m in marks if m.host in wanted]
