"""Secrets never reach the store by the paths that once let them through: notes, their tags,
acknowledgement notes, metric labels, and JSON / flag / header forms and newer token shapes in
step output. The raw database files (and base64 of them) are searched for every marker."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.helpers import journal, text, write_runbook

#: What leaked before, one marker each (none is a real credential).
MARKERS = {
    "json-password": "pw-json-7Qx2Lm",
    "json-authorization": "bearer-json-K4vN8s",
    "dict-api-key": "apikey-dict-Zp5Rw1",
    "flag-password": "pw-flag-Ht6Yq3",
    "flag-token": "tok-flag-Uj9Cb2",
    "x-api-key": "xapikey-Gm3Vd8",
    "gitlab": "glpat-" + "a1B2c3D4e5F6g7H8i9J0",
    "npm": "npm_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "pypi": "pypi-" + "AgEIcHlwaS5vcmcCJGE2ZDk4ZjE0LWIwNzctNDQ1Zi1hMmQ1LTc2N2Y4ZGFmMjM0OQ",
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "google": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36",
    "note-token": "hf_" + "NoteTokenA1b2C3d4E5f6G7h8I9j0K1l2M",
    "note-password": "pw-note-Wd4Tz6",
    "note-tag": "pw-tag-Bs7Kx0",
    "ack-note": "pw-ack-Ny2Fh5",
    "label": "pw-label-Qe8Lr4",
}

OUTPUT = "\n".join(
    [
        json.dumps({"password": MARKERS["json-password"], "user": "bob"}),
        json.dumps({"Authorization": "Bearer " + MARKERS["json-authorization"]}),
        str({"api_key": MARKERS["dict-api-key"]}),
        f"mysql --password={MARKERS['flag-password']} db",
        f"huggingface-cli login --token {MARKERS['flag-token']}",
        f"curl -H 'X-Api-Key: {MARKERS['x-api-key']}' https://example.invalid",
        *(MARKERS[k] for k in ("gitlab", "npm", "pypi", "stripe", "google", "jwt")),
        "AssertionError: Torch not compiled with CUDA enabled",  # a finding to acknowledge
    ]
)


def test_no_marker_reaches_the_database_files(tmp_path: Path) -> None:
    printed = tmp_path / "printed.txt"
    printed.write_text(OUTPUT + "\n")
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "secrets"\n\n[hosts.here]\nssh = "local"\n\n'
        f'[[steps]]\nname = "leaky"\nsnapshots = false\nrun = "cat {printed}"\n',
    )
    db = tmp_path / "journal.db"
    assert journal("run", "step", "leaky", db=db, runbook=rb).returncode == 0
    note = f"HF_TOKEN={MARKERS['note-token']} password={MARKERS['note-password']}"
    tag = f"password={MARKERS['note-tag']}"
    assert journal("note", note, "--tag", tag, db=db, runbook=rb).returncode == 0
    label = f"password={MARKERS['label']}"
    recorded = journal("record", "metric", "tok_s", "96.1", "--label", label, db=db, runbook=rb)
    assert recorded.returncode == 0, text(recorded.stderr)
    ack = f"password={MARKERS['ack-note']}"
    acked = journal("pitfalls", "ack", "cpu-torch", "--note", ack, db=db, runbook=rb)
    assert acked.returncode == 0, text(acked.stderr)
    logged = journal("log", "--output", db=db, runbook=rb)
    assert b"[REDACTED]" in logged.stdout
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("journal.db"))
    leaked = [
        name
        for name, marker in MARKERS.items()
        if marker.encode() in raw or base64.b64encode(marker.encode())[:16] in raw
    ]
    assert leaked == []
