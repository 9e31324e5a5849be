"""Notifications (issue 19): the runbook's ``[notify.NAME]`` webhooks, told when a step fails,
a finding is made and the plan finishes, posted to a real HTTP receiver this test starts on
127.0.0.1 (``http.server``), by the real `journal` command line.

Each delivery attempt is a ``NotificationSent`` event; a receiver that fails is tried again,
one that never answers holds up neither the step nor, past a small cap, the command; and the
webhook's URL (its path is the secret) is in no byte of journal.db, -wal or -shm.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from journal.errors import BadInput
from journal.notify.payload import as_json
from journal.notify.sender import Delivery, Sender, encode
from journal.runbook import parse
from journal.runbook.notify import NotifySpec
from tests.helpers import journal, no_traceback, text, uv_binary, write_runbook

#: The secret part of every webhook URL here (as Slack's token is the path's last part).
TOKEN = "T0K3N-b1c2d3e4f5a6b7c8d9e0"
#: The keys of journal's own JSON body (docs/operations.md, "Notifications"), always all there.
JSON_KEYS = {
    "schema",
    "event",
    "journal",
    "at",
    "text",
    "host",
    "step",
    "run",
    "status",
    "exit_code",
    "duration",
    "reason",
    "finding",
    "plan",
    "drift",
    "rollback",
    "gate",
    "url",
}
BASE = "http://gpu-box:8000"


@dataclass
class Receiver:
    """A webhook receiver: answers each POST with the next of ``answers`` (an HTTP status, or
    ``None``: never answer), then 200; keeps every body it got."""

    server: ThreadingHTTPServer
    answers: list[int | None] = field(default_factory=list)
    bodies: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = f"/hook/{TOKEN}") -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def of(self, event: str) -> list[dict[str, Any]]:
        return [b for _, b in self.bodies if b.get("event") == event]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            got = box[0]
            data = self.rfile.read(int(self.headers["Content-Length"]))
            got.bodies.append((self.path, json.loads(data)))
            answer = got.answers.pop(0) if got.answers else 200
            if answer is None:
                got.release.wait(60)  # a receiver that never answers (until the test ends)
                return
            self.send_response(answer)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box.append(Receiver(server))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box[0]
    box[0].release.set()
    server.shutdown()
    server.server_close()


def _runbook(tmp_path: Path, notify: str, steps: str, python: str = "python3") -> Path:
    return write_runbook(
        tmp_path,
        f"""\
[journal]
name = "notify-test"
base_url = "{BASE}"

[hosts.box]
ssh = "local"
python = "{python}"
{steps}
{notify}
""",
    )


FAILING = """
[[steps]]
name = "break-it"
run = "echo about to fail; exit 3"
snapshots = false
"""


def _sent(db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select seq, payload from events where type = 'NotificationSent' order by seq"
        ).fetchall()
    return [{"seq": seq, **json.loads(payload)} for seq, payload in rows]


def _finished(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        seq, payload = conn.execute(
            "select seq, payload from events where type = 'StepFinished' order by seq desc"
        ).fetchone()
    return {"seq": seq, **json.loads(payload)}


def _stored_bytes(db: Path) -> bytes:
    return b"".join(
        p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()
    )


def test_a_failing_step_sends_one_payload_per_channel_and_keeps_the_url_secret(
    tmp_path: Path, receiver: Receiver
) -> None:
    slack = receiver.url(f"/services/T000/B000/{TOKEN}")
    runbook = _runbook(
        tmp_path,
        f"""
[notify.team]
url = "{receiver.url()}"
format = "json"
on = ["step-failed"]

[notify.chat]
url = "{slack}"
format = "slack"
on = ["step-failed", "plan-finished"]
""",
        # the step prints the webhook's URL, and the token alone: both masked in its output
        FAILING.replace("echo about to fail", f"echo {receiver.url()} {TOKEN}"),
    )
    db = tmp_path / "journal.db"
    done = journal("run", "step", "break-it", db=db, runbook=runbook)
    assert done.returncode == 3, text(done.stderr)

    paths = sorted(path for path, _ in receiver.bodies)
    assert paths == sorted([f"/hook/{TOKEN}", f"/services/T000/B000/{TOKEN}"])
    [(_, own)] = [(p, b) for p, b in receiver.bodies if p.startswith("/hook/")]
    [(_, chat)] = [(p, b) for p, b in receiver.bodies if p.startswith("/services/")]
    finished = _finished(db)
    assert set(own) == JSON_KEYS
    assert own["event"] == "step-failed" and own["journal"] == "notify-test"
    assert (own["host"], own["step"], own["status"], own["exit_code"]) == (
        "box",
        "break-it",
        "failed",
        3,
    )
    assert own["run"] == finished["run"]
    assert own["url"] == f"{BASE}/j/notify-test/run/{finished['run']}"
    assert "break-it on box failed (exit status 3)" in own["text"]
    assert set(chat) == {"text", "blocks"}
    assert chat["text"].startswith("break-it on box failed (exit status 3)")
    assert [b["type"] for b in chat["blocks"]][0] == "section"
    assert own["url"] in json.dumps(chat["blocks"])
    for body in (own, chat):  # never the step's output
        assert "about to fail" not in json.dumps(body) and TOKEN not in json.dumps(body)

    sent = _sent(db)
    assert sorted((s["channel"], s["delivered"], s["attempt"], s["status"]) for s in sent) == [
        ("chat", True, 1, 200),
        ("team", True, 1, 200),
    ]
    host, port = receiver.server.server_address[:2]
    assert {s["url"] for s in sent} == {f"http://{host}:{port}"}
    assert all(s["seq"] > finished["seq"] and s["run"] == finished["run"] for s in sent)
    stored = _stored_bytes(db)
    assert TOKEN.encode() not in stored and b"/hook/" not in stored
    assert journal("verify", db=db).returncode == 0

    # the run's web page lists what was sent about it
    from journal.web import create_app

    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    page = client.get(f"/j/notify-test/run/{finished['run']}").get_data(as_text=True)
    assert 'id="notifications"' in page and page.count("delivered (HTTP 200)") == 2
    assert f"http://{host}:{port}" in page and TOKEN not in page


def test_a_noop_install_finding_is_sent_with_its_advice(
    tmp_path: Path, receiver: Receiver, standin_envs: dict[str, Path]
) -> None:
    python = standin_envs["cu128"]
    install = (
        f"{uv_binary()} pip install --offline --python {python} torch "
        "--index-url https://download.pytorch.org/whl/cu130"
    )
    runbook = _runbook(
        tmp_path,
        f"""
[notify.team]
url = "{receiver.url()}"
format = "json"
on = ["finding:warning"]
""",
        f'\n[[steps]]\nname = "install-torch"\nrun = "{install}"\n',
        python=str(python),
    )
    db = tmp_path / "journal.db"
    done = journal("run", "step", "install-torch", db=db, runbook=runbook)
    assert done.returncode == 0, text(done.stderr)
    assert "noop-install" in text(done.stderr)

    found = receiver.of("finding")
    assert [b["finding"]["id"] for b in found].count("noop-install") == 1
    [body] = [b for b in found if b["finding"]["id"] == "noop-install"]
    assert set(body) == JSON_KEYS
    finding = body["finding"]
    assert finding["severity"] == "error" and finding["key"] == f"noop-install:{body['run']}"
    assert "changed nothing" in finding["title"] and "--reinstall" in finding["advice"]
    assert body["step"] == "install-torch" and body["host"] == "box"
    assert body["url"] == f"{BASE}/j/notify-test/run/{body['run']}"
    assert "Checked 1 package" not in json.dumps(body)  # the output stays in the journal
    assert [s["trigger"] for s in _sent(db) if s["delivered"]].count("finding") == len(found)


def test_a_finished_plan_is_sent_once(tmp_path: Path, receiver: Receiver) -> None:
    steps = "".join(
        f'\n[[steps]]\nname = "{name}"\nrun = "true"\nsnapshots = false\n'
        for name in ("first", "second")
    )
    runbook = _runbook(
        tmp_path,
        f"""
[notify.chat]
url = "{receiver.url()}"
format = "slack"
on = ["plan-finished", "step-failed"]
""",
        steps,
    )
    db = tmp_path / "journal.db"
    done = journal("run", "plan", db=db, runbook=runbook)
    assert done.returncode == 0, text(done.stderr)
    [(_, body)] = receiver.bodies
    assert set(body) == {"text", "blocks"}
    assert body["text"].startswith("the plan of notify-test succeeded (2 steps on box)")
    [sent] = _sent(db)
    assert (sent["trigger"], sent["delivered"], sent["format"]) == ("plan-finished", True, "slack")
    from journal.web import create_app

    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    page = client.get(f"/j/notify-test/plan/{sent['subject']}").get_data(as_text=True)
    assert 'id="notifications"' in page and "delivered (HTTP 200)" in page
    # run again: every step is done, nothing runs, nothing is sent
    again = journal("run", "plan", db=db, runbook=runbook)
    assert again.returncode == 0 and len(receiver.bodies) == 1


def test_a_receiver_failing_twice_is_tried_again_and_each_attempt_recorded(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.answers = [500, 500, 200]
    runbook = _runbook(
        tmp_path,
        f'\n[notify.team]\nurl = "{receiver.url()}"\non = ["step-failed"]\n',
        FAILING,
    )
    db = tmp_path / "journal.db"
    assert journal("run", "step", "break-it", db=db, runbook=runbook).returncode == 3
    assert len(receiver.bodies) == 3 and receiver.bodies[0] == receiver.bodies[2]
    sent = _sent(db)
    assert [(s["attempt"], s["delivered"], s["status"]) for s in sent] == [
        (1, False, 500),
        (2, False, 500),
        (3, True, 200),
    ]
    assert sent[0]["reason"] == "HTTP 500 Internal Server Error" and sent[2]["reason"] is None


def test_a_receiver_that_never_answers_holds_up_neither_the_step_nor_the_exit(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.answers = [None]
    runbook = _runbook(
        tmp_path,
        f'\n[notify.team]\nurl = "{receiver.url()}"\non = ["step-failed"]\n',
        FAILING,
    )
    db = tmp_path / "journal.db"
    # one attempt would wait 30 s for an answer; journal waits 2 s for it at its end
    env = {"JOURNAL_NOTIFY_TIMEOUT_S": "30", "JOURNAL_NOTIFY_WAIT_S": "2"}
    done = journal("run", "step", "break-it", db=db, runbook=runbook, env={**os.environ, **env})
    assert done.returncode == 3, text(done.stderr)
    assert len(receiver.bodies) == 1  # it was sent, and never answered
    finished = _finished(db)
    [sent] = _sent(db)
    # the step's end was recorded before the delivery's outcome: it did not wait for it
    assert sent["seq"] > finished["seq"]
    assert not sent["delivered"] and sent["attempt"] == 1
    assert sent["reason"].startswith("not delivered: journal ended first (it waits at most 2 s")


def test_the_sender_records_each_timed_out_attempt() -> None:
    """A receiver that never answers, posted to in this process: each attempt times out and is
    recorded with why; ``close`` waits for them (the command line's wait at its end)."""
    gate = threading.Event()

    class Silent(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            gate.wait(10)  # reads nothing, answers nothing

    server = ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = NotifySpec("dead", f"http://{host}:{port}/x/{TOKEN}", None, "json", ("test",))
        recorded: list[Any] = []
        sender = Sender(recorded.append, timeout_s=0.2, backoff_s=0.01)
        sender.send(Delivery(spec, "test", encode({"event": "test"})))
        sender.close(10)
    finally:
        gate.set()
        server.shutdown()
        server.server_close()
    assert [(e.attempt, e.delivered, e.reason) for e in recorded] == [
        (n, False, "no answer within 0.2 s") for n in (1, 2, 3)
    ]
    assert all(e.url == f"http://{host}:{port}" and e.channel == "dead" for e in recorded)


def test_journal_notify_test_sends_a_sample(tmp_path: Path, receiver: Receiver) -> None:
    runbook = _runbook(
        tmp_path,
        '\n[notify.chat]\nurl_env = "CHAT_WEBHOOK"\nformat = "json"\non = ["drift"]\n'
        '\n[notify.unset]\nurl_env = "NO_SUCH_WEBHOOK_VAR"\non = ["drift"]\n',
        FAILING,
    )
    db = tmp_path / "journal.db"
    env = {**os.environ, "CHAT_WEBHOOK": receiver.url()}
    env.pop("NO_SUCH_WEBHOOK_VAR", None)
    done = journal("notify", "test", "chat", db=db, runbook=runbook, env=env)
    assert done.returncode == 0, text(done.stderr)
    assert "attempt 1 of 3: delivered (HTTP 200)" in text(done.stderr)
    [(path, body)] = receiver.bodies
    assert path == f"/hook/{TOKEN}" and body["event"] == "test" and set(body) == JSON_KEYS
    assert body["url"] == f"{BASE}/j/notify-test"
    assert [(s["trigger"], s["delivered"]) for s in _sent(db)] == [("test", True)]
    assert TOKEN.encode() not in _stored_bytes(db)
    from journal.web import create_app

    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    page = client.get("/j/notify-test/hosts").get_data(as_text=True)
    assert 'id="notifications"' in page and "delivered (HTTP 200)" in page

    for name, says in (
        ("chta", "did you mean 'chat'"),
        ("unset", "NO_SUCH_WEBHOOK_VAR is not set"),
    ):
        refused = journal("notify", "test", name, db=db, runbook=runbook, env=env)
        assert refused.returncode == 2 and no_traceback(refused)
        assert says in text(refused.stderr)
    assert len(_sent(db)) == 1


HEAD = '[journal]\nname = "n"\n\n[hosts.box]\nssh = "local"\n\n[groups]\ngpu = ["box"]\n'
#: A channel's table with a URL, to which each case adds (or which it replaces).
A = '[notify.a]\nurl = "https://x.io/h"\n'
DRIFT = 'on = ["drift"]\n'
BAD = [
    ("no-url", '[notify.a]\non = ["step-failed"]\n', "notify.a", "url_env"),
    ("both", A + 'url_env = "X"\n' + DRIFT, "notify.a", "one of"),
    ("scheme", f'[notify.a]\nurl = "ftp://x.io/{TOKEN}"\n' + DRIFT, "notify.a.url", "http(s)"),
    ("not-url", '[notify.a]\nurl = "hooks"\n' + DRIFT, "notify.a.url", "http(s)"),
    ("format", A + 'format = "slak"\n' + DRIFT, "notify.a.format", "did you mean 'slack'"),
    ("no-on", A, "notify.a.on", "missing"),
    ("on-type", A + 'on = "drift"\n', "notify.a.on", "list"),
    ("trigger", A + 'on = ["step-fail"]\n', "notify.a.on", "did you mean 'step-failed'"),
    ("severity", A + 'on = ["finding:fatal"]\n', "notify.a.on", "finding:error"),
    ("host", A + DRIFT + 'hosts = ["bx"]\n', "notify.a.hosts", "did you mean 'box'"),
    ("group", A + DRIFT + 'groups = ["gpus"]\n', "notify.a.groups", "did you mean 'gpu'"),
    ("key", A + DRIFT + 'min_severity = "x"\n', "notify.a.min_severity", "unknown key"),
    ("env-name", '[notify.a]\nurl_env = "1X"\n' + DRIFT, "notify.a.url_env", "variable"),
    ("base-url", A + DRIFT, "journal.base_url", "http(s) URL"),
]


@pytest.mark.parametrize(("case", "table", "key", "says"), BAD, ids=[b[0] for b in BAD])
def test_bad_notify_tables_are_refused_naming_the_key(
    case: str, table: str, key: str, says: str
) -> None:
    head = (
        HEAD.replace('name = "n"', 'name = "n"\nbase_url = "gpu-box"')
        if case == "base-url"
        else HEAD
    )
    with pytest.raises(BadInput) as refused:
        parse(head + "\n" + table, Path("runbook.toml"))
    message = str(refused.value)
    assert message.startswith("runbook.toml, line ") and f", {key}:" in message, message
    assert says in message and TOKEN not in message and "\n" not in message


def test_a_bad_notify_table_exits_2_recording_nothing(tmp_path: Path) -> None:
    runbook = write_runbook(
        tmp_path, HEAD + FAILING + '\n[notify.a]\nurl = "https://x.io/h"\non = ["fail"]\n'
    )
    db = tmp_path / "journal.db"
    done = journal("run", "step", "break-it", db=db, runbook=runbook)
    assert done.returncode == 2 and no_traceback(done)
    assert "notify.a.on" in text(done.stderr) and not db.exists()


def test_a_channel_filters_by_trigger_host_and_severity() -> None:
    runbook = parse(
        HEAD
        + '[hosts.other]\nssh = "local"\n'
        + f'\n[notify.a]\nurl = "https://x.io/services/{TOKEN}"\n'
        + 'on = ["finding:error", "rollback"]\ngroups = ["gpu"]\n',
        Path("runbook.toml"),
    )
    spec = runbook.notify["a"]
    assert spec.hosts == ("box",) and spec.where == "https://x.io"
    assert spec.wants("finding", "box", "error") and not spec.wants("finding", "box", "warning")
    assert spec.wants("rollback", "box") and not spec.wants("rollback", "other")
    assert not spec.wants("step-failed", "box")
    # the URL and its token path are secrets of the runbook: masked in every event
    url = f"https://x.io/services/{TOKEN}"
    assert {url, f"/services/{TOKEN}", TOKEN} <= set(runbook.redact)


def test_the_json_body_has_every_documented_key() -> None:
    from journal.notify.notices import sample_notice

    body = as_json(sample_notice("j", "team", None), "2026-12-01T00:00:00Z")
    assert set(body) == JSON_KEYS and body["schema"] == 1
    page = (Path(__file__).parent.parent / "docs" / "operations.md").read_text()
    section = page.split("\n## Notifications", 1)[1].split("\n## ", 1)[0]
    for key in JSON_KEYS:
        assert f"`{key}`" in section, key


def test_the_same_drift_is_told_once(tmp_path: Path, receiver: Receiver) -> None:
    """`journal drift` run again (from cron) tells a drift once: the same divergences are not
    sent again after a delivery; other ones are."""
    from journal.notify import Webhooks
    from journal.store import EventStore

    runbook = parse(
        HEAD + f'\n[notify.ops]\nurl = "{receiver.url()}"\non = ["drift"]\n', tmp_path / "rb"
    )
    store = EventStore(str(tmp_path / "journal.db"))
    try:
        first = ["box: torch 2.12.0 where 1 of 2 hosts have 2.10.0"]
        for lines in (first, first, [*first, "box: numpy 2.4.1 where 1 of 2 hosts have 2.4.2"]):
            hooks = Webhooks(store, runbook, BASE)
            hooks.drifted(["gpu"], lines)
            hooks.close(5)
    finally:
        store.close()
    assert [len(b["drift"]["lines"]) for b in receiver.of("drift")] == [1, 2]
    assert receiver.of("drift")[0]["url"] == f"{BASE}/j/n/hosts"


def test_a_body_is_masked_as_the_record_is(tmp_path: Path, receiver: Receiver) -> None:
    """What a notice tells of a run as it ended (its reason) went through no store: the body
    is masked with the runbook's secrets all the same, the webhook's own URL among them."""
    from journal.notify import Notice, Webhooks
    from journal.store import EventStore

    runbook = parse(
        HEAD.replace('name = "n"', 'name = "n"\nredact = ["hunter2-password"]')
        + f'\n[notify.ops]\nurl = "{receiver.url()}"\non = ["step-failed"]\n',
        tmp_path / "rb",
    )
    store = EventStore(str(tmp_path / "journal.db"))
    try:
        hooks = Webhooks(store, runbook)
        why = f"could not log in with hunter2-password at {receiver.url()}"
        hooks.tell(Notice("step-failed", "n", f"it failed: {why}", host="box", reason=why))
        hooks.close(5)
    finally:
        store.close()
    [(_, body)] = receiver.bodies
    assert "hunter2" not in json.dumps(body) and TOKEN not in json.dumps(body)
    assert body["reason"] == "could not log in with [REDACTED] at [REDACTED]"


def test_a_rollback_run_is_told_with_its_target(tmp_path: Path, receiver: Receiver) -> None:
    """What `journal rollback` runs is a step run whose target the notifier hears with its
    end (here handed the run as `run_step_fleet` hands it, without a rollback to run)."""
    from journal.notify import Webhooks
    from journal.runs import Outcome, StepRun
    from journal.store import EventStore

    runbook = parse(
        HEAD + f'\n[notify.ops]\nurl = "{receiver.url()}"\non = ["rollback"]\n', tmp_path / "rb"
    )
    target = {"to": "before:install-torch", "run": "r0", "phase": "before", "packages": {"a": "1"}}
    store = EventStore(str(tmp_path / "journal.db"))
    try:
        hooks = Webhooks(store, runbook, BASE)
        hooks.run_ended(
            StepRun("r1", "rollback", "box", Outcome("succeeded", 0, 2.5, None)), target
        )
        hooks.run_ended(StepRun("r2", "install", "box", Outcome("failed", 1, 1.0, None)))
        hooks.close(5)
    finally:
        store.close()
    [(_, body)] = receiver.bodies  # no step-failed channel: the failed run is not told
    assert body["event"] == "rollback" and body["run"] == "r1" and body["duration"] == 2.5
    assert body["rollback"] == {
        "to": "before:install-torch",
        "run": "r0",
        "phase": "before",
        "packages": 1,
    }
    assert (
        body["text"] == "rollback of box to before:install-torch (1 package, before run r0): done"
    )
