"""The expectation engine against real probe output: the H200 capture and its package snapshot.

`tests/data/h200/torch-env.json` and `packages.json` are what the probes printed on a real
H200 host (see `tests/data/h200/capture.sh`): torch 2.11.0+cu130 (PyPI's CUDA 13.0 build: its
wheel metadata says plain 2.11.0, torch/version.py says +cu130), NCCL 2.28.9, one GPU. The
nightly facts are that capture with the seed upgrade's torch (`2.12.0.dev20260226+cu130`);
the CPU facts are what the probe reports for a CPU torch, kept to the fields the tests read.
"""

from __future__ import annotations

import copy
import datetime
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from journal.errors import BadInput
from journal.expect import (
    NOT_INSTALLED,
    BadSpec,
    Facts,
    Spec,
    Verdict,
    check,
    check_all,
    normalize_name,
    resolve,
    validate,
)

DATA = Path(__file__).parent / "data" / "h200"
H200: dict[str, Any] = json.loads((DATA / "torch-env.json").read_text())
H200_PACKAGES: dict[str, dict[str, Any]] = json.loads((DATA / "packages.json").read_text())[
    "packages"
]

CPU_REASON = "torch is a CPU build: no NCCL"
NVML_REASON = "NVML cannot start: NVML Shared Library Not Found"
CPU: dict[str, Any] = {
    "probe": "torch-env",
    "torch": {
        "version": "2.13.0+cpu",
        "cuda": None,
        "nccl": {"unavailable": CPU_REASON},
        "cuda_available": False,
        "device_count": 0,
        "devices": [],
        "arch_list": {"unavailable": "torch is a CPU build (torch.version.cuda is None)"},
    },
    "nvml": {"unavailable": NVML_REASON},
    "driver": {"unavailable": NVML_REASON},
    "nccl": {"unavailable": CPU_REASON},
    "gpu_count": 0,
}

DESIGN_EXPECT = {"torch.version": "*+cu130", "torch.cuda": "13.0", "nccl": ">=2.28"}


def with_torch(version: str, cuda: str = "13.0") -> dict[str, Any]:
    """The H200 capture with another torch installed."""
    result = copy.deepcopy(H200)
    result["torch"]["version"] = version
    result["torch"]["cuda"] = cuda
    return result


def h200() -> Facts:
    return Facts({"torch-env": H200}, H200_PACKAGES)


def nightly() -> Facts:
    return Facts({"torch-env": with_torch("2.12.0.dev20260226+cu130")}, H200_PACKAGES)


def cpu() -> Facts:
    return Facts({"torch-env": CPU}, {})


def passes(key: str, expected: object, facts: Facts) -> Verdict:
    verdict = check(key, expected, facts)
    assert verdict.ok, verdict.reason
    assert verdict.reason is None
    return verdict


def fails(key: str, expected: object, facts: Facts) -> Verdict:
    verdict = check(key, expected, facts)
    assert not verdict.ok
    assert verdict.reason
    return verdict


# --- glob and exact ------------------------------------------------------------------------


def test_glob_passes_for_the_variant_asked_for() -> None:
    verdict = passes("torch.version", "*+cu130", nightly())
    assert verdict == Verdict(
        "torch.version", "*+cu130", "2.12.0.dev20260226+cu130", True, None, "torch-env"
    )
    passes("torch.devices.0.name", "NVIDIA H*", h200())
    passes("torch.arch_list.5", "sm_1[02]0", h200())


def test_glob_fails_for_the_variant_not_switched() -> None:
    before = Facts({"torch-env": with_torch("2.10.0+cu128", "12.8")}, H200_PACKAGES)
    verdict = fails("torch.version", "*+cu130", before)
    assert verdict.reason == "torch.version is 2.10.0+cu128, expected *+cu130"
    assert verdict.actual == "2.10.0+cu128"
    # The real H200's torch is a cu130 build: the glob holds there, and a cu128 one does not.
    passes("torch.version", "*+cu130", h200())
    assert fails("torch.version", "*+cu128", h200()).reason == (
        "torch.version is 2.11.0+cu130, expected *+cu128"
    )


def test_exact_passes_for_the_same_text() -> None:
    passes("torch.cuda", "13.0", h200())
    passes("driver", "580.159.04", h200())
    passes("gpu_name", "NVIDIA H200", h200())


def test_exact_fails_for_other_text() -> None:
    verdict = fails("torch.cuda", "12.8", h200())
    assert verdict.reason == "torch.cuda is 13.0, expected 12.8"
    assert fails("gpu_name", "nvidia h200", h200()).reason  # case matters


def test_exact_is_text_and_double_equals_is_pep440() -> None:
    verdict = fails("packages.torch", "2.11", h200())
    assert verdict.reason == (
        "packages.torch is 2.11.0, expected 2.11 "
        "(equal as versions but not as text; write ==2.11 to compare versions)"
    )
    passes("packages.torch", "==2.11", h200())
    passes("torch.version", "==2.11+cu130", h200())
    fails("torch.version", "2.12.0.dev20260226", nightly())
    passes("torch.version", "==2.12.0.dev20260226", nightly())


def test_exact_text_of_values_that_are_not_text() -> None:
    passes("gpu_count", "1", h200())
    passes("torch.cuda_available", "true", h200())
    passes("torch.cuda", "null", cpu())
    assert fails("torch.cuda", "13.0", cpu()).reason == "torch.cuda is null, expected 13.0"


# --- comparisons ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "ok"),
    [
        (">=2.28", True),
        (">=2.29", False),
        ("<=2.28.9", True),
        ("<=2.28.8", False),
        (">2.28", True),
        (">2.28.9", False),
        ("<2.30", True),
        ("<2.28.9", False),
        ("!=2.28.8", True),
        ("!=2.28.9", False),
        ("==2.28.9", True),
        ("==2.28", False),
        ("==2.28.9.0", True),
        (">= 2.28", True),
    ],
)
def test_each_comparison_on_nccl(expected: str, ok: bool) -> None:
    verdict = check("nccl", expected, h200())
    assert verdict.ok is ok
    assert verdict.expected == expected
    assert verdict.actual == "2.28.9"
    if not ok:
        assert verdict.reason == f"nccl is 2.28.9, expected {expected}"


def test_comparisons_are_versions_not_text() -> None:
    passes("nccl", ">=2.9", h200())  # as text "2.28.9" < "2.9"
    passes("driver", ">=580", h200())  # "580.159.04"
    passes("env.NCCL_VERSION", ">=2.28.3", h200())  # "2.28.3-1" is 2.28.3.post1
    passes("nvml.devices.0.memory_total_mib", ">=140000", h200())  # an int
    passes("gpu_count", ">=1", h200())
    fails("gpu_count", ">=2", h200())
    passes("torch.cudnn", ">=90000", h200())


@pytest.mark.parametrize(
    ("expected", "ok"),
    [
        (">=2.28,<2.30", True),
        (">=2.28, <2.30", True),
        (" >=2.28 , !=2.28.8 , <3 ", True),
        (">=2.28,<2.28.9", False),
        (">=2.29,<2.30", False),
    ],
)
def test_ranges(expected: str, ok: bool) -> None:
    verdict = check("nccl", expected, h200())
    assert verdict.ok is ok
    if not ok:
        assert verdict.reason == f"nccl is 2.28.9, expected {expected}"


def test_a_dev_release_comes_before_its_release() -> None:
    """PEP 440: 2.12.0.dev20260226 < 2.12; ``>=2.12.0.dev0`` is how to admit the nightlies."""
    verdict = fails("torch.version", ">=2.12", nightly())
    assert verdict.reason == (
        "torch.version is 2.12.0.dev20260226+cu130, expected >=2.12 (a dev or pre-release "
        "sorts before its release; write >=2.12.0.dev0 to admit 2.12.0's nightlies)"
    )
    passes("torch.version", ">=2.12.0.dev0", nightly())
    passes("torch.version", ">=2.12.0.dev0,<2.13.0.dev0", nightly())
    fails("torch.version", "<2.12.0.dev0", nightly())
    passes("torch.version", ">2.11", nightly())
    passes("torch.version", ">=2.12.0rc1", Facts({"torch-env": with_torch("2.12.0")}))
    fails("torch.version", ">=2.12.0", Facts({"torch-env": with_torch("2.12.0rc1")}))


def test_an_exclusive_upper_bound_keeps_its_own_nightlies_out() -> None:
    """PEP 440: ``<2.12`` admits no pre-release of 2.12 itself, so a 2.12 nightly fails it."""
    verdict = fails("torch.version", "<2.12", nightly())
    assert verdict.reason == (
        "torch.version is 2.12.0.dev20260226+cu130, expected <2.12 (PEP 440 keeps 2.12.0's "
        "own dev and pre-releases out of <2.12; write <2.12.0a0 to let its nightlies in)"
    )
    passes("torch.version", "<2.12.0a0", nightly())
    passes("torch.version", "<2.13", nightly())


def test_compatible_release_wildcards_and_arbitrary_equality() -> None:
    passes("nccl", "~=2.28", h200())  # >=2.28, ==2.*
    passes("nccl", "~=2.28.0", h200())  # >=2.28.0, ==2.28.*
    fails("nccl", "~=2.29", h200())
    fails("nccl", "~=2.28.10", h200())
    passes("nccl", "==2.28.*", h200())
    fails("nccl", "==2.29.*", h200())
    fails("nccl", "!=2.28.*", h200())
    passes("nccl", "!=2.29.*", h200())
    passes("nccl", "===2.28.9", h200())
    fails("nccl", "===2.28.09", h200())  # text, not versions: 2.28.09 == 2.28.9 but not ===
    passes("torch.version", "~=2.12.0.dev0", nightly())
    passes("torch.version", "==2.12.*", nightly())  # a wildcard takes the local variant in
    passes("torch.version", ">=2.28,~=2.28.0", Facts({"torch-env": with_torch("2.28.3")}))


def test_a_local_label_counts_only_when_the_expectation_names_one() -> None:
    before = Facts({"torch-env": with_torch("2.10.0+cu128", "12.8")}, H200_PACKAGES)
    passes("torch.version", "==2.10.0", before)
    passes("torch.version", "<=2.10.0", before)
    fails("torch.version", ">2.10.0", before)  # a variant of 2.10.0 is no newer release
    fails("torch.version", "!=2.10.0", before)
    passes("torch.version", "==2.10.0+cu128", before)
    fails("torch.version", "==2.10.0+cu130", before)
    passes("torch.version", "!=2.10.0+cu130", before)


def test_a_value_that_is_no_version_fails_every_comparison() -> None:
    verdict = fails("torch.cuda", ">=12", cpu())
    assert verdict.reason == "torch.cuda is null, expected >=12 (which is not a version)"
    fails("torch.cuda", "!=12.8", cpu())
    fails("torch.cuda_available", ">=1", h200())
    fails("gpu_name", "!=2", h200())


# --- lists, numbers and booleans -----------------------------------------------------------


def test_a_list_is_one_of() -> None:
    verdict = passes("torch.cuda", ["13.0", "13.1"], h200())
    assert verdict.expected == '["13.0", "13.1"]'
    passes("torch.version", ["*+cu130", "==2.11.0"], h200())
    passes("gpu_count", [1, 2, 4, 8], h200())


def test_a_list_fails_when_none_holds() -> None:
    verdict = fails("torch.cuda", ["12.8", "12.9"], h200())
    assert verdict.reason == "torch.cuda is 13.0, expected one of 12.8, 12.9"
    assert verdict.expected == '["12.8", "12.9"]'
    fails("gpu_count", [2, 4, 8], h200())


def test_numbers_are_compared_as_values() -> None:
    verdict = passes("gpu_count", 1, h200())
    assert verdict.expected == "1"
    passes("gpu_count", 1.0, h200())
    passes("torch.device_count", 0, cpu())
    verdict = fails("gpu_count", 8, h200())
    assert verdict.reason == "gpu_count is 1, expected 8"
    verdict = fails("torch.cuda", 13.0, h200())
    assert verdict.reason == (
        'torch.cuda is 13.0, expected 13.0 (it is the text "13.0"; '
        "quote the expectation to match text)"
    )


def test_booleans_are_compared_as_values() -> None:
    verdict = passes("torch.cuda_available", True, h200())
    assert verdict.expected == "true"
    passes("torch.cuda_available", False, cpu())
    verdict = fails("torch.cuda_available", True, cpu())
    assert verdict.reason == "torch.cuda_available is false, expected true"
    fails("gpu_count", True, h200())  # 1 is not true
    fails("torch.cuda_available", 1, h200())  # nor true 1


# --- package versions ----------------------------------------------------------------------


def test_package_present() -> None:
    verdict = passes("packages.numpy", "==2.5.2", h200())
    assert (verdict.actual, verdict.source) == ("2.5.2", "packages")
    passes("packages.nvidia-nccl-cu13", ">=2.28", h200())
    passes("packages.torch", "2.11.0", h200())


def test_package_names_are_normalized() -> None:
    assert normalize_name("Typing_Extensions") == "typing-extensions"
    assert normalize_name("zope.interface") == "zope-interface"
    passes("packages.Typing_Extensions", ">=4", h200())
    passes("packages.NVIDIA.nccl_cu13", "2.28.9", h200())


def test_package_at_another_version() -> None:
    verdict = fails("packages.numpy", "==2.4.2", h200())
    assert verdict.reason == "packages.numpy is 2.5.2, expected ==2.4.2"
    fails("packages.torch", "*+cu130", h200())


def test_package_absent() -> None:
    verdict = fails("packages.vllm", ">=0.6", h200())
    assert verdict.actual == NOT_INSTALLED
    assert verdict.reason == "packages.vllm is not installed, expected >=0.6"
    verdict = fails("packages.nvidia-nccl", ">=2.28", h200())
    assert (verdict.reason or "").startswith(
        "packages.nvidia-nccl is not installed, expected >=2.28 "
        "(installed with a similar name: nvidia-nccl-cu13, "
    )
    passes("packages.vllm", "not installed", h200())
    fails("packages.numpy", "not installed", h200())


def test_package_without_a_snapshot_uses_a_probes_packages() -> None:
    facts = Facts({"torch-env": H200})
    verdict = passes("packages.nvidia-nccl-cu13", ">=2.28", facts)
    assert verdict.source == "torch-env"
    verdict = fails("packages.numpy", ">=2", facts)
    assert verdict.actual is None
    assert verdict.reason == "no package snapshot was taken and no probe reported packages.numpy"


def test_a_snapshot_whose_keys_are_not_normalized() -> None:
    facts = Facts({}, {"Typing_Extensions": {"name": "Typing_Extensions", "version": "4.16.0"}})
    passes("packages.typing-extensions", "4.16.0", facts)


# --- resolving keys ------------------------------------------------------------------------


def test_unavailable_field_fails_with_its_reason() -> None:
    verdict = fails("nccl", ">=2.28", cpu())
    assert verdict.reason == f"nccl cannot be read: {CPU_REASON}"
    assert verdict.actual == {"unavailable": CPU_REASON}
    assert verdict.source == "torch-env"
    # Anything under an unavailable field cannot be read either.
    verdict = fails("nvml.devices.0.name", "NVIDIA*", cpu())
    assert verdict.reason == f"nvml.devices.0.name cannot be read: {NVML_REASON}"
    # Even an expectation the marker would match as text.
    fails("torch.arch_list", "*", cpu())


def test_a_readable_value_wins_over_an_unavailable_one() -> None:
    facts = Facts({"torch-env": CPU, "nccl-tests": {"nccl": "2.28.9"}})
    verdict = passes("nccl", ">=2.28", facts)
    assert verdict.source == "nccl-tests"


def test_the_first_probe_that_has_the_key_wins() -> None:
    facts = Facts({"torch-env": H200, "old-env": {"nccl": "2.27.3", "gpu_count": 8}})
    passes("nccl", "2.28.9", facts)
    assert passes("gpu_count", 1, facts).source == "torch-env"


def test_missing_key_names_close_matches() -> None:
    verdict = fails("torch.verison", "*+cu130", h200())
    assert verdict.actual is None
    assert verdict.reason is not None
    assert verdict.reason.startswith("no probe reported torch.verison; close matches: ")
    assert "torch.version" in verdict.reason
    verdict = fails("gpu_cont", 1, h200())
    assert "gpu_count" in (verdict.reason or "")
    assert fails("zzz.qqq", 1, h200()).reason == "no probe reported zzz.qqq"
    assert fails("nccl", ">=2.28", Facts()).reason == "no probe reported nccl (no probe ran)"


def test_explicit_probe_prefix() -> None:
    facts = Facts({"torch-env": H200, "old-env": {"nccl": "2.27.3"}})
    verdict = passes("old-env:nccl", "<2.28", facts)
    assert verdict.source == "old-env"
    fails("nccl", "<2.28", facts)
    passes("torch-env:torch.version", "==2.11.0", facts)
    verdict = fails("smi:driver", ">=580", facts)
    assert verdict.reason == "probe smi did not run here (probes run: torch-env, old-env)"
    verdict = fails("old-env:gpu_count", 1, facts)
    assert verdict.reason == "probe old-env did not report gpu_count"
    verdict = fails("torch-env:torch.cudaa", "13.0", facts)
    assert verdict.reason is not None
    assert verdict.reason.startswith("probe torch-env did not report torch.cudaa; close matches:")
    verdict = fails("torch-env:nccl", ">=2.28", Facts({"torch-env": CPU}))
    assert verdict.reason == f"torch-env:nccl cannot be read: {CPU_REASON}"


def test_list_indexing() -> None:
    passes("torch.devices.0.name", "NVIDIA H200", h200())
    passes("nvml.devices.0.uuid", "GPU-*", h200())
    passes("system_nccl.libraries.0.version", "==2.28.3", h200())
    verdict = fails("torch.devices.1.name", "NVIDIA H200", h200())  # a one-GPU host
    assert (verdict.reason or "").startswith("no probe reported torch.devices.1.name")
    fails("torch.devices.first.name", "NVIDIA H200", h200())


def test_a_dict_key_holding_dots() -> None:
    facts = Facts({"ldconfig": {"libs": {"libnccl.so.2": "2.28.9", "libnccl": {"so": "x"}}}})
    passes("libs.libnccl.so.2", "2.28.9", facts)
    passes("libs.libnccl.so", "x", facts)


def test_resolve_reports_value_and_source() -> None:
    actual = resolve("torch.cuda", h200())
    assert (actual.value, actual.source, actual.found) == ("13.0", "torch-env", True)
    actual = resolve("torch.devices", h200())
    assert actual.value == H200["torch"]["devices"]
    actual = resolve("nccl", cpu())
    assert not actual.found
    assert actual.problem == f"nccl cannot be read: {CPU_REASON}"


def test_a_subtree_fails_with_its_json_shown() -> None:
    verdict = fails("nvcc", "13.0", h200())
    assert verdict.actual == H200["nvcc"]
    assert (verdict.reason or "").startswith('nvcc is {"path": "/usr/local/cuda/bin/nvcc"')


# --- whole tables --------------------------------------------------------------------------


def test_check_all_keeps_the_tables_order() -> None:
    expect = {**DESIGN_EXPECT, "packages.nvidia-nccl-cu13": ">=2.28", "gpu_count": 1}
    verdicts = check_all(expect, nightly())
    assert [v.key for v in verdicts] == list(expect)
    assert all(v.ok for v in verdicts)
    verdicts = check_all(expect, h200())
    assert [v.ok for v in verdicts] == [True, True, True, True, True]
    verdicts = check_all({**expect, "torch.version": "*+cu128"}, h200())
    assert [v.ok for v in verdicts] == [False, True, True, True, True]
    verdicts = check_all(DESIGN_EXPECT, cpu())
    assert [v.reason for v in verdicts] == [
        "torch.version is 2.13.0+cpu, expected *+cu130",
        "torch.cuda is null, expected 13.0",
        f"nccl cannot be read: {CPU_REASON}",
    ]


def test_verdicts_are_json_able() -> None:
    verdicts = check_all({**DESIGN_EXPECT, "torch.devices": "*"}, cpu())
    assert json.loads(json.dumps([asdict(v) for v in verdicts]))[2]["actual"] == {
        "unavailable": CPU_REASON
    }


def test_check_all_raises_on_a_bad_spec_before_checking_anything() -> None:
    with pytest.raises(BadSpec, match="nccl"):
        check_all({"torch.cuda": "13.0", "nccl": ">>2"}, h200())


# --- bad expectations ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "message"),
    [
        (">>2", "'>' is followed by '>2', which is not a version"),
        ("=>2.28", "did you mean '>='?"),
        ("=<2.28", "did you mean '<='?"),
        ("=2.28", "did you mean '=='?"),
        (">=banana", "'banana' is not a version"),
        (">=", "'>=' is not followed by a version"),
        (">=2.28,", "empty part between its commas"),
        (">=2.28,,<3", "empty part between its commas"),
        ("2.28,<2.30", "'2.28' in '2.28,<2.30' has no comparison operator"),
        ("~=2", "'~=' needs a version of two parts or more, like ~=2.4 (>=2.4,<3)"),
        (">=2.4.*", "a wildcard ('2.4.*') goes only with == or !="),
        ("~=2.4.*", "a wildcard ('2.4.*') goes only with == or !="),
        ("==2.4.*+cu130", "'2.4.*+cu130' is not a version"),
        ("~=2.10+cu130", "a local variant (+cu130) goes only with == or !="),
        (">=2.10+cu130", "a local variant (+cu130) goes only with == or !="),
        (" 13.0", "has spaces around it"),
        ([], "an empty list"),
        ([["13.0"]], "a list inside a list"),
        (["13.0", ">>2"], "not a version"),
        ({"min": "2.28"}, "a table is not an expectation"),
        (datetime.date(2026, 2, 26), "a date or time"),
        (float("nan"), "not a value a probe can report"),
        (None, "None is not an expectation"),
    ],
)
def test_bad_expectations_raise_bad_spec(expected: object, message: str) -> None:
    with pytest.raises(BadSpec) as raised:
        check("nccl", expected, h200())
    assert str(raised.value).startswith("nccl: ")
    assert message in str(raised.value)
    assert raised.value.key == "nccl"
    assert isinstance(raised.value, BadInput)  # exit status 2, like every bad input


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "needs a key"),
        ("packages", "packages.NAME needs a distribution name"),
        ("packages.", "packages.NAME needs a distribution name"),
        (":nccl", "nothing before ':'"),
        ("torch-env:", "nothing after 'torch-env:'"),
        ("torch..version", "empty part between its dots"),
        ("torch.version.", "empty part between its dots"),
        (" nccl", "spaces around it"),
    ],
)
def test_bad_keys_raise_bad_spec(key: str, message: str) -> None:
    with pytest.raises(BadSpec, match=message):
        check(key, "1", h200())


def test_good_expectations_parse_to_their_kinds() -> None:
    kinds = {
        "*+cu130": "glob",
        "13.0": "exact",
        "": "exact",
        ">=2.28": "compare",
        ">=2.28,<2.30": "compare",
    }
    for text, kind in kinds.items():
        assert Spec.parse(text).kind == kind
    assert Spec.parse(8).kind == Spec.parse(True).kind == "value"
    spec = Spec.parse(["13.0", ">=13.1"])
    assert spec.kind == "one_of"
    assert [option.kind for option in spec.options] == ["exact", "compare"]
    assert [str(clause) for clause in Spec.parse(">= 2.28 , <2.30").clauses] == [">=2.28", "<2.30"]


def test_an_empty_string_expects_empty_text() -> None:
    facts = Facts({"env": {"CUDA_VISIBLE_DEVICES": ""}})
    passes("CUDA_VISIBLE_DEVICES", "", facts)
    fails("env:CUDA_VISIBLE_DEVICES", "", Facts({"env": {"CUDA_VISIBLE_DEVICES": "0"}}))


# --- validate ------------------------------------------------------------------------------


def test_validate_returns_the_parsed_table() -> None:
    specs = validate({**DESIGN_EXPECT, "gpu_count": 8}, "steps.install-torch.expect")
    assert list(specs) == [*DESIGN_EXPECT, "gpu_count"]
    assert [spec.kind for spec in specs.values()] == ["glob", "exact", "compare", "value"]
    assert validate({}, "steps.x.expect") == {}


def test_validate_names_where_and_key() -> None:
    with pytest.raises(BadInput) as raised:
        validate({"torch.cuda": "13.0", "nccl": ">>2"}, "steps.install-torch.expect")
    assert not isinstance(raised.value, BadSpec)
    assert str(raised.value) == (
        "steps.install-torch.expect.nccl: '>>2': '>' is followed by '>2', which is not a version"
    )
    with pytest.raises(BadInput, match=r"^probes.smi.expect.torch..version: .*empty part"):
        validate({"torch..version": "1"}, "probes.smi.expect")
    with pytest.raises(BadInput, match=r"^steps.x.expect.gpu_count: an empty list"):
        validate({"gpu_count": []}, "steps.x.expect")


def test_validate_refuses_what_is_not_a_table() -> None:
    with pytest.raises(BadInput, match=r"^steps.x.expect: expect must be a table"):
        validate(["nccl", ">=2.28"], "steps.x.expect")
