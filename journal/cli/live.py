"""The terminal's view of a fleet run: a live table of the hosts (rich), and its summary.

With a terminal on both stdout and stderr and more than one host, the table (one row per
host: state, elapsed time, exit status, the last line printed) is redrawn in place on stderr
and *replaces* the ``[host]``-prefixed live output, which would scroll it away; the output is
recorded all the same (`journal log --full-output`, the web UI). journal's own lines (package
changes, probe results) are printed above the table. Without a terminal nothing is redrawn:
the output is echoed with host prefixes and each host gets its verdict line, as always.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from journal.cli.echo import Echo
from journal.display import plural, seconds
from journal.service.fleet import FleetRun, HostVerdict, Schedule

#: How much of a line the table keeps (the column cuts it to the terminal's width).
LINE_KEEP = 200
#: A line still being printed is kept up to this many bytes (a 5 MB line costs nothing).
PARTIAL_KEEP = 4096
ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
STYLES = {
    "waiting": "dim",
    "running": "yellow",
    "ok": "green",
    "skipped": "cyan",  # could not run on that host, said why: neither green nor red
    "not run": "dim",
    "not started": "dim",  # stopped before its command was launched: nothing ran there
}


def wants_live(count: int) -> bool:
    """A live table for ``count`` hosts: more than one, and a terminal on stdout and stderr."""
    return (
        count > 1
        and sys.stdout.isatty()
        and sys.stderr.isatty()
        and os.environ.get("TERM", "") not in ("", "dumb")
    )


def echo_for(count: int) -> Echo:
    """What shows a fleet of ``count`` hosts at work: the live table, or the prefixed echo."""
    return LiveTable() if wants_live(count) else Echo(prefix=count > 1)


def shown_line(data: bytes) -> str:
    """A line of output as a table cell: what is visible after the last carriage return,
    without escape sequences or control characters, cut to ``LINE_KEEP``."""
    text = data.decode("utf-8", "replace").rsplit("\r", 1)[-1]
    text = CONTROLS.sub("", ESCAPES.sub("", text)).expandtabs(4).strip()
    return text[:LINE_KEEP]


@dataclass
class _Row:
    """One host's row of the table."""

    state: str = "waiting"
    began: float | None = None
    elapsed: float | None = None
    exit_code: int | None = None
    last: str = ""
    reason: str | None = None


def state_of(verdict: HostVerdict) -> str:
    """The table's word for how a host ended."""
    if verdict.ok:
        return "skipped" if verdict.status == "skipped" else "ok"
    words = {
        "interrupted": "interrupted",
        "timed-out": "TIMED OUT",
        "not started": "not started",
        "disk full": "DISK FULL",
    }
    return words.get(verdict.status, "FAILED")


class LiveTable(Echo):
    """Echo for a terminal: a live table of the fleet instead of the prefixed output."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__(prefix=True)
        self.console = console or Console(file=sys.stderr, highlight=False)
        self.rows: dict[str, _Row] = {}
        self.title = ""
        self._tails: dict[str, bytearray] = {}
        self._rows_lock = threading.Lock()
        self._live: Live | None = None

    # --- FleetWatch -----------------------------------------------------------------------

    def fleet_started(self, label: str, hosts: list[str], schedule: Schedule) -> None:
        with self._rows_lock:
            self.rows = {h: _Row() for h in hosts}
            self._tails = {h: bytearray() for h in hosts}
            self.title = f"{label} on {plural(len(hosts), 'host')} ({schedule.describe()})"
        self.close()
        self._live = Live(
            console=self.console,
            get_renderable=self.table,
            refresh_per_second=4,
            redirect_stdout=False,
            redirect_stderr=True,
        )
        self._live.start(refresh=True)

    def host_started(self, host: str) -> None:
        with self._rows_lock:
            row = self.rows.setdefault(host, _Row())
            row.state, row.began = "running", time.monotonic()

    def host_finished(self, host: str, verdict: HostVerdict, elapsed: float) -> None:
        with self._rows_lock:
            row = self.rows.setdefault(host, _Row())
            row.state, row.elapsed = state_of(verdict), elapsed
            row.exit_code, row.reason = verdict.exit_code, verdict.reason
        if self._live is not None:
            self._live.refresh()

    def interrupted(self) -> None:
        self.console.print(Text("\njournal: interrupting every host…"), soft_wrap=True)

    def fleet_finished(self, run: FleetRun[Any]) -> None:
        with self._rows_lock:
            for host in run.not_run:
                self.rows.setdefault(host, _Row()).state = "not run"
        self.close()

    def close(self) -> None:
        """Stop redrawing; the table's last state stays on the screen."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    # --- Echo -----------------------------------------------------------------------------

    def for_host(self, host: str) -> Callable[[str, bytes], None]:
        def write(stream: str, data: bytes) -> None:
            with self._rows_lock:
                tail = self._tails.setdefault(host, bytearray())
                tail += data
                lines = bytes(tail).split(b"\n")
                done = [line for line in lines[:-1] if line.strip()]
                del tail[:]
                tail += lines[-1][-PARTIAL_KEEP:]
                latest = lines[-1] if lines[-1].strip() else (done[-1] if done else b"")
                if latest:
                    self.rows.setdefault(host, _Row()).last = shown_line(latest)

        return write

    def flush_host(self, host: str) -> None:
        with self._rows_lock:
            self._tails.pop(host, None)

    def say(self, text: str) -> None:
        self.console.print(Text(f"journal: {text}"), soft_wrap=True)

    # --- rendering ------------------------------------------------------------------------

    def table(self) -> Table:
        """The table as it stands now."""
        table = Table(title=self.title, title_justify="left", expand=True, box=None)
        table.add_column("host", no_wrap=True)
        table.add_column("state", no_wrap=True)
        table.add_column("elapsed", justify="right", no_wrap=True)
        table.add_column("exit", justify="right", no_wrap=True)
        table.add_column("last line", ratio=1, no_wrap=True, overflow="ellipsis")
        now = time.monotonic()
        with self._rows_lock:
            for host, row in self.rows.items():
                took = row.elapsed if row.elapsed is not None else None
                if took is None and row.began is not None:
                    took = now - row.began
                style = STYLES.get(row.state, "bold red")
                failed = row.state not in STYLES and row.reason
                table.add_row(
                    host,
                    Text(row.state, style=style),
                    seconds(took) if took is not None else "",
                    "" if row.exit_code is None else str(row.exit_code),
                    Text(row.reason if failed else row.last, style="red" if failed else ""),
                )
        return table


def not_run_lines(run: FleetRun[Any]) -> list[str]:
    """One line per host never started: the roll stopped, or Ctrl-C came first."""
    why = (
        f"the roll stopped at {', '.join(run.stopped_by)}"
        if run.stopped_by
        else "interrupted before it started"
    )
    return [f"journal: [-] {run.label} on {host} not run: {why}" for host in run.not_run]


def fleet_summary(run: FleetRun[Any]) -> str:
    """``N succeeded, N failed, N not run``, the slowest host and the wall time."""
    counts = f"{len(run.succeeded)} succeeded, {len(run.failed)} failed, {len(run.not_run)} not run"
    if run.not_run and run.stopped_by:
        counts += (
            f" (the roll stopped at {', '.join(run.stopped_by)}; "
            f"not touched: {', '.join(run.not_run)})"
        )
    elif run.not_run:
        counts += f" (interrupted; not started: {', '.join(run.not_run)})"
    slowest = run.slowest()
    slow = f"; slowest {slowest[0]} {seconds(slowest[1])}" if slowest else ""
    return (
        f"journal: {run.label} on {plural(len(run.hosts), 'host')} ({run.schedule.describe()}): "
        f"{counts}{slow}; wall {seconds(run.wall)}"
    )


def fleet_report(
    run: FleetRun[Any],
    echo: Echo,
    verdict_line: Callable[[Any], str] | None = None,
    failed: Callable[[Any], bool] = lambda result: True,
) -> list[str]:
    """The lines after a fleet run: each host's ``verdict_line`` (under a live table, which
    showed the rest, only those ``failed``), the hosts not run, and with several hosts the
    summary."""
    live = isinstance(echo, LiveTable)
    lines = [verdict_line(r) for r in run.results if not live or failed(r)] if verdict_line else []
    if len(run.hosts) > 1:
        lines += not_run_lines(run)
        lines.append(fleet_summary(run))
    return lines
