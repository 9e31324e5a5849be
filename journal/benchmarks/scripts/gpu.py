"""Built-in GPU benchmarks, run by the target env's python with torch: ``matmul`` (bf16
TFLOP/s), ``memcpy`` (device-to-device GB/s, bytes read plus written) and ``allreduce`` (NCCL
bus bandwidth through torch.distributed over every GPU of the host, one process per GPU).

Prints one JSON object per figure: ``{"metric", "value", "unit", "labels"}``. Timed with CUDA
events after warm-up, median of the repeats, on random data (never zeros). A benchmark the host
cannot run (``allreduce`` on one GPU; no GPU at all) prints ``"value": null`` and why in
``"skipped"``; an env that cannot run it on a host that could (torch does not import, or sees
none of the host's GPUs) says why in ``"error"``: the run then failed, it was not skipped.
"""

import json
import os
import statistics
import sys


def _emit(metric, value, unit, **labels):
    print(json.dumps({"metric": metric, "value": round(value, 3), "unit": unit, "labels": labels}))
    sys.stdout.flush()


def _time(fn, repeats, warmup=3):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return statistics.median(times)


def matmul(size=8192, repeats=10):
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    seconds = _time(lambda: torch.mm(a, b), repeats)
    name = torch.cuda.get_device_name(0)
    _emit("matmul_bf16", 2 * size**3 / seconds / 1e12, "TFLOP/s", size=str(size), gpu=name)


def memcpy(mib=4096, repeats=10):
    import torch

    src = torch.randn(mib * (1 << 20) // 4, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    seconds = _time(lambda: dst.copy_(src), repeats)
    moved = 2 * src.numel() * src.element_size()  # read once, written once
    name = torch.cuda.get_device_name(0)
    _emit("memcpy_d2d", moved / seconds / 1e9, "GB/s", mib=str(mib), gpu=name)


def _allreduce_worker(rank, world, mib, repeats, port):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    data = torch.randn(mib * (1 << 20) // 4, device="cuda", dtype=torch.float32)
    seconds = _time(lambda: dist.all_reduce(data), repeats)
    # nccl-tests' bus bandwidth for all-reduce: algbw * 2 (n - 1) / n
    size = data.numel() * data.element_size()
    busbw = size / seconds / 1e9 * 2 * (world - 1) / world
    check = torch.ones(1, device="cuda")
    dist.all_reduce(check)
    if rank == 0:
        assert int(check.item()) == world, "all-reduce gave a wrong sum"
        import torch.cuda.nccl as nccl

        _emit(
            "allreduce_busbw",
            busbw,
            "GB/s",
            mib=str(mib),
            gpus=str(world),
            nccl=".".join(map(str, nccl.version())),
        )
    dist.destroy_process_group()


def allreduce(mib=1024, repeats=20):
    import socket

    import torch
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    if world < 2:
        _skip("allreduce", f"needs 2 or more GPUs, found {world}")
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_allreduce_worker, args=(world, mib, repeats, port), nprocs=world)


METRICS = {"matmul": "matmul_bf16", "memcpy": "memcpy_d2d", "allreduce": "allreduce_busbw"}


def _skip(name, why):
    """The host cannot run this benchmark (too few GPUs, none): the run is skipped, not failed."""
    print(json.dumps({"metric": METRICS[name], "value": None, "labels": {}, "skipped": why}))


def _error(name, why):
    """The env is broken (torch does not import): the run failed, whatever the host has."""
    print(json.dumps({"metric": METRICS[name], "value": None, "labels": {}, "error": why}))


if __name__ == "__main__":
    which = sys.argv[1]
    try:
        import torch
    except ImportError as exc:
        _error(which, f"torch cannot be imported by {sys.executable}: {exc}")
        sys.exit(0)
    if not torch.cuda.is_available():
        import glob

        devices = sorted(glob.glob("/dev/nvidia[0-9]*"))
        if devices:  # the host has GPUs its env cannot use: a CPU build of torch, say
            _error(
                which,
                f"torch {torch.__version__} sees no CUDA device, but the host has "
                f"{len(devices)} NVIDIA GPU(s) ({devices[0]}): a CPU build of torch, a "
                "driver it cannot use, or CUDA_VISIBLE_DEVICES hiding them",
            )
            sys.exit(0)
        why = f"no CUDA device: torch {torch.__version__} sees none"
        if which == "allreduce":
            why = f"needs 2 or more GPUs, found 0; torch {torch.__version__} sees no CUDA device"
        _skip(which, why)
        sys.exit(0)
    {"matmul": matmul, "memcpy": memcpy, "allreduce": allreduce}[which]()
