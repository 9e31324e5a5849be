"""Findings that follow the evidence: one cpu-torch per fact and host, said only where CUDA is
wanted; numpy-abi flips back and rollbacks (issue: judgement a reviewer can trust).

Runs are built as the journal's projection gives them (tests/test_lifecycle.py's builders);
the same cases recorded for real, through pip and a real CPU torch, are in
tests/test_real_envs.py.
"""

from __future__ import annotations

from tests.test_lifecycle import h200_env, of, run, snap, states

FREEZE = "torch==2.13.0+cpu\nnumpy==2.2.6\n"
PRINT = "2.13.0+cpu None\n"


def _cpu_env(gpus: bool) -> dict:
    env = h200_env()
    env["torch"].update(version="2.13.0+cpu", cuda=None, devices=[], device_count=0)
    if not gpus:
        env["nvml"] = {"devices": [], "driver": None}
    return env


def test_one_cpu_build_seen_three_ways_on_a_gpu_host_is_one_finding() -> None:
    probe = run("verify", event=10, env=_cpu_env(gpus=True))
    freeze = run("freeze", "python -m pip freeze", event=20, output=FREEZE)
    look = run(
        "look",
        "python -c 'import torch; print(torch.__version__, torch.version.cuda)'",
        event=30,
        output=PRINT,
    )
    (one,) = of(states(probe, freeze, look), "cpu-torch")
    assert one.severity == "error" and one.run == "verify"
    texts = [e.text for e in one.evidence]
    assert any("torch-env probe" in t for t in texts)
    assert any("torch==2.13.0+cpu" in t for t in texts) and PRINT.strip() in texts


def test_no_cpu_torch_without_a_gpu_or_cuda_asked_and_none_where_cpu_was_asked() -> None:
    probe = run("verify", event=10, env=_cpu_env(gpus=False))
    freeze = run("freeze", "python -m pip freeze", event=20, output=FREEZE)
    assert of(states(probe, freeze), "cpu-torch") == []
    cpu = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    asked = run("install", cpu, snap(torch="2.12.0+cu130"), snap(torch="2.13.0+cpu"), event=5)
    on_gpus = run("verify", event=10, env=_cpu_env(gpus=True))
    assert of(states(asked, on_gpus), "cpu-torch") == []


def test_cuda_asked_on_a_host_with_no_gpu_never_advises_a_cuda_wheel() -> None:
    cu = "pip install torch --index-url https://download.pytorch.org/whl/cu130"
    asked = run("install", cu, event=5)
    probe = run("verify", event=10, env=_cpu_env(gpus=False))
    (one,) = of(states(asked, probe), "cpu-torch")
    assert one.severity == "warning" and "no GPU in sight" in one.title
    assert "/whl/cu" not in one.advice and "/whl/cpu" in one.advice


def test_a_new_cpu_build_after_a_cuda_one_is_a_new_finding() -> None:
    first = run("verify", event=10, env=_cpu_env(gpus=True))
    fixed = run("verify-cuda", event=20, env=h200_env())
    again = run("verify-again", event=30, env=_cpu_env(gpus=True))
    found = of(states(first, fixed, again), "cpu-torch")
    assert [(f.run, f.state) for f in found] == [("verify", "resolved"), ("verify-again", "open")]


def test_numpy_put_back_by_hand_is_no_new_numpy_abi_and_resolves_the_first() -> None:
    two, one = snap(numpy="2.4.6", torch="2.13.0+cpu"), snap(numpy="1.26.4", torch="2.13.0+cpu")
    down = run("pin-old-numpy", "pip install numpy==1.26.4", two, one, event=10)
    back = run("pin-new-numpy", "pip install numpy==2.4.6", one, two, event=20)
    found = of(states(down, back), "numpy-abi")
    assert [(f.run, f.state) for f in found] == [("pin-old-numpy", "resolved")]
    assert "numpy 2.4.6, the major it had before" in found[0].resolved_by.why


def test_a_flip_back_after_other_installs_is_a_new_numpy_abi() -> None:
    two, one = snap(numpy="2.4.6"), snap(numpy="1.26.4")
    cv = snap(numpy="1.26.4", **{"opencv-python": "4.8.0.76"})
    down = run("pin-old-numpy", "pip install numpy==1.26.4", two, one, event=10)
    opencv = run("opencv", "pip install opencv-python==4.8.0.76", one, cv, event=20)
    back = run("numpy-2", "pip install numpy==2.4.6", cv, {**cv, **two}, event=30)
    found = of(states(down, opencv, back), "numpy-abi")
    assert [f.run for f in found] == ["pin-old-numpy", "numpy-2"]
    assert found[1].state == "open"


def test_a_rerun_of_the_flipping_step_does_not_resolve_the_flip() -> None:
    two, one = snap(numpy="2.4.6"), snap(numpy="1.26.4")
    down = run("pin-old-numpy", "pip install numpy==1.26.4", two, one, event=10)
    same = run("again", "pip install numpy==1.26.4", one, one, event=20, step="pin-old-numpy")
    (found,) = of(states(down, same), "numpy-abi")
    assert found.state == "open"


def test_an_import_check_that_complained_resolves_nothing() -> None:
    two, one = snap(numpy="2.4.6"), snap(numpy="1.26.4")
    down = run("pin-old-numpy", "pip install numpy==1.26.4", two, one, event=10)
    warned = run(
        "verify",
        "python -c 'import torch, numpy; torch.from_numpy(numpy.zeros(1))'",
        event=20,
        output="UserWarning: Failed to initialize NumPy: _ARRAY_API not found\n",
    )
    found = of(states(down, warned), "numpy-abi")
    assert found[0].state == "open"


def _rollback(target_run: str, phase: str, before: dict, after: dict, *, event: int, seq: int):
    back = run(
        "rollback",
        "pip install --no-deps --force-reinstall numpy==2.4.6",
        before,
        after,
        event=event,
        step="rollback",
    )
    packages = {k: v["version"] for k, v in after.items()}  # reached unless a test says not
    back.rollback = {
        "to": f"{phase}:x",
        "run": target_run,
        "phase": phase,
        "event": seq,
        "packages": packages,
    }
    return back


def test_a_rollback_resolves_what_its_target_run_caused_and_only_that() -> None:
    two, one = snap(numpy="2.4.6", scipy="1.15.3"), snap(numpy="1.26.4", scipy="1.15.3")
    down = run("pin-old-numpy", "uv pip install numpy==1.26.4", two, one, event=10)
    to_after = _rollback("pin-old-numpy", "after", two, one, event=20, seq=10)
    (found,) = of(states(down, to_after), "numpy-abi")
    assert found.state == "open"  # back to the set after the flip: nothing undone
    to_before = _rollback("pin-old-numpy", "before", one, two, event=20, seq=10)
    found = of(states(down, to_before), "numpy-abi")
    assert [(f.run, f.state) for f in found] == [("pin-old-numpy", "resolved")]
    unreached = _rollback("pin-old-numpy", "before", one, one, event=20, seq=10)
    unreached.rollback["packages"] = {"numpy": "2.4.6", "scipy": "1.15.3"}
    assert of(states(down, unreached), "numpy-abi")[0].state == "open"
