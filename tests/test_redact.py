"""Secrets are masked before anything is written, and what was masked is said, not the value."""

from __future__ import annotations

from journal.redact import MASK, Redactor


def redact(data: bytes, **kwargs) -> tuple[bytes, list[dict]]:  # type: ignore[no-untyped-def]
    return Redactor.for_run(environ={}, **kwargs).bytes(data, "stdout")


def test_secret_named_variables_in_commands_and_output() -> None:
    out, found = redact(b"export HF_TOKEN=hf_x1 WANDB_API_KEY='abc def' DB_PASSWORD=\"p w\" X=1\n")
    assert out == (
        b"export HF_TOKEN=[REDACTED] WANDB_API_KEY=[REDACTED] DB_PASSWORD=[REDACTED] X=1\n"
    )
    assert found == [{"kind": "env-assignment", "where": "stdout", "count": 3}]


def test_authorization_headers_and_url_passwords() -> None:
    out, found = redact(
        b"> Authorization: Bearer eyJabc.def\r\n"
        b"Cloning https://deploy:gh-s3cret@git.example.com/org/repo.git\n"
    )
    assert b"eyJabc" not in out and b"gh-s3cret" not in out
    assert b"Authorization: [REDACTED]\r\n" in out
    assert b"https://deploy:[REDACTED]@git.example.com/org/repo.git" in out
    assert {f["kind"] for f in found} == {"authorization-header", "url-password"}


def test_listed_values_and_secret_env_values_are_found_anywhere_even_among_bad_bytes() -> None:
    redactor = Redactor.for_run(
        listed=["corp-pass-42"], env={"HF_TOKEN": "tok-123456"}, environ={"MY_SECRET": "env-999999"}
    )
    data = b"\xff\xfeprefix corp-pass-42 and tok-123456 env-999999\xc3(\n"
    out, found = redactor.bytes(data, "stderr")
    assert out == b"\xff\xfeprefix [REDACTED] and [REDACTED] [REDACTED]\xc3(\n"
    assert all(f["where"] == "stderr" for f in found)
    assert not any("corp-pass" in str(f) or "tok-123" in str(f) for f in found)


def test_token_shapes_are_masked_without_a_name() -> None:
    token = b"hf_" + b"a" * 34
    out, found = redact(b"using " + token + b" now\n")
    assert out == b"using [REDACTED] now\n"
    assert found[0]["kind"] == "token-shape"


def test_env_mappings_hide_secret_names_whole_and_keep_the_rest() -> None:
    shown, found = Redactor.for_run(environ={}).env(
        {"HF_TOKEN": "hf_zzz", "CUDA_HOME": "/usr/local/cuda-13.0"}, "env"
    )
    assert shown == {"HF_TOKEN": MASK, "CUDA_HOME": "/usr/local/cuda-13.0"}
    assert found == [{"kind": "secret-variable", "where": "env.HF_TOKEN", "count": 1}]


def test_plain_output_is_left_alone() -> None:
    line = b"Installed 6 packages in 3ms\n + torch==2.12.0.dev20260226+cu130\nkey=value\n"
    assert redact(line) == (line, [])
