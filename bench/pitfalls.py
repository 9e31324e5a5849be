"""How long the pitfall detectors take on big inputs.

Figures of issue 4 (target: under 2 s each):

- `journal lint` of a 50 MB transcript, in two shapes: a long session (thousands of commands:
  installs, checks, compile logs, benchmarks) and one command whose output is a 50 MB compile
  log; through the command line (wall time, with the interpreter's start) and in-process
  (`parse` + `from_transcript` + `judge`);
- `journal pitfalls --format json` of a journal of 100,000 events with 50 MB of output (4 hosts,
  step runs with package snapshots of a real H200 env before and after, `torch-env` probes of a
  real H200, output chunks as the recorder stores them, with benchmark summaries, NCCL
  checks, uv no-ops and a Ctrl-C among them); through the command line and in-process (read,
  `from_journal`, `judge`).

Each in-process figure is the median of three runs, split by phase and by detector; with
``--profile`` the slowest functions of each in-process run are printed (cProfile).

Run: ``.venv/bin/python bench/pitfalls.py [--profile] [--keep DIR]`` (about a minute).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from journal.events import (  # noqa: E402
    Event,
    JournalOpened,
    OutputChunk,
    PackagesSnapshotted,
    ProbeRecorded,
    StepFinished,
    StepStarted,
)
from journal.pitfalls import detectors, judge  # noqa: E402
from journal.pitfalls.subjects import from_journal, from_transcript  # noqa: E402
from journal.store import EventStore  # noqa: E402
from journal.transcript import parse  # noqa: E402

TARGET_S = 2.0
TRANSCRIPT_BYTES = 50_000_000
EVENTS = 100_000
OUTPUT_BYTES = 50_000_000
HOSTS = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
JOURNAL = "bench-pitfalls"
DATA = ROOT / "tests" / "data"
PROMPT = "ubuntu@gpu-1:~$ "

BUILD_LINES = [
    "[{n}/4210] Building CUDA object csrc/CMakeFiles/_kernels.dir/attention/flash_fwd_{n}.cu.o",
    "/usr/local/cuda-13.0/bin/nvcc -DTORCH_EXTENSION_NAME=_kernels -O3 -gencode "
    "arch=compute_90a,code=sm_90a -c csrc/moe/topk_{n}.cu -o build/topk_{n}.o",
    'csrc/gemm/cutlass_{n}.cuh(211): warning #177-D: variable "tile" was declared but never '
    "referenced",
    '  Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"',
]


def build_line(n: int) -> str:
    return BUILD_LINES[n % len(BUILD_LINES)].format(n=n)


def serving_summary(tok_s: float) -> str:
    """A bench_serving summary in sglang's own format."""
    rows = [
        "\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        "{:<40} {:<10}".format("Successful requests:", 32),
        "{:<40} {:<10.2f}".format("Request throughput (req/s):", tok_s / 512),
        "{:<40} {:<10.2f}".format("Output token throughput (tok/s):", tok_s),
        "{:<40} {:<10.2f}".format("Total token throughput (tok/s):", tok_s * 3),
        "=" * 50,
    ]
    return "\n".join(rows) + "\n"


def session_transcript(size: int) -> str:
    """A long terminal session of about ``size`` bytes: the seed's kind of commands, over and
    over, with compile logs between them."""
    rng = random.Random(4)
    parts: list[str] = []
    spent = 0
    n = 0
    while spent < size:
        n += 1
        block = [
            f"{PROMPT}~/.local/bin/uv pip install --python ~/ml-env/bin/python3 torch "
            "--index-url https://download.pytorch.org/whl/nightly/cu130\n"
            "Using Python 3.12.3 environment at: ml-env\nChecked 1 package in 29ms\n",
            f"{PROMPT}~/ml-env/bin/python3 -c \"import torch; print('NCCL:', "
            'torch.cuda.nccl.version())"\nNCCL: (2, 28, 9)\n',
            f"{PROMPT}cd ~/src/sglang/sgl-kernel && make build -j32\n"
            + "\n".join(build_line(n * 1000 + i) for i in range(rng.randrange(200, 1200)))
            + "\n",
            f"{PROMPT}python3 -m sglang.bench_serving --backend sglang --num-prompts 32 "
            f"--output-file run-{n}.jsonl\n" + serving_summary(90.0 - (n % 3)),
        ]
        if n % 50 == 0:
            block.append(f"{PROMPT}pip install flash-attn --no-build-isolation\n^C\n")
        text = "".join(block)
        parts.append(text)
        spent += len(text)
    return "".join(parts)


def one_log_transcript(size: int) -> str:
    """One command whose output is a compile log of about ``size`` bytes."""
    lines = [f"{PROMPT}cd ~/src/sglang/sgl-kernel && make build -j32"]
    spent, n = 0, 0
    while spent < size:
        line = build_line(n)
        lines.append(line)
        spent += len(line) + 1
        n += 1
    lines.append("Successfully built sgl-kernel")
    return "\n".join(lines) + "\n"


# --- the journal ------------------------------------------------------------------------------


def build_journal(db: Path) -> dict[str, int]:
    """Append a journal of EVENTS events with OUTPUT_BYTES of output to a fresh database."""
    packages = json.loads((DATA / "h200" / "packages.json").read_text())["packages"]
    torch_env = json.loads((DATA / "h200" / "torch-env.json").read_text())
    rng = random.Random(7)
    store = EventStore(str(db))
    store.append(JOURNAL, [JournalOpened(JOURNAL, "/srv/runbook.toml", {}, [])])
    runs = 800
    # per run: start, snapshots before and after, finish; a probe on every fourth
    others = 1 + runs * 4 + runs // 4
    chunks_per_run = (EVENTS - others) // runs
    spare = EVENTS - others - chunks_per_run * runs
    budget = OUTPUT_BYTES // (runs * chunks_per_run)
    written = {"events": 1, "output_bytes": 0}
    for index in range(runs):
        host = HOSTS[index % len(HOSTS)]
        run = f"r{index:05d}"
        kind = index // len(HOSTS) % 5
        command = [
            "~/.local/bin/uv pip install --python /opt/env/bin/python3 torch --index-url "
            "https://download.pytorch.org/whl/nightly/cu130",
            "cd ~/src/sglang/sgl-kernel && make build -j32",
            "/opt/env/bin/python3 -c \"import torch; print('NCCL:', torch.cuda.nccl.version())\"",
            "python3 -m sglang.bench_serving --backend sglang --num-prompts 32",
            "./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8",
        ][kind]
        batch: list[Event] = [
            StepStarted(
                run=run,
                step=f"step-{index // len(HOSTS):03d}",
                host_name=host,
                target=f"ubuntu@{host}",
                command=command,
                env={"CUDA_HOME": "/usr/local/cuda-13.0", "NCCL_ALGO": "Ring"},
                pid=1,
                machine="bench",
            ),
            PackagesSnapshotted(host, "before", "/opt/env/bin/python3", packages, 0.2, run),
        ]
        count = chunks_per_run + (1 if index < spare else 0)
        n = index * 10_000
        for i in range(count):
            lines = []
            size = 0
            while size < budget:
                n += 1
                line = build_line(n) + "\n"
                lines.append(line)
                size += len(line)
            if i == count - 1:
                lines.append(
                    {
                        0: "Checked 1 package in 29ms\n",
                        1: "Successfully built sgl-kernel\n",
                        2: "NCCL: (2, 22, 3)\n" if index < runs // 2 else "NCCL: (2, 28, 9)\n",
                        3: serving_summary(90.0 if index < runs // 2 else 54.1),
                        4: "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 232.167 \n",
                    }[kind]
                )
            if index == runs - 1 and i == count - 1:
                lines.append("^C\n")
            text = "".join(lines)
            written["output_bytes"] += len(text)
            batch.append(
                OutputChunk(run, host, "stdout", text, "utf-8", len(text.encode()), i * 0.1)
            )
        batch.append(PackagesSnapshotted(host, "after", "/opt/env/bin/python3", packages, 0.2, run))
        if index % 4 == 0:
            env = dict(torch_env)
            if index >= runs // 2:
                env["nccl"] = "2.28.9"
            else:
                env = json.loads(json.dumps(torch_env))
                env["nccl"] = env["torch"]["nccl"] = "2.22.3"
            batch.append(ProbeRecorded(host, "torch-env", env, 0.23, None, run))
        status = "interrupted" if index == runs - 1 else "succeeded"
        batch.append(StepFinished(run, host, status, 0 if status == "succeeded" else 130, 60.0))
        for i in range(0, len(batch), 5000):
            store.append(JOURNAL, batch[i : i + 5000])
        written["events"] += len(batch)
    store.close()
    del rng
    return written


# --- measuring --------------------------------------------------------------------------------


def median_of(runs: int, work: Callable[[], dict[str, float]]) -> dict[str, float]:
    samples = [work() for _ in range(runs)]
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def judge_timed(subject) -> dict[str, float]:  # type: ignore[no-untyped-def]
    out: dict[str, float] = {}
    for module in detectors():
        started = time.perf_counter()
        list(module.detect(subject))
        out[f"detector {module.ID}"] = time.perf_counter() - started
    started = time.perf_counter()
    findings = judge(subject)
    out["judge (all detectors)"] = time.perf_counter() - started
    out["findings"] = len(findings)
    return out


def lint_in_process(path: Path) -> dict[str, float]:
    started = time.perf_counter()
    text = path.read_bytes().decode("utf-8", "replace")
    read = time.perf_counter()
    commands = parse(text)
    parsed = time.perf_counter()
    subject = from_transcript(text, str(path))
    built = time.perf_counter()
    out = {
        "read": read - started,
        "parse": parsed - read,
        "from_transcript": built - parsed,
        "commands": len(commands),
    }
    out.update(judge_timed(subject))
    out["total (read + from_transcript + judge)"] = (
        out["read"] + out["from_transcript"] + out["judge (all detectors)"]
    )
    return out


def pitfalls_in_process(db: Path) -> dict[str, float]:
    started = time.perf_counter()
    store = EventStore(str(db))
    records = list(store.read(JOURNAL))
    store.close()
    read = time.perf_counter()
    subject, _ = from_journal(JOURNAL, records)
    built = time.perf_counter()
    out = {"read events": read - started, "from_journal": built - read, "runs": len(subject.runs)}
    out.update(judge_timed(subject))
    out["total (read + from_journal + judge)"] = (
        out["read events"] + out["from_journal"] + out["judge (all detectors)"]
    )
    return out


def cli(*args: str) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "journal", *args], capture_output=True, cwd=ROOT, timeout=600
    )
    return time.perf_counter() - started, done


def show(title: str, figures: dict[str, float], total_key: str) -> None:
    print(f"\n{title}")
    for key, value in figures.items():
        if key.startswith("detector ") and value < 0.05:
            continue
        if key in ("commands", "runs", "findings"):
            print(f"  {key:44s} {int(value):>10,}")
        else:
            print(f"  {key:44s} {value:10.3f} s")
    total = figures[total_key]
    verdict = "meets" if total < TARGET_S else "MISSES"
    print(
        f"  -> {total:.2f} s against the {TARGET_S:.0f} s target: "
        f"{total / TARGET_S:.2f}x ({verdict})"
    )


def profile(title: str, work: Callable[[], object]) -> None:
    prof = cProfile.Profile()
    prof.enable()
    work()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    print(f"\nprofile of {title} (by own time):")
    print("\n".join(out.getvalue().splitlines()[6:24]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true", help="print the slowest functions")
    parser.add_argument("--keep", type=Path, help="build the inputs in this folder and keep them")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="journal-bench-pitfalls-"))
    folder.mkdir(parents=True, exist_ok=True)

    for shape, make in (("session", session_transcript), ("one-log", one_log_transcript)):
        path = folder / f"{shape}.txt"
        if not path.exists():
            path.write_text(make(TRANSCRIPT_BYTES))
        size = path.stat().st_size
        wall, done = cli("lint", "--format", "json", str(path))
        assert done.returncode in (0, 1), done.stderr.decode()
        found = len(json.loads(done.stdout)["findings"])
        figures = median_of(3, lambda p=path: lint_in_process(p))
        figures["journal lint (command line, wall)"] = wall
        show(
            f"lint a {size / 1e6:.1f} MB transcript ({shape}; {found} findings)",
            figures,
            "journal lint (command line, wall)",
        )
        print(
            f"  -> in-process {figures['total (read + from_transcript + judge)']:.2f} s: "
            f"{figures['total (read + from_transcript + judge)'] / TARGET_S:.2f}x the target"
        )
        if args.profile:
            profile(f"lint ({shape})", lambda p=path: lint_in_process(p))

    db = folder / "journal.db"
    if not db.exists():
        started = time.perf_counter()
        written = build_journal(db)
        print(
            f"\nbuilt a journal of {written['events']:,} events, "
            f"{written['output_bytes'] / 1e6:.1f} MB of output, in "
            f"{time.perf_counter() - started:.1f} s"
        )
    wall, done = cli("--db", str(db), "pitfalls", "--format", "json", "--journal", JOURNAL)
    assert done.returncode == 0, done.stderr.decode()
    found = json.loads(done.stdout)["findings"]
    ids = sorted({f["id"] for f in found})
    figures = median_of(3, lambda: pitfalls_in_process(db))
    figures["journal pitfalls (command line, wall)"] = wall
    show(
        f"pitfalls of a journal of {EVENTS:,} events ({len(found)} findings: {', '.join(ids)})",
        figures,
        "journal pitfalls (command line, wall)",
    )
    total = figures["total (read + from_journal + judge)"]
    print(f"  -> in-process {total:.2f} s: {total / TARGET_S:.2f}x the target")
    if args.profile:
        profile("pitfalls (journal)", lambda: pitfalls_in_process(db))
    if not args.keep:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
