"""A snapshot or probe that could not be read is a recorded, visible fact (`snapshot-failed`).

The probes fail for real: the host's target python is a real venv (made by real uv from
stand-in wheels, offline) whose `importlib.metadata` a start-up hook refuses, as a broken
`sitecustomize.py` or `.pth` hook would. In the main journal the install itself brings the
hook (numpy 2.5.2 → 2.3.5, the new wheel ships a `.pth` file), so the snapshot before the step
reads and the one after it cannot: the run must not pass for a plain success that changed
nothing, on any surface, and a later snapshot that reads resolves the finding.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from journal.demo.wheels import StandIn, build_index
from journal.events import (
    JournalOpened,
    OutputChunk,
    PackagesSnapshotted,
    ProbeRecorded,
    StepFinished,
    StepStarted,
)
from journal.projections.stored import current_timeline
from journal.store import EventStore
from journal.web import create_app
from tests.helpers import journal, no_traceback, text, uv_binary, write_runbook

NAME = "broken-env"
#: What the hook makes `import importlib.metadata` raise in the target python.
REFUSED = "importlib.metadata refused by a start-up hook of this env"
#: A meta path finder refusing importlib.metadata: what a broken sitecustomize or .pth does.
HOOK = f"""import sys


class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "importlib.metadata":
            raise ImportError({REFUSED!r})
        return None


sys.meta_path.insert(0, _Refuse())
"""


def _numpy(version: str, hook: bool = False) -> StandIn:
    files = {"numpy/__init__.py": f"__version__ = {version!r}\n"}
    if hook:  # a .pth line that imports a module runs at every start of the env's python
        files |= {"zz_numpy_hook.pth": "import _numpy_hook\n", "_numpy_hook.py": HOOK}
    return StandIn("numpy", version, (), files)


class Env:
    """A real venv with numpy 2.5.2 from a local index that also holds a numpy 2.3.5 whose
    wheel brings the hook."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.index = build_index(
            folder / "index" / "simple", [_numpy("2.5.2"), _numpy("2.3.5", True)]
        )
        self.cache = folder / "uv-cache"
        self.python = folder / "env" / "bin" / "python"
        self.uv = uv_binary()
        env = {**os.environ, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(self.cache)}
        env["UV_PYTHON_DOWNLOADS"] = "never"
        for cmd in (
            [self.uv, "venv", "--quiet", "--python", sys.executable, str(folder / "env")],
            [self.uv, "pip", "install", "--quiet", "--python", str(self.python), "numpy==2.5.2"]
            + ["--index-url", self.index.as_uri()],
        ):
            subprocess.run(cmd, env=env, check=True, capture_output=True)
        self.site = Path(
            subprocess.run(
                [
                    str(self.python),
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )

    def numpy(self) -> str:
        """numpy's version in the env, read outside journal (the hook spares a plain import)."""
        done = subprocess.run(
            [str(self.python), "-c", "import numpy; print(numpy.__version__)"],
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip()

    def runbook(self, more: str = "") -> Path:
        install = (
            f"{self.uv} pip install --python {self.python} numpy==2.3.5 "
            f"--index-url {self.index.as_uri()}"
        )
        return write_runbook(
            self.folder,
            f'[journal]\nname = "{NAME}"\n\n[hosts.box]\nssh = "local"\npython = "{self.python}"\n'
            f'env = {{ UV_NO_CONFIG = "1", UV_CACHE_DIR = "{self.cache}" }}\n\n'
            f'[[steps]]\nname = "install-numpy"\nrun = "{install}"\n' + more,
        )


class Journal:
    """A journal of that env: its database and runbook, and `journal` run on them."""

    def __init__(self, env: Env, runbook: Path) -> None:
        self.env, self.runbook, self.db = env, runbook, env.folder / "journal.db"

    def __call__(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return journal(*args, db=self.db, runbook=self.runbook, cwd=self.env.folder)

    def json(self, *args: str) -> Any:
        done = self(*args, "--format", "json")
        assert no_traceback(done), text(done.stderr)
        return json.loads(done.stdout)

    def events(self) -> list[Any]:
        store = EventStore(str(self.db))
        try:
            return [r.event for r in store.read(NAME)]
        finally:
            store.close()

    def run_id(self, step: str = "install-numpy") -> str:
        return [e.run for e in self.events() if isinstance(e, StepStarted) and e.step == step][-1]


def _installed(folder: Path) -> tuple[Journal, subprocess.CompletedProcess[bytes]]:
    """A journal whose install-numpy ran once: its snapshot after the step could not be read."""
    env = Env(folder)
    book = Journal(env, env.runbook())
    done = book("run", "step", "install-numpy")
    assert done.returncode == 0, text(done.stderr)
    return book, done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Journal, str]:
    """The main journal (read, never changed, by the tests that take it) and what `journal
    run step` printed on stderr."""
    book, done = _installed(tmp_path_factory.mktemp("snapshot-failed") / "box")
    return book, text(done.stderr)


def test_the_failed_snapshot_is_recorded_with_its_phase_and_reason(
    installed: tuple[Journal, str],
) -> None:
    book, said = installed
    assert book.env.numpy() == "2.3.5"  # the step did change the env: journal could not see it
    events = book.events()
    snapshots = [e.phase for e in events if isinstance(e, PackagesSnapshotted)]
    failed = [e for e in events if isinstance(e, ProbeRecorded) and e.probe == "packages"]
    assert snapshots == ["before"]
    assert [(e.phase, e.result, e.run) for e in failed] == [("after", None, book.run_id())]
    assert REFUSED in (failed[0].error or "") and "exit status 1" in (failed[0].error or "")
    # the step's own verdict says so as it ends
    assert "packages snapshot (after) on box failed" in said
    assert "pitfall snapshot-failed (warning) on box" in said and REFUSED in said


def test_journal_show_says_what_is_not_known(installed: tuple[Journal, str]) -> None:
    book, _ = installed
    run = book.run_id()
    shown = book("show", run)
    assert shown.returncode == 0, text(shown.stderr)
    out = text(shown.stdout)
    assert re.search(
        r"packages: not known: the packages snapshot after the step failed: .*" + REFUSED, out
    )
    assert "packages: no change" not in out and "no snapshots to compare" not in out
    assert "WARNING snapshot-failed" in out
    doc = book.json("show", run)
    assert doc["status"] == "succeeded" and doc["packages"] is None
    (miss,) = doc["unread"]
    assert (miss["probe"], miss["phase"], miss["host"], miss["run"]) == (
        "packages",
        "after",
        "box",
        run,
    )
    assert REFUSED in miss["error"] and miss["text"].startswith(
        "packages snapshot after install-numpy failed"
    )
    assert [f["id"] for f in doc["findings"]] == ["snapshot-failed"]
    assert {"probe": "packages", "phase": "after", "result": None} | {
        "error": miss["error"]
    } in doc["probes"]


def test_status_and_the_story_do_not_claim_nothing_moved(installed: tuple[Journal, str]) -> None:
    book, _ = installed
    done = book("status")
    out = text(done.stdout)
    story = out.split("journal broken-env:")[0]
    # the only good snapshot is the one before: the story must not read "unchanged"
    assert re.search(r"box: packages snapshot after install-numpy failed: .*" + REFUSED, story)
    assert "unchanged" not in story and "nothing read" not in story
    assert re.search(
        rf"packages snapshot after install-numpy failed: .*\(run {book.run_id()[:8]}\)", out
    )
    doc = book.json("status")
    (host,) = doc["story"]["hosts"]
    assert [(u["probe"], u["phase"]) for u in host["unread"]] == [("packages", "after")]
    (step,) = doc["hosts"][0]["steps"]
    assert step["status"] == "succeeded" and step["unread"][0]["phase"] == "after"
    log = text(book("log").stdout)
    assert "packages: not known: the packages snapshot after the step failed" in log


def test_pitfalls_name_the_reading_the_host_the_reason_and_what_was_not_judged(
    installed: tuple[Journal, str],
) -> None:
    book, _ = installed
    (found,) = [f for f in book.json("pitfalls")["findings"] if f["id"] == "snapshot-failed"]
    assert (found["severity"], found["state"], found["host"]) == ("warning", "open", "box")
    assert found["run"] == book.run_id() and found["key"] == f"snapshot-failed:{book.run_id()}"
    assert found["title"].startswith(
        "the packages snapshot after install-numpy on box could not be read"
    )
    assert REFUSED in found["title"]
    evidence = [e["text"] for e in found["evidence"]]
    assert any(
        e.startswith("the packages snapshot after install-numpy failed:") and REFUSED in e
        for e in evidence
    )
    judged = next(e for e in evidence if e.startswith("not judged:"))
    for verdict in (
        "package diff",
        "downgrade-cascade",
        "torch-replaced",
        "unverified-change",
        "noop-install",
    ):
        assert verdict in judged
    assert f"journal rollback --to {book.run_id()}" in judged
    assert "journal run probe packages --host box" in found["advice"]
    # with no package diff the downgrade it made is, rightly, not claimed either way
    assert "downgrade-cascade" not in {f["id"] for f in book.json("pitfalls")["findings"]}


def test_the_run_page_and_the_story_on_the_web_show_it(installed: tuple[Journal, str]) -> None:
    book, _ = installed
    client = create_app({"DB": str(book.db), "TESTING": True}).test_client()
    page = client.get(f"/j/{NAME}/run/{book.run_id()}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'class="tag unread-tag"' in html and "packages snapshot after the step failed<" in html
    section = html.split('id="packages"')[1].split("</section>")[0]
    assert "The packages snapshot after the step failed:" in section and REFUSED in section
    assert "What this step changed is not known" in section
    assert "No change" not in section and "No before/after snapshots" not in section
    assert 'data-key="snapshot-failed:' in html
    home = client.get(f"/j/{NAME}").get_data(as_text=True)
    story = home.split('id="story"')[1].split("</section>")[0]
    assert "packages snapshot after install-numpy failed" in story and "(unchanged)" not in story
    assert "packages snapshot after FAILED" in home  # the run's line on the timeline


def test_the_postmortem_says_it_in_every_format(installed: tuple[Journal, str]) -> None:
    book, _ = installed
    doc = book.json("export", "postmortem")
    (host,) = doc["story"]["hosts"]
    assert host["unread"][0]["phase"] == "after" and REFUSED in host["unread"][0]["error"]
    assert any(
        "packages snapshot after install-numpy failed" in line for line in doc["story"]["lines"]
    )
    (entry,) = [e for e in doc["timeline"] if e.get("run") == book.run_id()]
    assert entry["packages_changed"] is None and entry["unread"][0]["phase"] == "after"
    (change,) = doc["changes"]["box"]
    assert change["run"] == book.run_id() and change["unread"][0]["phase"] == "after"
    assert "snapshot-failed" in [p["id"] for p in doc["pitfalls"]]
    assert doc["status"] == "mitigated"  # an open warning: not resolved
    md = text(book("export", "postmortem", "--format", "md").stdout)
    assert "**Not read:** packages snapshot after install-numpy failed: `the probe failed" in md
    assert "packages snapshot after install-numpy failed" in md  # the timeline's row
    assert "what it changed is not known" in md and REFUSED in md
    html = text(book("export", "postmortem", "--format", "html").stdout)
    assert "<strong>Not read:</strong> packages snapshot after install-numpy failed" in html


def test_rollback_says_why_the_env_cannot_be_planned(installed: tuple[Journal, str]) -> None:
    # the target (before the step) was read; the env as it is now cannot be
    book, _ = installed
    done = book("rollback", "--to", "before:install-numpy", "--dry-run")
    assert done.returncode == 2 and no_traceback(done)
    said = text(done.stderr)
    assert "its packages could not be read" in said and REFUSED in said


def test_rollback_names_the_snapshot_that_failed_before_the_step(tmp_path: Path) -> None:
    env = Env(tmp_path)
    (env.site / "sitecustomize.py").write_text(HOOK)  # broken from the start: no snapshot reads
    book = Journal(
        env, env.runbook('\n[[steps]]\nname = "no-snapshots"\nrun = "true"\nsnapshots = false\n')
    )
    assert book("run", "step", "install-numpy").returncode == 0
    run = book.run_id()
    failed = [e for e in book.events() if isinstance(e, ProbeRecorded)]
    assert [e.phase for e in failed] == ["before", "after"]
    done = book("rollback", "--to", "before:install-numpy", "--dry-run")
    assert done.returncode == 2 and no_traceback(done)
    said = " ".join(text(done.stderr).split())
    assert f"the packages snapshot before run {run} on box failed:" in said and REFUSED in said
    assert "snapshots = false" not in said
    after = " ".join(text(book("rollback", "--to", run, "--dry-run").stderr).split())
    assert f"the packages snapshot after run {run} on box failed:" in after
    # where the step really takes no snapshots, that is what it says
    assert book("run", "step", "no-snapshots").returncode == 0
    off = " ".join(
        text(book("rollback", "--to", "before:no-snapshots", "--dry-run").stderr).split()
    )
    assert "it took no snapshots (snapshots = false)" in off and "failed" not in off
    # a host whose snapshots all failed: the story names both, never "nothing read"
    story = text(book("status").stdout).split("journal broken-env:")[0]
    assert "packages snapshots before and after install-numpy failed" in story


def test_a_later_snapshot_that_reads_resolves_it_but_the_run_stays_unjudged(
    tmp_path: Path,
) -> None:
    book, _ = _installed(tmp_path)
    run = book.run_id()
    # the hook taken away by hand: the env reads again
    (book.env.site / "zz_numpy_hook.pth").unlink()
    probe = book("run", "probe", "packages")
    assert probe.returncode == 0, text(probe.stderr)
    (found,) = [
        f for f in book.json("pitfalls", "--all")["findings"] if f["id"] == "snapshot-failed"
    ]
    assert found["state"] == "resolved" and found["resolved_by"]["kind"] == "probe"
    assert "read the env of box again on its own" in found["resolved_by"]["why"]
    assert f"install-numpy (run {run}) itself stays unjudged" in found["resolved_by"]["why"]
    assert "snapshot-failed" not in {f["id"] for f in book.json("pitfalls")["findings"]}
    # the story compares the good snapshots again: numpy's move shows
    story = text(book("status").stdout).split("journal broken-env:")[0]
    assert "numpy 2.5.2 → 2.3.5" in story and "failed" not in story
    # the run itself still says what it could not see
    assert "packages: not known: the packages snapshot after the step failed" in text(
        book("show", run).stdout
    )


def test_a_probe_that_fails_after_a_step_is_judged_and_resolved_by_the_next_good_one(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "broken"
    flag.write_text("")
    probe = (
        f"test ! -e {flag} || {{ echo 'gpu-check: NVML not reachable' >&2; exit 3; }}; "
        """echo '{"gpus": 8}'"""
    )
    runbook = write_runbook(
        tmp_path,
        f'[journal]\nname = "{NAME}"\n\n[hosts.box]\nssh = "local"\npython = "{sys.executable}"\n\n'
        f"[probes.gpu-check]\nrun = '''{probe}'''\njson = true\n\n"
        '[[steps]]\nname = "check"\nrun = "true"\nsnapshots = false\nprobes = ["gpu-check"]\n',
    )
    run = lambda *args: journal(*args, db=tmp_path / "j.db", runbook=runbook, cwd=tmp_path)  # noqa: E731
    assert run("run", "step", "check").returncode == 0
    (found,) = json.loads(run("pitfalls", "--format", "json").stdout)["findings"]
    assert found["id"] == "snapshot-failed"
    assert found["title"].startswith("the gpu-check probe after check on box could not be read")
    assert "NVML not reachable" in found["title"]
    assert any("what gpu-check reads" in e["text"] for e in found["evidence"])
    out = text(run("show", found["run"]).stdout)
    failed = "the probe failed with exit status 3: gpu-check: NVML not reachable"
    assert f"probe gpu-check: FAILED: {failed}" in out
    flag.unlink()
    assert run("run", "probe", "gpu-check").returncode == 0
    (again,) = json.loads(run("pitfalls", "--all", "--format", "json").stdout)["findings"]
    assert (
        again["state"] == "resolved"
        and "the gpu-check probe read the env of box" in again["resolved_by"]["why"]
    )


def test_an_old_failed_snapshot_without_its_phase_reads_as_before(tmp_path: Path) -> None:
    # events recorded before ProbeRecorded had a phase: the record tells where it can
    store = EventStore(str(tmp_path / "old.db"))
    try:
        store.append(NAME, [JournalOpened(NAME, "runbook.toml", {"box": "local"}, ["s"])])
        store.append(
            NAME,
            [
                StepStarted("r1", "s", "box", "local", "pip install numpy"),
                PackagesSnapshotted(
                    "box",
                    "before",
                    "python",
                    {"numpy": {"name": "numpy", "version": "2.5.2"}},
                    0.1,
                    run="r1",
                ),
                OutputChunk("r1", "box", "stdout", "done\n", "utf-8", 5, 0.0),
                ProbeRecorded(
                    "box", "packages", None, 0.1, "the probe failed with exit status 1: boom", "r1"
                ),
                StepFinished("r1", "box", "succeeded", 0, 1.0),
                ProbeRecorded("box", "packages", None, 0.1, "the probe timed out"),
            ],
        )
        timeline = current_timeline(store, NAME)
    finally:
        store.close()
    (probe,) = timeline.runs["r1"].probes
    assert probe.phase == "after"
    alone = [i for i in timeline.items if getattr(i, "probe", None) == "packages"]
    assert [p.phase for p in alone] == ["probe"]
    done = journal("show", "r1", db=tmp_path / "old.db")
    said = "packages: not known: the packages snapshot after the step failed: the probe failed"
    assert f"{said} with exit status 1: boom" in text(done.stdout)
