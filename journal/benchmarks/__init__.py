"""Benchmarks: the runbook's ``[benchmarks.NAME]`` tables, run by `journal run bench NAME`.

A benchmark is a shell ``run`` whose output a ``parser`` reads (``sglang``, ``vllm``,
``nccl-tests``, ``llama-bench``, or ``regex`` with named groups in ``pattern``), or a
``builtin`` GPU measurement (``matmul``, ``memcpy``, ``allreduce``) run by the host's target
python with torch. Every figure becomes a ``MetricRecorded`` event.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

#: The built-in GPU benchmarks (each a function of scripts/gpu.py).
BUILTIN = ("matmul", "memcpy", "allreduce")
BENCH_KEYS = {
    "run",
    "parser",
    "builtin",
    "pattern",
    "units",
    "labels",
    "env",
    "cwd",
    "timeout",
    "hosts",
    "description",
}
DEFAULT_TIMEOUT_S = 3600.0
LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")

Fail = Callable[[str, str], Exception]


@dataclass(frozen=True)
class BenchmarkSpec:
    """How to run one benchmark and read its figures."""

    name: str
    parser: str
    run: str | None = None
    builtin: str | None = None
    patterns: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    hosts: list[str] = field(default_factory=list)
    description: str = ""

    def command(self, python: str) -> str:
        """The shell command run on a host whose target python is ``python``."""
        if self.builtin is None:
            assert self.run is not None
            return self.run
        source = resources.files("journal.benchmarks.scripts").joinpath("gpu.py").read_text()
        # Written to a file on the host, not run with `python -c`: allreduce starts one process
        # per GPU with multiprocessing's spawn, which imports the worker from the script's file.
        # The python path stays unquoted so that ~ expands on the host; -u so that each figure
        # arrives as it is measured, with no pty to line-buffer it.
        return (
            'f=$(mktemp "${TMPDIR:-/tmp}/journal-bench-XXXXXX.py") && '
            f'printf "%s" {shlex.quote(source)} > "$f" && '
            f'{python} -u "$f" {self.builtin}; s=$?; rm -f "$f"; exit $s'
        )


def guess_parser(command: str, text: str) -> str | None:
    """Which parser reads a pasted command's output (an imported transcript names none), or
    None when the output holds no benchmark summary."""
    if "vllm" in command and ("Benchmark Result" in text or "Throughput:" in text):
        return "vllm"
    if "Avg latency:" in text and "vllm" in command:
        return "vllm"
    if "Benchmark Result" in text or "bench_one_batch" in command:
        return "sglang"
    if "Avg bus bandwidth" in text or "Out of bounds values" in text:
        return "nccl-tests"
    if "llama-bench" in command or ("| model" in text and "t/s" in text):
        return "llama-bench"
    if "Throughput:" in text and "requests/s" in text:
        return "vllm"
    if '{"metric":' in text:
        return "builtin"
    return None


def parse_label(text: str, where: str = "--label") -> tuple[str, str]:
    """``k=v`` as a (key, value) pair; ValueError with the reason for anything else."""
    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise ValueError(f"{where} {text!r} is not key=value (e.g. phase=before)")
    if not LABEL.match(key):
        raise ValueError(
            f"{where} {text!r}: the key {key!r} is not a usable label name "
            "(letters, digits, '_', '.', '-', starting with a letter)"
        )
    return key, value.strip()


def specs_from_runbook(
    tables: dict[str, Any], hosts: list[str], fail: Fail
) -> dict[str, BenchmarkSpec]:
    """The runbook's benchmarks, validated; ``fail(key_path, message)`` makes the error."""
    from journal.benchmarks.parsers import PARSERS, ParserError, compile_patterns
    from journal.runbook import NAME, NAME_RULE, suggest

    specs = {}
    for name, table in tables.items():
        key = f"benchmarks.{name}"
        if not NAME.match(name):
            raise fail(key, f"{name!r} is not a usable name ({NAME_RULE})")
        if not isinstance(table, dict):
            raise fail(key, 'expected a table with run = "..." and parser = "..."')
        for option in table:
            if option not in BENCH_KEYS:
                raise fail(
                    f"{key}.{option}",
                    f"unknown key {option!r}{suggest(option, sorted(BENCH_KEYS))}",
                )
        builtin = table.get("builtin")
        run = table.get("run")
        parser = table.get("parser")
        if builtin is not None:
            if not isinstance(builtin, str) or builtin not in BUILTIN:
                raise fail(
                    f"{key}.builtin",
                    f"expected one of {', '.join(BUILTIN)}, got {builtin!r}"
                    + (suggest(builtin, list(BUILTIN)) if isinstance(builtin, str) else ""),
                )
            for option in ("run", "parser", "pattern", "units"):
                if option in table:
                    raise fail(
                        f"{key}.{option}",
                        f"a builtin benchmark runs its own script and reads its own output; "
                        f"{option} does not apply",
                    )
            parser = "builtin"
        else:
            if not isinstance(run, str) or not run.strip():
                raise fail(
                    f"{key}.run",
                    'missing: give the shell command (run = "...") or builtin = "matmul"',
                )
            choices = [p for p in PARSERS if p != "builtin"]
            if parser is None:
                raise fail(
                    f"{key}.parser",
                    f"missing: which parser reads the output? ({', '.join(choices)})",
                )
            if not isinstance(parser, str) or parser not in choices:
                hint = suggest(parser, choices) if isinstance(parser, str) else ""
                raise fail(
                    f"{key}.parser", f"expected one of {', '.join(choices)}, got {parser!r}{hint}"
                )
        patterns = table.get("pattern", [])
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise fail(f"{key}.pattern", "expected a regex string or a list of them")
        if parser == "regex":
            if not patterns:
                raise fail(
                    f"{key}.pattern",
                    "missing: the regex parser needs pattern = '...(?P<name>[0-9.]+)...', "
                    "each named group a figure",
                )
            try:
                compile_patterns(patterns)
            except ParserError as exc:
                raise fail(f"{key}.pattern", str(exc)) from None
        elif patterns:
            raise fail(f"{key}.pattern", f"only the regex parser takes patterns, not {parser}")
        units = _strings(table.get("units", {}), f"{key}.units", fail)
        labels = _strings(table.get("labels", {}), f"{key}.labels", fail)
        for label in labels:
            if not LABEL.match(label):
                raise fail(f"{key}.labels.{label}", "not a usable label name")
        env = _strings(table.get("env", {}), f"{key}.env", fail)
        cwd = table.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise fail(f"{key}.cwd", "expected a string")
        timeout = table.get("timeout", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise fail(f"{key}.timeout", f"expected a number of seconds above 0, got {timeout!r}")
        bench_hosts = table.get("hosts", [])
        if not isinstance(bench_hosts, list) or not all(isinstance(h, str) for h in bench_hosts):
            raise fail(f"{key}.hosts", "expected a list of host names")
        for host in bench_hosts:
            if host not in hosts:
                raise fail(f"{key}.hosts", f"no host named {host!r}{suggest(host, hosts)}")
        description = table.get("description", "")
        if not isinstance(description, str):
            raise fail(f"{key}.description", "expected a string")
        specs[name] = BenchmarkSpec(
            name,
            parser,
            run=run if builtin is None else None,
            builtin=builtin,
            patterns=patterns,
            units=units,
            labels=labels,
            env=env,
            cwd=cwd,
            timeout=float(timeout),
            hosts=bench_hosts,
            description=description,
        )
    return specs


def _strings(value: Any, key: str, fail: Fail) -> dict[str, str]:
    if not isinstance(value, dict):
        raise fail(key, 'expected a table of name = "text"')
    for name, item in value.items():
        if not isinstance(item, str):
            raise fail(f"{key}.{name}", f"expected a string, got {type(item).__name__}")
    return value
