"""The events of a journal: facts that happened, appended once and never changed.

Each event is a frozen dataclass with a stable ``type`` string and a schema ``version``. Its
docstring is its documentation (the docs list them from here). Serialising, and upcasting an
old version to the current one, live in :mod:`journal.mapper`, never in views.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    """Base of every event; ``host`` and ``run_id`` are also stored as columns for queries."""

    type: ClassVar[str] = ""
    version: ClassVar[int] = 1

    @property
    def host(self) -> str | None:
        """The host column: the event's ``host_name`` field, where it has one."""
        return getattr(self, "host_name", None)

    @property
    def run_id(self) -> str | None:
        """The step-run column: the event's ``run`` field, where it has one."""
        return getattr(self, "run", None)


@dataclass(frozen=True)
class JournalOpened(Event):
    """A journal was created or its runbook's plan changed: its name, hosts and ordered steps.

    The latest one is the plan that `journal status` measures progress against.
    """

    type: ClassVar[str] = "JournalOpened"

    name: str
    runbook: str
    hosts: dict[str, str]
    plan: list[str]
    #: the hosts' groups where no runbook holds them: an Ansible inventory's, as the
    #: playbook run that opened the journal read it (drift and the hosts page compare within)
    groups: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class HostKeyAccepted(Event):
    """An SSH host key not yet known was accepted because the runbook or CLI asked for it."""

    type: ClassVar[str] = "HostKeyAccepted"

    host_name: str
    target: str
    key_type: str
    fingerprint: str
    known_hosts: str


@dataclass(frozen=True)
class StepStarted(Event):
    """A step began on one host: the command as sent (secrets redacted), its env and where.

    ``redactions`` says what kind of secret was removed from which field, never the value.
    ``pid`` and ``machine`` identify the recording process, so a reader can tell a step that
    is still running from one whose recorder died (shown as lost, or as not started before
    its ``CommandLaunched``). A rollback run is a step run named ``rollback`` whose
    ``rollback`` names its target set. A command typed in `journal shell` is a step run with
    ``interactive`` set (its step named after the command). A task of an Ansible playbook
    on one host has ``ansible`` set (journal's callback plugin records it).
    """

    type: ClassVar[str] = "StepStarted"

    run: str
    step: str
    host_name: str
    target: str
    command: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float | None = None
    pid: int = 0
    machine: str = ""
    plan_run: str | None = None
    imported: bool = False
    redactions: list[dict[str, Any]] = field(default_factory=list)
    benchmark: str | None = None
    #: an imported command's own start, when its transcript dates it (UTC, as the store
    #: writes times): the timeline places the run there, among the steps run here
    at: str | None = None
    #: a rollback run (`journal rollback`): ``{"to": the --to text, "run": the run whose
    #: snapshot is the target, "phase": "before" or "after", "packages": {normalised name:
    #: version}}``, the target set its after-snapshot must equal; None for any other run
    rollback: dict[str, Any] | None = None
    #: a command typed in `journal shell` (a step run of kind interactive), not a runbook step
    interactive: bool = False
    #: its recorder records ``CommandLaunched`` before it hands the command to the host, so
    #: that a run whose recorder died without one is known not to have started (False in
    #: runs recorded before journal did, and in those of `journal shell` and imports)
    launch_marked: bool = False
    #: a task of an Ansible playbook on one host (a step run of kind ansible, recorded by
    #: journal's callback plugin): ``playbook``, ``play``, ``task``, ``path`` (the task's
    #: file:line), ``module``, ``batch`` (of the play's ``serial`` batches, 1-based),
    #: ``changed``, ``failed``, ``skipped``, ``unreachable`` as Ansible said; None otherwise
    ansible: dict[str, Any] | None = None


@dataclass(frozen=True)
class CommandLaunched(Event):
    """journal is handing a step run's command to its host (recorded just before it does):
    from here on the host may be running it. A run whose recorder died before this event
    was ``not started`` (killed during its connection or its before-snapshot): nothing of it
    ran on the host, and the next `journal run step` runs it; one whose recorder died after
    it is ``lost`` (the command's fate unknown until `journal attach`)."""

    type: ClassVar[str] = "CommandLaunched"

    run: str
    host_name: str


@dataclass(frozen=True)
class OutputChunk(Event):
    """A batch of bytes a running step printed on one stream, exactly as printed.

    ``data`` holds the bytes as text when they are valid UTF-8 (``encoding`` "utf-8"), else as
    base64 (``encoding`` "base64"), so nothing is lost. ``t`` is seconds since the step started
    when the first of these bytes arrived; ``size`` the byte count.
    """

    type: ClassVar[str] = "OutputChunk"

    run: str
    host_name: str
    stream: str
    data: str
    encoding: str
    size: int
    t: float
    redactions: list[dict[str, Any]] = field(default_factory=list)
    #: bytes of the stream the command had printed up to the end of this chunk (before
    #: redaction): where `journal attach` goes on reading the run's spool
    end: int | None = None


@dataclass(frozen=True)
class StepFinished(Event):
    """A step ended: ``status`` is succeeded, failed, interrupted, timed-out, skipped (a
    benchmark that could not run on that host and said why in ``reason``: no failure),
    ``not started`` (stopped before its command was handed to the host: nothing ran there,
    no failure of the command) or ``disk full`` (journal stopped it, or did not launch it,
    because the disk under its database was full).

    ``exit_code`` is the command's own status (None when it never returned one), ``signal``
    the signal that ended it where known, ``reason`` a sentence for anything but a plain exit.
    """

    type: ClassVar[str] = "StepFinished"

    run: str
    host_name: str
    status: str
    exit_code: int | None
    duration: float
    signal: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class NoteAdded(Event):
    """A person wrote a note on the timeline; ``tags`` such as ``lesson`` or ``root-cause``."""

    type: ClassVar[str] = "NoteAdded"

    text: str
    author: str = ""
    tags: list[str] = field(default_factory=list)
    host_name: str | None = None


@dataclass(frozen=True)
class PackagesSnapshotted(Event):
    """Every distribution of a host's target python, with version, installer and install time.

    ``phase`` is ``before`` or ``after`` for the snapshots around a step run (``run``), or
    ``probe`` for one taken by `journal run probe packages`. ``packages`` maps the normalised
    name to ``{"name", "version", "installer", "installed"}``, and ``direct_url`` (PEP 610's
    ``url`` with ``archive_info``, ``dir_info`` or ``vcs_info``) for a distribution installed
    from a URL, a file or a folder.
    """

    type: ClassVar[str] = "PackagesSnapshotted"

    host_name: str
    phase: str
    python: str
    packages: dict[str, dict[str, Any]]
    seconds: float
    run: str | None = None


@dataclass(frozen=True)
class ProbeRecorded(Event):
    """A probe ran on a host and returned ``result`` (its JSON), or failed with ``error``.

    Probes that follow a step carry that step run's ``run``; a field a probe could not read
    holds ``{"unavailable": "why"}`` in ``result`` rather than failing the probe. A probe
    that could not be read at all (``result`` None: the target python missing or crashing,
    output that is no JSON) is recorded too, ``error`` saying why (redacted as recorded): a
    package snapshot that failed is one of these, ``probe`` ``packages``, since it has no
    package set to record. ``phase`` says when it ran: ``before`` or ``after`` its step run
    (a snapshot), ``after`` (a probe after a step), ``probe`` (`journal run probe`); None in
    events recorded before journal kept it.
    """

    type: ClassVar[str] = "ProbeRecorded"

    host_name: str
    probe: str
    result: dict[str, Any] | None
    seconds: float
    error: str | None = None
    run: str | None = None
    phase: str | None = None


@dataclass(frozen=True)
class ExpectationChecked(Event):
    """One ``expect`` entry was checked: ``key`` (``torch.version``, ``packages.numpy``), the
    ``expected`` spec, the ``actual`` value read, and the ``verdict`` pass or fail (with why)."""

    type: ClassVar[str] = "ExpectationChecked"

    host_name: str
    key: str
    expected: str
    actual: Any
    verdict: str
    reason: str | None = None
    probe: str | None = None
    run: str | None = None


@dataclass(frozen=True)
class MetricRecorded(Event):
    """A measured figure: ``name`` (``output_token_throughput``), ``value`` in ``unit``
    (``tok/s``), and ``labels`` saying what was measured where (``benchmark``, ``host``, and
    any given with ``--label``, e.g. ``phase=before``, ``concurrency=1``).

    ``source`` is ``parsed`` (read by the benchmark's parser from the output of step run
    ``run``; ``line`` and ``text`` give the line it was read from), ``builtin`` (a built-in GPU
    benchmark), ``manual`` (entered by hand with `journal record metric`, by ``author``) or
    ``imported`` (read from an imported transcript). ``invalid`` says why the figure cannot be
    trusted (failed requests, wrong values, a failed run), else None.
    """

    type: ClassVar[str] = "MetricRecorded"

    name: str
    value: float
    unit: str | None
    labels: dict[str, str]
    source: str
    host_name: str | None = None
    run: str | None = None
    benchmark: str | None = None
    line: int | None = None
    text: str | None = None
    invalid: str | None = None
    author: str = ""


@dataclass(frozen=True)
class PitfallAcknowledged(Event):
    """Someone looked at a finding and acknowledged it, with a note (why it is fine, or what
    was done). ``finding`` is a finding's key (``noop-install:RUN``) or a pitfall id for all."""

    type: ClassVar[str] = "PitfallAcknowledged"

    finding: str
    note: str
    author: str = ""


@dataclass(frozen=True)
class PitfallUnacknowledged(Event):
    """An acknowledgement was withdrawn: ``finding`` (a key or a pitfall id, as acknowledged)
    is judged open again unless a later fact resolved it."""

    type: ClassVar[str] = "PitfallUnacknowledged"

    finding: str
    author: str = ""


@dataclass(frozen=True)
class TranscriptImported(Event):
    """A terminal session done by hand was imported: its file, digest and command count. Its
    commands follow as step runs flagged ``imported`` (at the time their transcript dates them,
    else at the import's)."""

    type: ClassVar[str] = "TranscriptImported"

    file: str
    sha256: str
    host_name: str
    commands: int


@dataclass(frozen=True)
class StepReattached(Event):
    """A process took over recording a run whose recorder was lost (`journal attach`): its
    ``pid`` and ``machine`` are the run's recorder from here on, and it records the output
    from ``offsets`` (bytes of each stream already recorded) on."""

    type: ClassVar[str] = "StepReattached"

    run: str
    host_name: str
    pid: int
    machine: str
    offsets: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class NotificationSent(Event):
    """One attempt to deliver a notification to a ``[notify.NAME]`` webhook (``channel``):
    ``delivered`` or not, with the ``reason`` (the HTTP status, a timeout, a refused
    connection), the ``attempt`` (1, 2, … of ``attempts``) and how long it took (``seconds``).

    ``trigger`` is what it told of (``step-failed``, ``finding``, ``plan-finished``,
    ``drift``, ``rollback``, ``test``) and ``subject`` which one (a finding's key, a plan
    run); ``run`` and ``host_name`` the step run and host it is about, where there is one.
    ``url`` is the webhook's scheme and host only: its path is a secret and never stored.
    """

    type: ClassVar[str] = "NotificationSent"

    channel: str
    trigger: str
    url: str
    format: str
    delivered: bool
    attempt: int
    attempts: int
    seconds: float
    status: int | None = None
    reason: str | None = None
    subject: str | None = None
    run: str | None = None
    host_name: str | None = None


@dataclass(frozen=True)
class RolloutStarted(Event):
    """A gated rollout began (`journal run plan --rolling N --gate NAME`), or went on from
    the batch where it stopped (``resumed``, `--resume`): its id (``rollout``), the gate, the
    batches of hosts in order, at most ``size`` each, what a failed gate does (``on_fail``:
    ``stop`` or ``rollback``) and the plan run it is part of. Each host's baseline is its
    latest figures recorded before the first ``RolloutStarted`` of the rollout."""

    type: ClassVar[str] = "RolloutStarted"

    rollout: str
    gate: str
    size: int
    batches: list[list[str]]
    on_fail: str = "stop"
    plan_run: str | None = None
    resumed: bool = False
    #: the batch it begins with (1 unless ``resumed``)
    first_batch: int = 1


@dataclass(frozen=True)
class BatchGated(Event):
    """One batch of a rollout went through its gate after running the plan: ``passed`` or
    not, and each check on each host, ``{"host", "check", "name", "ok", "reason"}`` where
    ``check`` is ``plan`` (the batch's plan runs), ``probe`` (its expectations), ``stack``
    (torch and its variant, CUDA, NCCL and the driver agreeing across the rollout),
    ``figure`` (with ``baseline``, ``value``, ``percent``, ``tolerance``, ``verdict``, ``run``,
    ``baseline_run``), ``health`` or ``hook`` (``before_batch``; with ``run``)."""

    type: ClassVar[str] = "BatchGated"

    rollout: str
    batch: int
    hosts: list[str]
    passed: bool
    checks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class RolloutFinished(Event):
    """How a rollout ended: ``completed`` (every batch passed its gate), ``stopped`` (a
    batch failed its plan or its gate), ``rolled-back`` (and that batch was rolled back to
    before the rollout), or ``interrupted``; at which ``batch``, why, the hosts left
    ``drained`` (taken out by ``before_batch`` and not put back) and those ``untouched``."""

    type: ClassVar[str] = "RolloutFinished"

    rollout: str
    status: str
    batch: int | None = None
    reason: str = ""
    drained: list[str] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        JournalOpened,
        HostKeyAccepted,
        StepStarted,
        CommandLaunched,
        OutputChunk,
        StepFinished,
        StepReattached,
        NoteAdded,
        PackagesSnapshotted,
        ProbeRecorded,
        ExpectationChecked,
        MetricRecorded,
        PitfallAcknowledged,
        PitfallUnacknowledged,
        TranscriptImported,
        NotificationSent,
        RolloutStarted,
        BatchGated,
        RolloutFinished,
    )
}
