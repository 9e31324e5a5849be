"""Recall and false positives of the pitfall detectors on the transcript corpus.

The corpus is tests/data/transcripts/: real tool output (captured here or on an H200 host) and
verbatim lines of public issue threads, each file with the ids a careful expert expects in
expected.toml (an empty list: a clean file that must stay clean). This runs `journal lint
--format json` once over every file and prints, per pitfall id, how many files expect it, how
many of those lint found it in (recall), and how many files got it unasked (false positives);
then every file where the two disagree.

Run: ``.venv/bin/python bench/corpus.py`` (a few seconds). Exit status 1 when anything is
missed or raised unasked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "transcripts"


def expected() -> dict[str, set[str]]:
    with (CORPUS / "expected.toml").open("rb") as handle:
        return {name: set(entry["ids"]) for name, entry in tomllib.load(handle).items()}


def linted(names: list[str]) -> dict[str, set[str]]:
    """The ids `journal lint --format json` reports for each file (one run over all)."""
    done = subprocess.run(
        [sys.executable, "-m", "journal", "lint", "--format", "json", *names],
        cwd=CORPUS,
        capture_output=True,
        timeout=600,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"journal lint failed:\n{done.stderr.decode()}")
    found: dict[str, set[str]] = {name: set() for name in names}
    for finding in json.loads(done.stdout)["findings"]:
        found[Path(finding["file"]).name].add(finding["id"])
    return found


def main() -> int:
    want = expected()
    got = linted(sorted(want))
    asked, hit, unasked = Counter(), Counter(), Counter()
    for name, ids in want.items():
        for pitfall in ids:
            asked[pitfall] += 1
            hit[pitfall] += pitfall in got[name]
        for pitfall in got[name] - ids:
            unasked[pitfall] += 1
    clean = sum(1 for ids in want.values() if not ids)
    print(f"{len(want)} transcripts ({clean} clean), {sum(asked.values())} expected findings\n")
    print(f"  {'pitfall id':24s} {'files':>5s} {'found':>5s} {'recall':>7s} {'unasked':>7s}")
    for pitfall in sorted(set(asked) | set(unasked)):
        recall = f"{hit[pitfall] / asked[pitfall]:.0%}" if asked[pitfall] else "-"
        print(
            f"  {pitfall:24s} {asked[pitfall]:5d} {hit[pitfall]:5d} {recall:>7s} "
            f"{unasked[pitfall]:7d}"
        )
    total = sum(asked.values())
    print(
        f"\n  overall recall {sum(hit.values())}/{total} = {sum(hit.values()) / total:.1%}; "
        f"{sum(unasked.values())} unasked ids"
    )
    wrong = [(n, want[n] - got[n], got[n] - want[n]) for n in sorted(want) if want[n] != got[n]]
    for name, missed, extra in wrong:
        print(f"  {name}: missed {sorted(missed) or '-'}, unasked {sorted(extra) or '-'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
