"""No secret reaches the store, by any path (issue 15): over 80 distinct markers go through
every channel a secret could take, and the raw bytes of journal.db, -wal and -shm are searched
for each marker and for its base64 at each of the three alignments.

Channels: a step's stdout and stderr (env assignments, JSON, dicts, YAML, flags, headers, URLs,
private keys, token shapes), its command line, its env and its host's env echoed back, the
runbook's `redact` values (in output, a note, a transcript), notes and their tags, an
acknowledgement's note, `record metric` labels, a benchmark's labels and the output line of a
figure, a custom probe's JSON, a capture probe, a failing probe's reason, expectations (the
values expected and found, the reasons), torch-env's capture of variables set only on the host,
an imported transcript, secrets printed in pieces seconds apart, and a 600 KiB line without a
blank with secrets around the places it is cut. Issue 27: coloured output (colour codes around
a secret, inside it, between its name and its value, before its pieces printed seconds apart,
in a long line's cut), `jq -C` and `grep --color` run for real, a `\r` redraw over a secret,
a window title and a hyperlink holding one, and tokens glued to a word.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import sys
from pathlib import Path

from journal.events import (
    ExpectationChecked,
    MetricRecorded,
    NoteAdded,
    OutputChunk,
    ProbeRecorded,
    StepFinished,
    StepStarted,
)
from journal.output import decode
from journal.store import EventStore
from tests.helpers import journal, text, write_runbook

JOURNAL = "everywhere"
#: name -> marker: each a distinct secret (none a real credential)
MARKERS: dict[str, str] = {}
#: the pieces of the markers printed in pieces, searched for too
PIECES: list[str] = []


def mark(name: str, prefix: str = "", size: int = 14, alphabet: str = "") -> str:
    """A distinct marker: ``prefix`` then ``size`` characters (of ``alphabet``: hex, digits)
    made from the name, so that no marker is part of another."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    if alphabet == "digits":
        body = "".join(str(int(c, 16) % 10) for c in digest)
    elif alphabet == "hex":
        body = digest
    else:
        body = base64.b64encode(hashlib.sha512(name.encode()).digest()).decode()
        body = "".join(c for c in body if c.isalnum())
    value = prefix + (body * 3)[:size]
    assert name not in MARKERS and all(value not in v and v not in value for v in MARKERS.values())
    MARKERS[name] = value
    return value


def split(name: str, value: str, at: float = 0.5) -> tuple[str, str]:
    cut = max(4, int(len(value) * at))
    PIECES.extend(p for p in (value[:cut], value[cut:]) if len(p) >= 8)
    return value[:cut], value[cut:]


# --- a step's output: stdout ----------------------------------------------------------------

M = mark
STDOUT = [
    f"export HF_TOKEN={M('env-hf-token')}",
    f'export DB_PASSWORD="{M("env-quoted")} with blanks"',
    json.dumps({"password": M("json-password"), "user": "bob"}),
    json.dumps({"Authorization": "Bearer " + M("json-bearer")}),
    str({"api_key": M("dict-api-key"), "region": "eu"}),
    json.dumps({"log": json.dumps({"token": M("json-in-json")})}),
    f"password: {M('yaml-password')} and the rest",
    f"  - api_key: {M('yaml-list-key')}",
    f"vault login --password {M('flag-password')}",
    f"huggingface-cli login --hf-token={M('flag-hf-token')}",
    f"mysql -h db -P 3306 -u root -p{M('mysql-p')} app",
    f"curl -H 'X-Api-Key: {M('x-api-key')}' https://api.invalid",
    f"> Authorization: Bearer {M('auth-header')}",
    f"requests.get(u, headers=('Authorization', 'Bearer {M('auth-tuple')}'))",
    f"git clone https://deploy:{M('url-password')}@git.invalid/org/repo.git",
    f"DefaultEndpointsProtocol=https;AccountName=acc;AccountKey={M('azure')}==;EndpointSuffix=x",
    f"aws_secret_access_key = {M('aws-secret')}",
    f"MYSQL_PWD={M('mysql-pwd')} mysql app",
    f"'password' => '{M('ruby-hash')}'",
    json.dumps({"pin_password": int(M("json-number", "9", 11, alphabet="digits"))}),
    M("hf", "hf_", 34),
    M("github", "ghp_", 36),
    M("github-pat", "github_pat_", 60),
    M("gitlab", "glpat-", 20),
    M("npm", "npm_", 36),
    M("pypi", "pypi-", 60),
    M("stripe", "sk_live_", 24),
    M("google", "AIza", 35),
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + M("jwt", size=30),
    M("openai", "sk-proj-", 40),
    "xoxb-123456789012-" + M("slack", size=24),
    M("aws-key-id", "AKIA", 16).upper(),
    "https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/" + M("slack-webhook", size=24),
    "AC" + M("twilio-sid", size=32, alphabet="hex"),
    "SK" + M("twilio-key", size=32, alphabet="hex"),
    "SG." + M("sendgrid-id", size=22) + "." + M("sendgrid", size=43),
    M("square", "sq0csp-", 43),
    M("mailchimp", size=32, alphabet="hex") + "-us12",
    "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ." + M("discord", size=27),
    "123456789:" + M("telegram", size=35),
    M("shopify", "shpat_", 32, alphabet="hex"),
    f"Bearer {M('bearer-long', size=32)}",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    M("pem-line-1", size=64),
    M("pem-line-2", size=64),
    "-----END OPENSSH PRIVATE KEY-----",
    "AssertionError: Torch not compiled with CUDA enabled",  # a finding to acknowledge
    # tokens glued to a word (issue 27): a token follows anything that cannot be part of it
    f"x{M('glued-github', 'ghp_', 36)}",
    "a" * 40 + M("glued-run", "ghp_", 36),
    f"token{M('glued-hf', 'hf_', 34)}",
    f"key{M('glued-google', 'AIza', 35)}",
    f"x{M('glued-gitlab', 'glpat-', 20)}",
    f"x{M('glued-npm', 'npm_', 36)}",
    f"x{M('glued-pat', 'github_pat_', 60)}",
    "tokxoxb-123456789012-" + M("glued-slack", size=24),
    "id" + M("glued-aws", "AKIA", 16).upper(),
]
# AKIA ids are upper case: the marker as registered must be as printed
MARKERS["aws-key-id"] = MARKERS["aws-key-id"].upper()
MARKERS["glued-aws"] = MARKERS["glued-aws"].upper()

STDERR = [
    f"warning: HF_TOKEN={M('stderr-env')}",
    json.dumps({"client_secret": M("stderr-json")}),
    M("stderr-token", "ghs_", 36),
]

# --- coloured output (issue 27): found in what the terminal shows, masked in the bytes -------

COLOUR_SPLIT = split("colour-split", M("colour-split", "ghp_", 36), 0.4)
LISTED_COLOUR = M("listed-colour", size=20)
LISTED_COLOUR_SPLIT = split("listed-colour", LISTED_COLOUR)
COLOURED = [
    f"\x1b[32m{M('colour-github', 'ghp_', 36)}\x1b[0m",
    f"\x1b[33mpassword\x1b[0m: {M('colour-yaml')}",
    f"\x1b[1mHF_TOKEN\x1b[0m={M('colour-env')}",
    f"{COLOUR_SPLIT[0]}\x1b[0m\x1b[1m{COLOUR_SPLIT[1]}\x1b[0m ok",
    f"vault login \x1b[1m--password\x1b[0m \x1b[1m{M('colour-flag')}\x1b[0m",
    f"\x1b[2K\x1b[1Gapi_key=\x1b(B\x1b[m{M('colour-moves')}",
    f"token={M('colour-redrawn')}\r\x1b[2K 45% |####      |\r",
    f"\x1b]0;deploy HF_TOKEN={M('colour-title')}\x07$ ls",
    f"\x1b]8;;https://bob:{M('colour-link')}@git.invalid/x\x1b\\repo\x1b]8;;\x1b\\",
    f"said \x1b[31m{LISTED_COLOUR_SPLIT[0]}\x1b[0m{LISTED_COLOUR_SPLIT[1]}\x1b[0m",
    f"\u009b32m{M('colour-8bit', 'hf_', 34)}\u009b0m",
    # jq -C's colours for {"password": …}, as jq 1.6 prints them (the step runs jq too)
    f'\x1b[1;39m{{\n  \x1b[0m\x1b[34;1m"password"\x1b[0m\x1b[1;39m:\x1b[0m \x1b[0;32m'
    f'"{M("jq-captured")}"\x1b[0m\x1b[1;39m\n\x1b[1;39m}}\x1b[0m',
]
JQ_JSON = {"password": M("jq-real"), "user": "bob"}
GREP_ENV = f"export HF_TOKEN={M('grep-env')} # for the hub\n"
COLOUR_PIECES = [
    split("colour-piece-token", M("colour-piece-token", "ghp_", 36), 0.5),
    split("colour-piece-env", M("colour-piece-env", size=20)),
]
#: coloured secrets printed in pieces, seconds apart
COLOUR_SCRIPT = f"""printf '\\033[32m%s' '{COLOUR_PIECES[0][0]}'; sleep 1.5
printf '%s\\033[0m done\\n' '{COLOUR_PIECES[0][1]}'
printf '\\033[1mHF_TOKEN\\033[0m=\\033[2m%s' '{COLOUR_PIECES[1][0]}'; sleep 1.5
printf '%s\\033[0m\\n' '{COLOUR_PIECES[1][1]}'
"""

# --- a step's command line, env, its host's env, the runbook's redact list ------------------

COMMAND_FLAG = M("command-flag")
STEP_TOKEN = M("step-env-token")
STEP_URL_PASSWORD = M("step-env-url")
HOST_SECRET = M("host-env-secret")
LISTED = M("listed-output")
LISTED_BLANKS = M("listed-blanks") + " with blanks"
MARKERS["listed-blanks"] = LISTED_BLANKS
LISTED_NOTE = M("listed-note")
LISTED_TRANSCRIPT = M("listed-transcript")
LISTED_SPLIT = M("listed-split")
LISTED_LONG = M("listed-long")

# --- notes, tags, acknowledgements, metrics, benchmarks -------------------------------------

NOTES = [
    f"HF_TOKEN={M('note-env')} set on the box",
    f"the config says password: {M('note-yaml')}",
    json.dumps({"api_key": M("note-json")}),
    f"rotated {M('note-token', 'ghp_', 36)} today",
    f"the team's literal is {LISTED_NOTE}",
]
TAG = f"token={M('note-tag')}"
ACK = f"Authorization: Bearer {M('ack-note')}"
METRIC_LABELS = [
    f"password={M('metric-label')}",
    f"endpoint=https://bench:{M('metric-url')}@bench.invalid",
    f"api_token={M('metric-token-label')}",
]
BENCH_LABEL = M("bench-label")
BENCH_TABLE_LABEL = M("bench-table-label")
BENCH_LINE = M("bench-line")

# --- probes and expectations ----------------------------------------------------------------

PROBE_JSON = {
    "db_password": M("probe-password"),
    "nested": {"api_token": M("probe-nested")},
    "dsn": f"postgres://app:{M('probe-dsn')}@db.invalid/app",
    "conf": f"password: {M('probe-yaml')}",
    "pin_password": int(M("probe-number", "9", 11, alphabet="digits")),
    "version": "1.2.3",
}
EXPECTED_SECRET = M("expect-expected")
CAPTURED = M("capture-token")
CAPTURE_EXPECTED = M("capture-expected")
PROBE_FAILURE = M("probe-failure")

# --- torch-env: variables set only on the host (its python's wrapper) -----------------------

HOST_ONLY = {
    "TORCH_HUB_TOKEN": M("torch-hub-token"),
    "NCCL_IB_SECRET": M("nccl-secret"),
    "NVIDIA_API_KEY": M("nvidia-key"),
    "CUDA_CACHE_URL": f"https://cache:{M('cuda-url')}@cache.invalid/x",
    "LD_LIBRARY_PATH": f"/opt/{M('ld-token', 'hf_', 34)}/lib",
}

# --- an imported transcript -----------------------------------------------------------------

TRANSCRIPT = f"""ana@gpu-box:~$ export HF_TOKEN={M("transcript-env")}
ana@gpu-box:~$ curl -s -H "Authorization: Bearer {M("transcript-bearer")}" https://api.invalid/me
{json.dumps({"access_token": M("transcript-json"), "token_type": "bearer"})}
ana@gpu-box:~$ cat config.yaml
database:
  password: {M("transcript-yaml")} (rotated)
ana@gpu-box:~$ mysql -u root -p{M("transcript-mysql")} -e 'select 1'
1
ana@gpu-box:~$ echo {LISTED_TRANSCRIPT}
{LISTED_TRANSCRIPT}
ana@gpu-box:~$ python3 -m sglang.bench_serving --backend sglang --api-key {M("transcript-flag")}
============ Serving Benchmark Result ============
Successful requests:                     32
Output token throughput (tok/s):         812.50
==================================================
"""

# --- secrets printed in pieces, seconds apart (stdout and stderr at once) -------------------

SPLIT_ENV = split("split-env", M("split-env", "hf_", 34), 0.3)
SPLIT_JSON = split("split-json", M("split-json"))
SPLIT_BEARER = split("split-bearer", M("split-bearer"), 0.6)
SPLIT_TOKEN = split("split-token", M("split-token", "ghp_", 36), 0.5)
SPLIT_LISTED = split("split-listed", LISTED_SPLIT)
SPLIT_YAML = split("split-yaml", M("split-yaml"))
#: the step's script, run from a file: its pieces are no part of the command recorded
SLOW_SCRIPT = f"""(
printf 'export HF_TOKEN={SPLIT_ENV[0]}'; sleep 2; printf '{SPLIT_ENV[1]} ok\\n'
printf '{{"password": "{SPLIT_JSON[0]}'; sleep 2; printf '{SPLIT_JSON[1]}", "u": 1}}\\n'
printf 'curl -H "Authorization: Bearer {SPLIT_BEARER[0]}'; sleep 1.5
printf '{SPLIT_BEARER[1]}" x\\n'
) &
(
printf 'pulled {SPLIT_TOKEN[0]}' >&2; sleep 2; printf '{SPLIT_TOKEN[1]} done\\n' >&2
printf 'said {SPLIT_LISTED[0]}' >&2; sleep 1.5; printf '{SPLIT_LISTED[1]} x\\n' >&2
printf 'password: {SPLIT_YAML[0]}' >&2; sleep 2; printf '{SPLIT_YAML[1]} more\\n' >&2
) &
wait
"""

# --- a 600 KiB line without a blank, secrets around the places it is cut --------------------

LONG = [  # (offset, as printed)
    (256 * 1024 - 16 * 1024 - 20, M("long-hf", "hf_", 34)),
    (256 * 1024 - 12, '"password":"' + M("long-json") + '"'),
    (
        2 * 256 * 1024 - 16 * 1024 - 30,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0." + M("long-jwt", size=30),
    ),
    (2 * 256 * 1024 - 9, LISTED_LONG),
    (3 * 256 * 1024 - 16 * 1024 - 5, "https://u:" + M("long-url") + "@h.invalid/x"),
    (  # a token split by colour codes, around the third cut
        3 * 256 * 1024 - 16 * 1024 + 40,
        "\x1b[32m{}\x1b[0m\x1b[1m{}\x1b[0m".format(
            *split("long-colour", M("long-colour", "ghp_", 36), 0.3)
        ),
    ),
]


def long_line() -> bytes:
    line = bytearray(b"x" * 800 * 1024)
    for at, secret in LONG:
        line[at - 1 : at + len(secret) + 1] = b"," + secret.encode() + b","
    return bytes(line) + b"\n"


def runbook(folder: Path, python: Path) -> Path:
    files = {
        "stdout.txt": "\n".join(STDOUT) + "\n",
        "stderr.txt": "\n".join(STDERR) + "\n",
        "probe.json": json.dumps(PROBE_JSON) + "\n",
        "bench.txt": f"decode: 812.5 tok/s token={BENCH_LINE}\n",
        "slow.sh": SLOW_SCRIPT,
        "coloured.txt": "\n".join(COLOURED) + "\n",
        "colour.sh": COLOUR_SCRIPT,
        "secret.json": json.dumps(JQ_JSON) + "\n",
        "env.sh": GREP_ENV,
    }
    for name, content in files.items():
        (folder / name).write_bytes(content.encode())
    (folder / "long.txt").write_bytes(long_line())
    redact = json.dumps(
        [
            *(LISTED, LISTED_BLANKS, LISTED_NOTE, LISTED_TRANSCRIPT, LISTED_SPLIT, LISTED_LONG),
            LISTED_COLOUR,
        ]
    )
    return write_runbook(
        folder,
        f"""[journal]
name = "{JOURNAL}"
redact = {redact}

[hosts.here]
ssh = "local"
python = "{python}"
env = {{ HOST_SECRET = "{HOST_SECRET}" }}

[[steps]]
name = "print"
snapshots = false
env = {{ API_TOKEN = "{STEP_TOKEN}", SERVICE_URL = "https://svc:{STEP_URL_PASSWORD}@db.invalid/x" }}
run = '''cat {folder}/stdout.txt; cat {folder}/stderr.txt >&2
echo "env $API_TOKEN $SERVICE_URL $HOST_SECRET"; echo "listed {LISTED} and {LISTED_BLANKS}"
true --password {COMMAND_FLAG}'''

[[steps]]
name = "slow"
snapshots = false
run = "sh {folder}/slow.sh"

[[steps]]
name = "long"
snapshots = false
run = "cat {folder}/long.txt"

[[steps]]
name = "colour"
snapshots = false
run = '''cat {folder}/coloured.txt; sh {folder}/colour.sh
grep --color=always TOK {folder}/env.sh
jq -C . {folder}/secret.json'''

[probes.settings]
json = true
run = "cat {folder}/probe.json"
expect = {{ db_password = "{EXPECTED_SECRET}", dsn = "sqlite:///nowhere" }}

[probes.captured]
run = "echo TOKEN {CAPTURED}"
capture = {{ api_token = 'TOKEN (\\S+)' }}
expect = {{ api_token = "{CAPTURE_EXPECTED}" }}

[probes.failing]
json = true
run = "echo 'Error: password={PROBE_FAILURE}' >&2; exit 3"

[benchmarks.decode]
run = "cat {folder}/bench.txt"
parser = "regex"
pattern = 'decode: (?P<decode_tok_s>[0-9.]+) tok/s'
labels = {{ secret = "{BENCH_TABLE_LABEL}" }}
""",
    )


def host_python(folder: Path) -> Path:
    """The host's python: journal's own, with variables that only the host sets."""
    wrapper = folder / "host-python"
    exports = "".join(f"export {k}='{v}'\n" for k, v in HOST_ONLY.items())
    wrapper.write_text(f'#!/bin/sh\n{exports}exec "{sys.executable}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def needles(value: str) -> list[bytes]:
    """The marker's bytes, and its base64 at the three alignments (the characters that also
    depend on the bytes around it left out)."""
    raw = value.encode()
    found = [raw]
    for pad, drop in ((0, 0), (1, 2), (2, 3)):
        encoded = base64.b64encode(b"x" * pad + raw)
        stable = encoded[drop : (pad + len(raw)) // 3 * 4]
        found.append(stable)
    return found


def test_no_marker_reaches_the_database_files_by_any_channel(tmp_path: Path) -> None:
    assert len(MARKERS) >= 80
    for name in HOST_ONLY:
        assert name not in os.environ  # set only on the host, unknown to journal
    rb = runbook(tmp_path, host_python(tmp_path))
    db = tmp_path / "journal.db"

    def cli(*args: str, code: int = 0) -> str:
        done = journal(*args, db=db, runbook=rb, cwd=tmp_path)
        assert done.returncode == code, (args, text(done.stderr), text(done.stdout))
        return text(done.stdout) + text(done.stderr)

    cli("run", "step", "print")
    cli("run", "step", "slow")
    cli("run", "step", "long")
    cli("run", "step", "colour")
    for note in NOTES:
        cli("note", note, "--tag", TAG)
    cli("pitfalls", "ack", "cpu-torch", "--note", ACK)
    cli("record", "metric", "tok_s", "96.1", *(a for lb in METRIC_LABELS for a in ("--label", lb)))
    cli("run", "bench", "decode", "--label", f"api_key={BENCH_LABEL}")
    cli("run", "probe", "settings", code=1)  # its expectations fail
    cli("run", "probe", "captured", code=1)
    cli("run", "probe", "failing", code=1)
    cli("run", "probe", "torch-env")
    (tmp_path / "session.txt").write_text(TRANSCRIPT)
    cli("import", "transcript", "session.txt", "--host", "gpu-box")

    # every channel was taken, and masked on the way
    store = EventStore(str(db))
    try:
        events = [r.event for r in store.read(JOURNAL)]
    finally:
        store.close()
    probes = {e.probe: e for e in events if isinstance(e, ProbeRecorded)}
    assert probes["settings"].result["db_password"] == "[REDACTED]"
    assert probes["captured"].result == {"api_token": "[REDACTED]"}
    assert "password=[REDACTED]" in (probes["failing"].error or "")
    torch_env = probes["torch-env"].result["env"]
    assert torch_env["TORCH_HUB_TOKEN"] == "[REDACTED]"
    assert torch_env["CUDA_CACHE_URL"] == "https://cache:[REDACTED]@cache.invalid/x"
    checked = [e for e in events if isinstance(e, ExpectationChecked)]
    assert {(e.key, e.verdict) for e in checked} >= {("db_password", "fail"), ("api_token", "fail")}
    assert sum(isinstance(e, NoteAdded) for e in events) == len(NOTES)
    assert any(isinstance(e, MetricRecorded) and e.source == "imported" for e in events)
    assert any(isinstance(e, MetricRecorded) and e.name == "decode_tok_s" for e in events)
    started = [e for e in events if isinstance(e, StepStarted)]
    assert any("--password [REDACTED]" in e.command for e in started)
    assert any(e.env.get("API_TOKEN") == "[REDACTED]" for e in started)
    assert sum(e.imported for e in started) == 6
    chunks = [e for e in events if isinstance(e, OutputChunk)]
    assert sum(c.size for c in chunks if c.run in {e.run for e in started if e.step == "long"}) > (
        780 * 1024
    )
    assert any(isinstance(e, StepFinished) and e.status == "succeeded" for e in events)
    # coloured output: masked where the terminal showed the secret, the colours kept
    colour_runs = {e.run for e in started if e.step == "colour"}
    coloured = b"".join(decode(c) for c in chunks if c.run in colour_runs)
    assert b"\x1b[32m[REDACTED]\x1b[0m\n" in coloured
    assert b"\x1b[33mpassword\x1b[0m: [REDACTED]\n" in coloured
    assert b"\x1b[1mHF_TOKEN\x1b[0m=[REDACTED]\n" in coloured
    assert b"[REDACTED]\x1b[0m\x1b[1m\x1b[0m ok\n" in coloured  # the token split by colours
    assert b'\x1b[0;32m"[REDACTED]"\x1b[0m' in coloured  # jq -C's password

    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("journal.db"))
    assert b"[REDACTED]" in raw
    leaked = sorted(
        name
        for name, value in [*MARKERS.items(), *((f"piece {p}", p) for p in PIECES)]
        if any(needle in raw for needle in needles(value))
    )
    assert leaked == []
