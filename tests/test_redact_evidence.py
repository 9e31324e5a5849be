"""Redaction keeps evidence (issue 25): ordinary output of uv, pip, conda, sglang and vLLM comes
out unmasked beside the secrets that must not, a probe's JSON is parsed before its values are
redacted (the H200 capture of an env holding ``tiktoken`` keeps every package), and what a
parser reads from output as printed is recorded only where its line's redaction leaves it."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from journal.benchmarks.parsers import parse
from journal.events import ExpectationChecked, OutputChunk, ProbeRecorded
from journal.probes import BUILTIN, ProbeSpec
from journal.probes.runner import read_outcome
from journal.recorder import OutputRecorder
from journal.redact import MASK, Redactor
from journal.service.bench import as_recorded, lines_of
from journal.store import EventStore
from journal.userregex import compile_user
from tests.helpers import journal, no_traceback, text

DATA = Path(__file__).parent / "data"
H200_PACKAGES = DATA / "h200" / "packages.json"

#: Ordinary output that must come out as printed: requirements (``==`` and the other PEP 440
#: operators compare, they do not assign), package names holding a secret word, figures after
#: labels of words, flags named in prose or shown in usage, literals, objects.
EVIDENCE = [
    # uv, pip, conda
    "tiktoken==0.14.0",
    " + tiktoken==0.14.0",
    " - tiktoken==0.13.0",
    "\x1b[32m+\x1b[0m \x1b[1mtiktoken\x1b[0m==0.14.0",
    "tokenizers==0.23.2",
    "secretstorage==3.3.3",
    "keyring==25.1.0",
    "google-auth==2.38.0",
    "eks-token==0.1.0",
    "oauthlib==3.2.2",
    "tiktoken>=0.14",
    "tiktoken~=0.14",
    "tiktoken!=0.13",
    "tiktoken<=1",
    "tiktoken===0.14.0",
    "Collecting tiktoken==0.14.0",
    "Requirement already satisfied: tiktoken in ./.venv/lib/python3.12/site-packages (0.14.0)",
    "Successfully installed tiktoken-0.14.0 tokenizers-0.23.2",
    "vllm 0.10.0 has requirement tiktoken>=0.6.0, but you have tiktoken 0.5.0.",
    "  - tiktoken=0.14.0=pypi_0",
    "tiktoken                  0.14.0                   pypi_0    pypi",
    # JSON and dicts of packages
    '"tiktoken": "0.14.0"',
    '{"tiktoken": "0.14.0", "google-auth": "2.38.0", "oauth": "1.0"}',
    '{"name": "tiktoken", "version": "0.14.0"}',
    '"tiktoken": {"installed": 1790322809000000000, "installer": "uv", "name": "tiktoken"}',
    "{'tiktoken': '0.14.0+cu130'}",
    # benchmarks: sglang, vLLM (tests/data/bench), their JSON results
    "Time to first token: 35.2 ms",
    "Time per output token: 3 ms",
    "Mean TTFT (ms): 35.2",
    "---------------Time to First Token----------------",
    "Total input tokens:                      204800    ",
    "Total num prompt tokens:  524288",
    "Decode.  latency: 0.00642 s, throughput:    155.76 token/s",
    "max_total_num_tokens=1206064",
    "Output token throughput (tok/s): 1234.5",
    "max_tokens: 512",
    '"max_tokens": 512',
    '{"total_input_tokens": 1000, "mean_ttft_ms": 35.2, "time_to_first_token": 35.2}',
    "tokenizer_config.json",
    '  "time_to_first_token": 35.2,',
    '  "tiktoken": {',
    '  "tiktoken": "0.14.0",',
    # printed configs: literals are no secrets
    "server_args=ServerArgs(model_path='m', api_key=None, tokenizer_path='t')",
    "{'hf_token': None, 'model': 'm'}",
    "password: null",
    # flags: files, prose, usage, the next option, references
    "--key-file /etc/ssl/key.pem",
    "--token-file ~/.tok",
    "--password-file /x",
    "--password-stdin",
    "the --password flag is deprecated",
    "use --api-key to set it",
    "the --hf-token option, or --token instead",
    "usage: serve [--api-key API_KEY] [--password PASSWORD]",
    "--password <password>",
    "huggingface-cli login --token $HF_TOKEN --add-to-git-credential",
    "docker login --password - --username bob",
    # issue 27: what a benchmark, an installer and a CLI print about tokens and passwords
    "Time to first token: 35.2",
    "Time to first token (ms): 35.2",
    "Mean TTFT (ms):                          11866.78",
    "P99 TTFT (ms):                           24349.24",
    "Output token throughput (tok/s):         4411.91",
    "Input token throughput (tok/s):          1234.50",
    "Total Token throughput (tok/s):          9210.13",
    "Peak output token throughput (tok/s):    5120.00",
    "Total generated tokens (retokenized):    197865",
    "-----Time per Output Token (excl. 1st token)------",
    "Mean TPOT (ms):                          49.99",
    "max_tokens=1024",
    "SamplingParams(n=1, temperature=0.0, max_tokens=16, skip_special_tokens=True)",
    "--max-tokens 512 --skip-tokenizer-init",
    "Tokenizer: meta-llama/Llama-3.1-8B-Instruct",
    "tokenizer='meta-llama/Llama-3.1-8B', tokenizer_mode=auto, skip_tokenizer_init=False",
    "Using a slow tokenizer. This might cause a significant slowdown.",
    "Token is valid (permission: fineGrained).",
    "Your token has been saved to /root/.cache/huggingface/token",
    "Collecting tiktoken==0.9.0",
    "Downloading tiktoken-0.9.0-cp311-cp311-manylinux_2_17_x86_64.whl (1.2 MB)",
    "Requirement already satisfied: tokenizers>=0.21 in ./.venv/lib/python3.11/site-packages"
    " (from transformers) (0.21.1)",
    "Successfully installed keyring-25.6.0 passlib-1.7.4 python-jose-3.4.0"
    " secretstorage-3.3.3 tiktoken-0.9.0 tokenizers-0.21.1",
    "Collecting SecretStorage>=3.2 (from keyring)",
    "  Using cached passlib-1.7.4-py2.py3-none-any.whl (525 kB)",
    " + python-jose==3.4.0",
    " + secretstorage==3.3.3",
    "python-jose[cryptography]==3.4.0",
    "keyrings.alt==5.0.2",
    "Building wheel for tokenizers (pyproject.toml): finished with status 'done'",
    "pip install --keyring-provider subprocess tiktoken",
    "WARNING: The --password option is deprecated and will be removed; use --password-stdin.",
    "WARNING! Using --password via the CLI is insecure. Use --password-stdin.",
    "huggingface-cli: warning: --token is deprecated, use HF_TOKEN instead",
    "Error: unknown flag: --token",
    "--api-key is required when --auth is set",
    "  --hf-token [HF_TOKEN]  The token to use as HTTP bearer authorization for remote files.",
    "usage: vllm serve [-h] [--api-key API_KEY] [--hf-token [HF_TOKEN]]",
    # words that end as a token's prefix begins, glued to what follows (issue 27's boundaries)
    "/dev/disk-by-uuid-0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e",
    "task-queue-worker-for-distributed-training-jobs",
    "mask-rcnn-resnet50-fpn-coco-pretrained-weights-v2",
    "load_hf_QwenForCausalLMCheckpointShards(path)",
    "xoxo-gossip-girl-fan-club",
]

#: (as printed, the secret in it): still masked, beside the evidence above.
SECRETS = [
    ("password: hunter22", "hunter22"),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF01", "abcdefghijklmnop"),
    ("export MY_TOKEN=abcdefghij", "abcdefghij"),
    ('"password": "xq-42"', "xq-42"),
    ('"pin_password": 1234', "1234"),
    ("--password s3cr3t", "s3cr3t"),
    ("--hf-token=abc123", "abc123"),
    ("--password=flag", "flag"),  # with '=' it is the value, whatever the word
    ("--token 'the'", "'the'"),  # quoted: a value
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEF01", "abcdefghijklmnopqrstuvwxyzABCDEF01"),
    ("git clone https://bob:pa55word@git.example.com/x.git", "pa55word"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3x\n-----END RSA PRIVATE KEY-----", "MIIE"),
    ("secret_key=abcdefghij", "abcdefghij"),
    ("DB_PASSWORD: verysecret", "verysecret"),
    # a secret word glued to a name keeps masking what is not a version
    ('"tiktoken": "s3cr3t-value"', "s3cr3t-value"),
    ("authtoken: 2abcDEFghiJKLmno", "2abcDEFghiJKLmno"),
    # an identifier's own secret word masks a version-shaped value too
    ("HF_TOKEN=1.2.3", "1.2.3"),
    ('"sessionToken": "1.2.3"', "1.2.3"),
    # a label of words with a bare number (no fraction, no unit) is not a figure
    ("Your token: 123456", "123456"),
    ("token: 35.2", "35.2"),  # one word: a key, whatever its value
    ('  "pin_password": 1234,', "1234"),
    ("api_key=None-really", "None-really"),
    ('{"auths": {"ghcr.io": {"auth": "Ym9iOnBhNTV3b3Jk"}}}', "Ym9iOnBhNTV3b3Jk"),
    # issue 27: tokens glued to a word (a token follows anything that cannot be part of it)
    ("xghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("aaaaaaaaghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwx"),
    ("mghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwx"),
    ("tokenhf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "abcdefghijklmnopqrstuvwx"),
    ("keyAIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("idAKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("xgithub_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH", "11ABCDEFG0123"),
    ("xglpat-abcdefghij0123456789", "abcdefghij0123456789"),
    ("xxoxb-123456789012-abcdefghijklmnop", "abcdefghijklmnop"),
    ("xnpm_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwx"),
]


def redact(line: str) -> str:
    return Redactor().text(line, "stdout")[0]


@pytest.mark.parametrize("line", EVIDENCE)
def test_ordinary_output_comes_out_as_printed(line: str) -> None:
    assert redact(line) == line


@pytest.mark.parametrize(("printed", "secret"), SECRETS, ids=[p for p, _ in SECRETS])
def test_secrets_beside_the_evidence_are_still_masked(printed: str, secret: str) -> None:
    out = redact(printed)
    assert secret not in out and MASK in out, out


@pytest.mark.parametrize(("printed", "secret"), SECRETS, ids=[p for p, _ in SECRETS])
def test_a_cut_anywhere_in_a_long_line_splits_no_secret(printed: str, secret: str) -> None:
    """Where a recorder cuts a long line (:meth:`Redactor.safe_cut`), the exceptions for
    evidence do not count: a cut at any byte of the secret's line leaves it masked."""
    redactor = Redactor()
    pad = "=" * 64 + " "
    data = (pad + printed.replace("\n", " \n") + " =\n").encode()
    for at in range(len(pad), len(pad) + len(printed) + 1):
        cut = redactor.safe_cut(data, at, 0)
        out = redactor.bytes(data[:cut], "x")[0] + redactor.bytes(data[cut:], "x")[0]
        assert secret.encode() not in out, (at, cut, out)


def test_real_benchmark_installer_and_session_output_is_left_whole() -> None:
    """Every capture of real output that journal reads (sglang, vLLM, nccl-tests, llama.cpp,
    uv, pip, conda, the H200's probes) holds no secret: redaction leaves all of it."""
    files = [
        *sorted((DATA / "bench").glob("*.txt")),
        *sorted((DATA / "transcripts").glob("*.txt")),
        *sorted((DATA / "h200").glob("*.txt")),
        *sorted((DATA / "h200").glob("*.json")),
    ]
    assert len(files) > 40
    redactor = Redactor()
    changed = [f.name for f in files if redactor.bytes(f.read_bytes(), "x")[1]]
    assert changed == []


def test_a_recorded_uv_line_naming_tiktoken_is_stored_as_printed() -> None:
    """The recorder (every step's output) stores ``+ tiktoken==0.14.0`` whole, so the
    install detectors read the version; a token on the next line is still masked."""
    chunks: list[OutputChunk] = []
    recorder = OutputRecorder(chunks.extend, "run", "here", Redactor())
    token = "hf_" + "x" * 34
    recorder.feed(
        "stdout", f" + tiktoken==0.14.0\n - tiktoken==0.13.0\nHF_TOKEN={token}\n".encode()
    )
    recorder.close()
    stored = "".join(c.data for c in chunks)
    assert stored == f" + tiktoken==0.14.0\n - tiktoken==0.13.0\nHF_TOKEN={MASK}\n"


# --- structured results: parsed, then redacted ------------------------------------------------


def test_a_packages_mapping_keeps_its_names_and_versions() -> None:
    redactor = Redactor()
    result = {
        "packages": {"tiktoken": "0.14.0", "eks-token": "0.1", "google-auth": "2.38.0"},
        "snapshot": {
            "tiktoken": {
                "name": "tiktoken",
                "version": "0.14.0",
                "direct_url": {"url": "https://bob:pa55word@pypi.example.com/t.whl"},
            }
        },
        "env": {"HF_TOKEN": "hf_" + "y" * 34, "TIKTOKEN_CACHE_DIR": "/cache"},
        "db_password": "1.2.3",
        "pin_password": 1234,
        "time_to_first_token": 35.2,
        "has_token": True,
    }
    out = redactor.value(result, "probe")
    assert out["packages"] == result["packages"]
    assert out["snapshot"]["tiktoken"]["name"] == "tiktoken"
    assert out["snapshot"]["tiktoken"]["version"] == "0.14.0"
    assert (
        out["snapshot"]["tiktoken"]["direct_url"]["url"]
        == f"https://bob:{MASK}@pypi.example.com/t.whl"
    )
    assert out["env"] == {"HF_TOKEN": MASK, "TIKTOKEN_CACHE_DIR": "/cache"}
    assert (out["db_password"], out["pin_password"]) == (MASK, MASK)
    assert (out["time_to_first_token"], out["has_token"]) == (35.2, True)


def test_the_h200_packages_capture_comes_out_exactly_as_captured() -> None:
    """The real snapshot of the H200's env (197 distributions, ``tiktoken`` among them) read
    as a probe's output is: every name and version as captured, the JSON whole."""
    raw = H200_PACKAGES.read_bytes()
    captured = json.loads(raw)
    assert "tiktoken" in captured["packages"]
    spec = ProbeSpec("packages", script=BUILTIN["packages"])
    result, error = read_outcome(spec, raw, b"", Redactor.for_run())
    assert error is None
    assert result == captured
    for name, entry in captured["packages"].items():
        got = result["packages"][name]
        assert (got["name"], got["version"]) == (entry["name"], entry["version"])


def test_a_direct_url_password_in_a_snapshot_is_masked() -> None:
    captured = json.loads(H200_PACKAGES.read_bytes())
    url = "https://ci:pa55word-77@wheels.example.com/simple/tiktoken-0.14.0.whl"
    captured["packages"]["tiktoken"]["direct_url"] = {"url": url, "archive_info": {}}
    spec = ProbeSpec("packages", script=BUILTIN["packages"])
    result, _ = read_outcome(spec, json.dumps(captured).encode(), b"", Redactor())
    entry = result["packages"]["tiktoken"]
    assert entry["direct_url"]["url"] == url.replace("pa55word-77", MASK)
    assert (entry["name"], entry["version"]) == ("tiktoken", "0.14.0")


def test_output_that_is_no_json_is_shown_redacted() -> None:
    spec = ProbeSpec("custom", run="x", json=True)
    stdout = b"connecting with password: hunter22-abc\nTraceback: boom\n"
    result, error = read_outcome(spec, stdout, b"", Redactor())
    assert result is None
    assert "hunter22-abc" not in error and MASK in error and "boom" in error


def test_a_capture_keeps_evidence_and_masks_what_its_line_masks() -> None:
    """Captures are taken from the output as printed; a value that the redaction of its line
    does not leave standing (read from a secret) is masked, one it leaves is kept whole."""
    spec = ProbeSpec(
        "custom",
        run="x",
        capture={
            "tiktoken": compile_user(r"tiktoken==(\S+)"),
            "login": compile_user(r"login token=(\S+)"),
            "user": compile_user(r"user (\w+) login"),
        },
    )
    stdout = b"tiktoken==0.14.0\nuser bob login token=abcdef123456\n"
    result, error = read_outcome(spec, stdout, b"", Redactor())
    assert error is None
    assert result == {"tiktoken": "0.14.0", "login": MASK, "user": "bob"}


# --- a benchmark's figures: read as printed, recorded as redacted -----------------------------


def _recorded(raw: str, redactor: Redactor) -> str:
    return redactor.text(raw, "stdout")[0]


def test_real_serving_figures_read_as_printed_are_recorded_unchanged() -> None:
    raw = (DATA / "bench" / "sglang-bench-serving.txt").read_text()
    redactor = Redactor()
    result = parse("sglang", raw)
    wanted = {f.line for f in result.figures}
    out = as_recorded(result, lines_of([_recorded(raw, redactor)], wanted), redactor)
    assert out.figures == result.figures and out.errors == []
    assert {"total_input_tokens", "mean_ttft_ms"} <= {f.name for f in out.figures}


def test_a_figure_read_from_a_secret_is_not_recorded_and_its_line_is_masked() -> None:
    raw = "run 1: 35.2 tok/s token=abcdef123\npin_password: 48151623\n"
    redactor = Redactor()
    patterns = [r"run 1: (?P<speed>[\d.]+) tok/s", r"pin_password: (?P<pin>\d+)"]
    result = parse("regex", raw, patterns=patterns)
    assert {f.name for f in result.figures} == {"speed", "pin"}
    recorded = _recorded(raw, redactor)
    out = as_recorded(result, lines_of([recorded], {1, 2}), redactor)
    assert [(f.name, f.value, f.text) for f in out.figures] == [
        ("speed", 35.2, f"run 1: 35.2 tok/s token={MASK}")
    ]
    assert len(out.errors) == 1 and "pin (line 2) is not recorded" in out.errors[0]
    assert "48151623" not in repr(out)


def test_lines_of_reads_lines_across_pieces() -> None:
    pieces = ["first\nsec", "ond\x1b[0m\r\nthird", "\nfourth"]
    assert lines_of(pieces, {2, 4}) == {2: "second", 4: "fourth"}


# --- end to end: the CLI, the transport, the store ------------------------------------------


def test_a_probe_printing_the_h200_snapshot_is_stored_whole(tmp_path: Path) -> None:
    """`journal run probe` on the `local` host, a `json = true` probe printing the H200's
    snapshot: the stored result has every package as captured, and an expectation on
    ``tiktoken``'s version is recorded with its values (a distribution's name is no secret)."""
    runbook = tmp_path / "runbook.toml"
    runbook.write_text(
        f"""[journal]
name = "evidence"

[hosts.here]
ssh = "local"
python = {json.dumps(sys.executable)}

[probes.h200]
run = {json.dumps(f"cat {shlex.quote(str(H200_PACKAGES))}")}
json = true
expect = {{ "h200:packages.tiktoken.version" = "0.14.0" }}
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOURNAL_")}
    result = journal(
        "run", "probe", "h200", db=tmp_path / "j.db", runbook=runbook, env=env, cwd=tmp_path
    )
    assert no_traceback(result), text(result.stderr)
    assert result.returncode == 0, text(result.stdout) + text(result.stderr)
    store = EventStore(str(tmp_path / "j.db"))
    try:
        events = [rec.event for rec in store.read("evidence")]
    finally:
        store.close()
    probes = [e for e in events if isinstance(e, ProbeRecorded)]
    assert len(probes) == 1 and probes[0].error is None
    assert probes[0].result == json.loads(H200_PACKAGES.read_bytes())
    (checked,) = [e for e in events if isinstance(e, ExpectationChecked)]
    assert (checked.expected, checked.actual, checked.verdict) == ("0.14.0", "0.14.0", "pass")
    assert not re.search(r"REDACTED", (tmp_path / "j.db").read_bytes().decode("latin-1"))
