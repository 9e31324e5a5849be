"""The runbook's ``[benchmarks.NAME]`` tables, validated into the :class:`BenchmarkSpec` each
benchmark runs by: a shell ``run`` and the ``parser`` that reads its output (``regex`` with
named groups in ``pattern``), or a ``builtin`` GPU measurement.
"""

from __future__ import annotations

from typing import Any

from journal.benchmarks import BUILTIN, DEFAULT_TIMEOUT_S, LABEL, BenchmarkSpec
from journal.runbook.checker import NAME, NAME_RULE, _Checker, shown, suggest

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


def benchmark_specs(
    tables: dict[str, Any], hosts: list[str], check: _Checker
) -> dict[str, BenchmarkSpec]:
    """The runbook's benchmarks, validated; ``hosts`` are the names a benchmark may list."""
    fail = check.fail
    specs = {}
    for name, table in tables.items():
        key = f"benchmarks.{name}"
        if not NAME.match(name):
            raise fail(key, f"{shown(name)} is not a usable name ({NAME_RULE})")
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
        parser = _parser(check, key, table)
        patterns = _patterns(check, key, table, parser)
        units = _strings(check, table.get("units", {}), f"{key}.units")
        labels = _strings(check, table.get("labels", {}), f"{key}.labels")
        for label in labels:
            if not LABEL.match(label):
                raise fail(f"{key}.labels.{label}", "not a usable label name")
        env = check.env(table.get("env", {}), f"{key}.env")
        cwd = table.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise fail(f"{key}.cwd", "expected a string")
        timeout = check.seconds(table.get("timeout", DEFAULT_TIMEOUT_S), f"{key}.timeout")
        bench_hosts = table.get("hosts", [])
        if not isinstance(bench_hosts, list) or not all(isinstance(h, str) for h in bench_hosts):
            raise fail(f"{key}.hosts", "expected a list of host names")
        if "hosts" in table:
            check.hosts(bench_hosts, f"{key}.hosts")
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
            timeout=timeout,
            hosts=bench_hosts,
            description=description,
        )
    return specs


def _parser(check: _Checker, key: str, table: dict[str, Any]) -> str:
    """The parser that reads a benchmark's output: ``builtin`` for a built-in one (which
    takes no run, parser, pattern or units), else the one its ``parser`` names."""
    builtin = table.get("builtin")
    if builtin is not None:
        if not isinstance(builtin, str) or builtin not in BUILTIN:
            raise check.fail(
                f"{key}.builtin",
                f"expected one of {', '.join(BUILTIN)}, got {builtin!r}"
                + (suggest(builtin, list(BUILTIN)) if isinstance(builtin, str) else ""),
            )
        for option in ("run", "parser", "pattern", "units"):
            if option in table:
                raise check.fail(
                    f"{key}.{option}",
                    f"a builtin benchmark runs its own script and reads its own output; "
                    f"{option} does not apply",
                )
        return "builtin"
    run = table.get("run")
    if not isinstance(run, str) or not run.strip():
        raise check.fail(
            f"{key}.run",
            'missing: give the shell command (run = "...") or builtin = "matmul"',
        )
    from journal.benchmarks.parsers import PARSERS  # only when a runbook has benchmarks

    choices = [p for p in PARSERS if p != "builtin"]
    parser = table.get("parser")
    if parser is None:
        raise check.fail(
            f"{key}.parser",
            f"missing: which parser reads the output? ({', '.join(choices)})",
        )
    if not isinstance(parser, str) or parser not in choices:
        hint = suggest(parser, choices) if isinstance(parser, str) else ""
        raise check.fail(
            f"{key}.parser", f"expected one of {', '.join(choices)}, got {parser!r}{hint}"
        )
    return parser


def _patterns(check: _Checker, key: str, table: dict[str, Any], parser: str) -> list[str]:
    """The ``pattern`` regexes (one or a list): valid, and given to the regex parser only."""
    patterns = table.get("pattern", [])
    if isinstance(patterns, str):
        patterns = [patterns]
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise check.fail(f"{key}.pattern", "expected a regex string or a list of them")
    if parser == "regex":
        from journal.benchmarks.parsers import ParserError, compile_patterns

        if not patterns:
            raise check.fail(
                f"{key}.pattern",
                "missing: the regex parser needs pattern = '...(?P<name>[0-9.]+)...', "
                "each named group a figure",
            )
        try:
            compile_patterns(patterns)
        except ParserError as exc:
            raise check.fail(f"{key}.pattern", str(exc)) from None
    elif patterns:
        raise check.fail(f"{key}.pattern", f"only the regex parser takes patterns, not {parser}")
    return patterns


def _strings(check: _Checker, value: Any, key: str) -> dict[str, str]:
    """A table of name = "text" (units, labels)."""
    if not isinstance(value, dict):
        raise check.fail(key, 'expected a table of name = "text"')
    for name, item in value.items():
        if not isinstance(item, str):
            raise check.fail(f"{key}.{name}", f"expected a string, got {type(item).__name__}")
    return value
