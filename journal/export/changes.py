"""What changed on each host, for the postmortem: package diffs and probe diffs, and the
versions each host ended with.

A step run with package snapshots says exactly what it changed (or that it changed nothing,
which is how a no-op install shows). A run without snapshots (an imported transcript) says only
what its installer printed (uv's ``+``/``-`` lines, pip's ``Successfully installed``), and the
document marks which is which (``source``). A probe's diff is what it read differently from the
previous result of the same probe on the same host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from journal.probes.summary import shown
from journal.projections.packages import PackageChange, change_text, normalize
from journal.projections.timeline import ProbeView, StepRunView, Timeline
from journal.projections.unread import snapshots_of
from journal.reading.installs import output_changes, requests
from journal.reading.subject import Run

#: Probe fields that change on every run or repeat what the snapshots say.
VOLATILE = ("seconds", "probe")
#: Fields shown per probe diff (the rest are counted).
PROBE_FIELDS = 30
#: A probe field named so (its last dotted part) is where or when something was read, not what:
#: its change is noise in a diff (``nccl_library.path``).
NOISE_NAMES = frozenset(
    {"path", "paths", "file", "location", "time", "ts", "timestamp", "seconds", "elapsed",
     "duration", "started", "finished", "took"}
)  # fmt: skip
NOISE_SUFFIXES = ("_path", "_paths", "_file", "_time", "_at", "_seconds", "_ts")
#: What a probe field reads when it holds nothing: absent (None here), None, unreadable, empty.
NOTHING = (None, "None", "?", "", "[]")
#: Lines of a failed step's stderr the postmortem shows (its tail), and the most characters of
#: one line kept (a longer line is cut, and says so).
TAIL_LINES = 20
TAIL_LINE_CHARS = 400
#: Packages whose version is always worth stating when the host has them.
KEY_PACKAGES = (
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "numpy",
    "sgl-kernel",
    "sglang-kernel",
    "flashinfer-python",
    "flashinfer-cubin",
    "sglang",
    "vllm",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
)


def _is_bench(run: StepRunView) -> bool:
    return run.benchmark is not None or bool(run.metrics)


def outputs_needed(timeline: Timeline) -> list[str]:
    """The step runs whose output the postmortem reads: installs without package snapshots."""
    return [
        run.run_id
        for run in timeline.step_runs()
        if run.diff is None and not _is_bench(run) and requests(run.command)
    ]


def read_outputs(store: Any, journal: str, timeline: Timeline) -> dict[str, str]:
    """The recorded output of the runs :func:`outputs_needed` names, from ``store``, as the
    detectors are shown it (:class:`journal.reading.window.Window`): a long output's first
    and last few megabytes, read chunk by chunk, so that the changes the postmortem reads in
    it are those the findings were judged on, and no output is held whole."""
    from journal.events import OutputChunk
    from journal.output import output_text
    from journal.reading.window import Window

    return {
        run: output_text(
            Window().extend(store.read(journal, types=[OutputChunk.type], run_id=run)).records
        )
        for run in outputs_needed(timeline)
    }


def failed_runs(timeline: Timeline) -> list[StepRunView]:
    """The step runs that did not succeed (failed, timed out, interrupted, lost), in order."""
    from journal.runs import DONE

    return [r for r in timeline.step_runs() if r.status not in (*DONE, "running")]


def stderr_tail(store: Any, run_id: str, count: int = TAIL_LINES) -> dict[str, Any]:
    """The last ``count`` lines a run printed on stderr, read chunk by chunk
    (:meth:`EventStore.output_chunks`, :func:`journal.output.tail`): only those lines, the
    line being read and a count are ever held, however long the output. ``lines``: the tail
    (ANSI codes out, each line cut at :data:`TAIL_LINE_CHARS`); ``before``: how many stderr
    lines came before it."""
    from journal.output import tail
    from journal.terminal import CONTROL, clean

    chunks = (chunk for _, chunk in store.output_chunks(run_id))
    # a character more than is shown, to tell a line that long from a longer one
    found = tail(chunks, count, limit=TAIL_LINE_CHARS + 1, keep="start", stream="stderr", text=True)
    lines = []
    for line in found.lines:
        text = CONTROL.sub("", clean(line.text.rstrip("\r")))
        lines.append(text[:TAIL_LINE_CHARS] + " …" if len(line.text) > TAIL_LINE_CHARS else text)
    return {"lines": lines, "before": found.before}


def failures(store: Any, timeline: Timeline) -> dict[str, dict[str, Any]]:
    """Run id -> :func:`stderr_tail` of each run :func:`failed_runs` names."""
    return {run.run_id: stderr_tail(store, run.run_id) for run in failed_runs(timeline)}


def _package(change: PackageChange) -> dict[str, Any]:
    return {
        "name": change.name,
        "before": change.before,
        "after": change.after,
        "kind": change.kind,
        "text": change_text(change),
    }


def printed_changes(run: StepRunView, output: str) -> list[PackageChange]:
    """The changes a run's installer printed (no snapshots to say otherwise)."""
    subject = Run(key=run.run_id, step=run.step, host=run.host, command=run.command, text=output)
    found = []
    for change in output_changes(subject):
        kind = change.kind
        found.append(PackageChange(change.name, change.before, change.after, kind))  # type: ignore[arg-type]
    return found


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """A probe result as ``dotted.path -> text`` (lists of scalars as one text)."""
    out: dict[str, str] = {}
    if isinstance(value, dict) and "unavailable" not in value:
        for key, item in value.items():
            if not prefix and key in VOLATILE:
                continue
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and any(isinstance(x, (dict, list)) for x in value):
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}.{i}"))
    else:
        out[prefix or "value"] = shown(value)
    return out


def noise(field: str, before: str | None, after: str | None) -> bool:
    """Whether a probe field's change says nothing: it held nothing before and after (absent,
    None, unreadable: ``nccl_library.path: - → None``, or ``nccl_library: ? → -`` once the
    field became a table whose own fields are shown), or it is where or when something was read
    (a path, a time)."""
    if before in NOTHING and after in NOTHING:
        return True
    last = field.rsplit(".", 1)[-1].lower()
    return last in NOISE_NAMES or last.endswith(NOISE_SUFFIXES)


def probe_diff(before: ProbeView, after: ProbeView) -> list[dict[str, Any]]:
    """The fields ``after`` read differently from ``before`` (same probe, same host), noise
    (:func:`noise`) left out."""
    return fields_diff(flatten(before.result or {}), flatten(after.result or {}))


def fields_diff(old: dict[str, str], new: dict[str, str]) -> list[dict[str, Any]]:
    """The fields of two flattened results (:func:`flatten`) that differ, noise left out."""
    rows = []
    for key in [*old, *(k for k in new if k not in old)]:
        was, now = old.get(key), new.get(key)
        if was != now and not noise(key, was, now):
            rows.append({"field": key, "before": was, "after": now})
    return rows


def _probes(
    probes: Iterable[ProbeView], previous: dict[tuple[str, str], tuple[ProbeView, dict[str, str]]]
) -> list[dict[str, Any]]:
    """What each probe read differently from the one before it on its host (``previous``:
    the last of each, with its result flattened once)."""
    found = []
    for probe in probes:
        if probe.result is None or probe.probe == "packages":
            continue
        key = (probe.host, probe.probe)
        flat = flatten(probe.result)
        before = previous.get(key)
        previous[key] = (probe, flat)
        if before is None:
            continue
        last, was = before
        rows = fields_diff(was, flat)
        if rows:
            found.append(
                {
                    "probe": probe.probe,
                    "since": last.ts,
                    "fields": rows[:PROBE_FIELDS],
                    "more": max(0, len(rows) - PROBE_FIELDS),
                }
            )
    return found


class HostChanges:
    """What changed on each host, an item at a time (:func:`host_changes`): ``add`` each
    item in timeline order; ``found``: per host its entries (each as ``keep`` keeps it, in a
    ``column``: a long journal's as compact JSON, its numbers in an array), ``packages``: per
    host the version each package it changed ended with. ``output`` gives the recorded output
    of a run without snapshots (None for one whose output is not read: see
    :func:`outputs_needed`)."""

    def __init__(
        self,
        output: Callable[[StepRunView], str | None],
        keep: Callable[[dict[str, Any]], Any] = lambda entry: entry,
        column: Callable[[], Any] = list,
    ) -> None:
        self.output, self.keep, self.column = output, keep, column
        self.previous: dict[tuple[str, str], tuple[ProbeView, dict[str, str]]] = {}
        self.found: dict[str, list[Any]] = {}
        self.packages: dict[str, dict[str, str | None]] = {}

    def _put(self, host: str, entry: dict[str, Any]) -> None:
        for package in entry["packages"]:
            self.packages.setdefault(host, {})[normalize(package["name"])] = package["after"]
        found = self.found.get(host)
        if found is None:
            found = self.found[host] = self.column()
        found.append(self.keep(entry))

    def add(self, item: Any) -> None:
        if isinstance(item, ProbeView):
            probes = _probes([item], self.previous)
            if probes:
                entry = {
                    "kind": "probe",
                    "run": None,
                    "step": f"probe {item.probe}",
                    "time": item.ts,
                    "source": None,
                    "packages": [],
                    "probes": probes,
                    "unread": [],
                }
                self._put(item.host, entry)
            return
        if not isinstance(item, StepRunView) or _is_bench(item):
            return
        source, packages = None, []
        diff = item.diff
        if diff is not None:
            source, packages = "snapshots", [_package(c) for c in diff.changes]
        else:
            text = self.output(item)
            printed = printed_changes(item, text) if text is not None else []
            if printed:
                source, packages = "output", [_package(c) for c in printed]
        probes = _probes(item.probes, self.previous)
        # a snapshot that could not be read: what the run changed is unknown, and said so
        unread = [u.to_dict() for u in snapshots_of(item)] if diff is None else []
        if source is None and not probes and not unread:
            return
        self._put(
            item.host,
            {
                "kind": "step",
                "run": item.run_id,
                "step": item.step,
                "time": item.started,
                "source": source,
                "packages": packages,
                "probes": probes,
                "unread": unread,
                # whether its command asks an installer for packages: one that changed none is
                # the evidence of a no-op install, and told; other runs that changed none are
                # counted (:func:`told`)
                "install": bool(requests(item.command)),
            },
        )


def quiet(entry: dict[str, Any]) -> bool:
    """Whether a change entry says only that a run which installs nothing changed nothing."""
    return (
        entry["source"] == "snapshots"
        and not entry["packages"]
        and not entry["probes"]
        and not entry["unread"]
        and not entry.get("install")
    )


def told(entries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A host's change entries as the Markdown and HTML postmortems tell them: each that
    changed something (or is an install that changed nothing), then, where there are any,
    the other runs whose snapshots before and after agree, counted by step: ``kind``
    ``quiet``, ``count``, ``steps`` (step: runs) and ``other`` (whether any entry came
    before)."""
    counted: dict[str, int] = {}
    other = False
    for entry in entries:
        if quiet(entry):
            counted[entry["step"]] = counted.get(entry["step"], 0) + 1
        else:
            other = True
            yield entry
    if counted:
        yield {"kind": "quiet", "count": sum(counted.values()), "steps": counted, "other": other}


def quiet_text(quiet: dict[str, Any]) -> str:
    """``12 other step runs changed no package (their snapshots before and after agree)``."""
    n = quiet["count"]
    runs = f"{n:,} {'other ' if quiet['other'] else ''}step run{'' if n == 1 else 's'}"
    their = "its" if n == 1 else "their"
    return f"{runs} changed no package ({their} snapshots before and after agree)"


def host_changes(timeline: Timeline, outputs: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Per host, in order: each step run that changed packages (or verifiably changed none)
    or after which a probe read something new, and each standalone probe that did."""
    return _changes(timeline, outputs).found


def _changes(timeline: Timeline, outputs: Mapping[str, str]) -> HostChanges:
    found = HostChanges(lambda run: outputs.get(run.run_id))
    for item in timeline.items:
        found.add(item)
    return found


def _torch_env(probe: ProbeView) -> dict[str, Any]:
    from journal.probes.summary import summary, value

    result = probe.result or {}
    fields = {
        "torch": "torch.version",
        "torch_cuda": "torch.cuda",
        "nccl": "nccl",
        "driver": "driver",
        "cuda_driver": "cuda_driver",
        "gpu_count": "gpu_count",
        "gpu_name": "gpu_name",
        "nvcc": "nvcc.release",
        "python": "python",
    }
    out: dict[str, Any] = {"time": probe.ts, "summary": summary(probe.probe, result)}
    for name, path in fields.items():
        found = value(result, path)
        out[name] = None if found is None else shown(found)
    return out


def versions(
    timeline: Timeline,
    outputs: Mapping[str, str],
    changes: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per host: the latest torch-env reading, and the versions it ended with of the key
    packages and of every package the journal changed (from its latest package snapshot, or
    else from what the installer printed last; ``changes``: :func:`host_changes`, where the
    caller has them)."""
    if changes is None:
        changed = _changes(timeline, outputs).packages
    else:
        changed = {}
        for host, entries in changes.items():
            for entry in entries:
                for package in entry["packages"]:
                    changed.setdefault(host, {})[normalize(package["name"])] = package["after"]
    hosts = [*timeline.hosts, *(r.host for r in timeline.step_runs())]
    return versions_of(hosts, changed, timeline.latest_packages.get, timeline.latest_probes.get)


def versions_of(
    hosts: Iterable[str],
    changed: dict[str, dict[str, str | None]],
    packages_of: Callable[[str], dict[str, Any] | None],
    probes_of: Callable[[str], dict[str, ProbeView] | None],
) -> dict[str, dict[str, Any]]:
    """:func:`versions` from what it reads: the hosts (the journal's, then those of its runs),
    the packages each changed (:attr:`HostChanges.packages`), each host's latest package set
    and latest probes."""
    out: dict[str, dict[str, Any]] = {}
    for host in dict.fromkeys([*hosts, *changed]):
        snapshot = packages_of(host)
        packages: dict[str, str | None] = {}
        if snapshot is not None:
            entries = {normalize(k): v for k, v in snapshot.items()}
            for key in [*KEY_PACKAGES, *changed.get(host, {})]:
                entry = entries.get(key)
                if entry is not None:
                    packages[entry.get("name") or key] = entry.get("version")
                elif key in changed.get(host, {}):
                    packages[key] = None  # removed
            source = "snapshot"
        else:
            packages = dict(changed.get(host, {}))
            source = "installer output" if packages else None
        probe = (probes_of(host) or {}).get("torch-env")
        if not packages and probe is None:
            continue
        out[host] = {
            "torch_env": None if probe is None else _torch_env(probe),
            "packages": packages,
            "source": source,
        }
    return out
