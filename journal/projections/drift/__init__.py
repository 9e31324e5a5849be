"""Drift: what each host's GPU stack is, the value most hosts of its group hold, and the hosts
that differ, each with the step run after which it diverged.

Two pure steps. :func:`fold` replays a journal's probes and snapshots into :class:`Readings`
(per host, per thing that matters, the stretches of readings that read the same, each with the
event it was read from); it can be extended with newer events. :func:`compare` lines the hosts
of each group up against each other. `journal drift` and the web UI's hosts page both show it.

The rules, which docs/cli-reading.md repeats:

- The **majority** of a row is the value more hosts of the group hold than any other (hosts
  never read do not count; an unreadable field counts as the value ``?``). When two values tie
  for most, the row has **no majority** and every host in it is flagged: nothing says which one
  is odd, and a split fleet is drift all the same (two hosts that differ are always a tie).
- A flagged host **diverged after** the step run that its first differing reading followed: the
  start of the last stretch of its readings that differ from the majority (in a tie: that read
  its current value). The step run whose own snapshot or probe showed it names itself; between
  two readings with no step run, the change was made outside the recorded steps; several step
  runs with no reading between them are all named. A host that differed from its first reading
  on differs **since first seen**.
"""

from journal.projections.drift.compare import (
    Cell,
    Drift,
    GroupDrift,
    Row,
    Since,
    compare,
    group_hosts,
    runbook_groups,
)
from journal.projections.drift.readings import (
    EVENT_TYPES,
    KEY_PACKAGES,
    NONE,
    NOT_INSTALLED,
    PRINTED,
    STACK,
    TRANSCRIPT,
    UNREADABLE,
    HostReadings,
    Readings,
    Segment,
    Source,
    StepRunRef,
    Value,
    fold,
    key_package,
    read_field,
    transcript_reading,
)

__all__ = [
    "Cell",
    "Drift",
    "GroupDrift",
    "Row",
    "Since",
    "compare",
    "group_hosts",
    "runbook_groups",
    "EVENT_TYPES",
    "KEY_PACKAGES",
    "NONE",
    "NOT_INSTALLED",
    "PRINTED",
    "STACK",
    "TRANSCRIPT",
    "UNREADABLE",
    "HostReadings",
    "Readings",
    "Segment",
    "Source",
    "StepRunRef",
    "Value",
    "fold",
    "key_package",
    "read_field",
    "transcript_reading",
]
