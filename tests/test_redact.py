"""Secrets are masked before anything is written, and what was masked is said, not the value."""

from __future__ import annotations

import json

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


#: (as printed, the secret in it): structured forms, flags and token shapes
FORMS = [
    (b'{"password": "hunter2-json", "user": "bob"}', b"hunter2-json"),
    (b'{"password": "it\'s \\"quoted\\" Zq", "user": "bob"}', b"quoted"),
    (b"{'api_key': 'py-dict-key-77', 'x': 1}", b"py-dict-key-77"),
    (b'{"pin_password": 48151623, "n": 2}', b"48151623"),
    (b'log {\\"token\\": \\"inner-json-tok\\", \\"a\\": 1}', b"inner-json-tok"),
    (b"'password' => 'ruby-hash-pw'", b"ruby-hash-pw"),
    (b"password: yaml pass with blanks", b"with blanks"),
    (b"  - api_key: yaml-list-key-9", b"yaml-list-key-9"),
    (b'db:\n  password: "quoted yaml"\n', b"quoted yaml"),
    (b"mysql -h db -P 3306 -u root -pMyPw-glued db", b"MyPw-glued"),
    (b"mariadb-dump -u root -p'quoted pw' db", b"quoted pw"),
    (b"huggingface-cli login --token flag-tok-1 --hf-token=flag-tok-2", b"flag-tok-"),
    (b"vault login --password 'pw flag'", b"pw flag"),
    (b"curl -H 'X-Api-Key: header-key-3'", b"header-key-3"),
    (b"headers=('Authorization', 'Bearer after-auth-tok')", b"after-auth-tok"),
    (b"Bearer abcdefghijklmnopqrstuvwxyz0123", b"abcdefghijklmnopqrstuvwxyz0123"),
    (b"AccountName=acc;AccountKey=azureKey123+/def==;EndpointSuffix=x", b"azureKey123"),
    (b"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", b"wJalrXUtnFEMI"),
    (b"MYSQL_PWD=mysql-pwd-env DB_PASS=db-pass-env", b"-env"),
    (
        b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQUJDREVGR0hJSktMTU5P\n"
        b"-----END OPENSSH PRIVATE KEY-----\n",
        b"b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    (b"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", b"MIIEvQIBADANBgkq"),
    (b"PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 2\nAAAAgQCputty1\nAAAAgQCputty2\n", b"putty"),
    (b"https://hooks.slack.com/services/T0A1B2C3D/B0A1B2C3D/xYz0123456789abcdEFGH", b"xYz01234"),
    (b"sid AC" + b"0123456789abcdef" * 2 + b" ok", b"0123456789abcdef" * 2),
    (b"key SK" + b"fedcba9876543210" * 2, b"fedcba9876543210" * 2),
    (b"SG." + b"s" * 22 + b"." + b"g" * 43, b"g" * 43),
    (b"sq0csp-" + b"q" * 43 + b" sq0atp-" + b"r" * 22, b"q" * 43),
    (b"0123456789abcdef0123456789abcdef-us12", b"0123456789abcdef0123456789abcdef"),
    (b"bot 123456789:" + b"T" * 35, b"T" * 35),
    (
        b"MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
        b"ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    ),
    (b"AKIAIOSFODNN7EXAMPLE and ASIAIOSFODNN7EXAMPLF", b"IOSFODNN7EXAMPL"),
    (b"shpat_" + b"a" * 32 + b" gldt-" + b"y" * 20, b"a" * 32),
    (b"xoxb-123456789012-abcdefghij", b"abcdefghij"),
]


def test_structured_forms_flags_and_token_shapes_are_masked() -> None:
    for printed, secret in FORMS:
        out, found = redact(printed + b"\n")
        assert secret not in out, (printed, out)
        assert found and all("count" in f for f in found)


def test_json_stays_json_and_look_alikes_are_left_alone() -> None:
    out, _ = redact(b'{"pin_password": 1234, "has_token": true, "max_token": null}')
    assert json.loads(out) == {"pin_password": MASK, "has_token": True, "max_token": None}
    for line in (
        b"mkdir -p /tmp/x && mysqldump -u root -p db",  # -p alone asks for the password
        b"python -m vllm.entrypoints --max-tokens 512 --password-stdin",
        b"---------------Inter-Token Latency----------------",
        b"Output token throughput (tok/s): 4123.5",
        b"key=value monkey: 5 tokens: 12",
    ):
        assert redact(line) == (line, []), line
