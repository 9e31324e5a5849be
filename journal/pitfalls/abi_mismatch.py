"""A compiled extension does not load: `undefined symbol` (built against another torch).

Extensions with CUDA kernels — sgl-kernel's `common_ops`, flash-attn's `flash_attn_2_cuda`,
vLLM's `_C`, torchvision's `_C`, DeepEP, apex — link against the C++ symbols of the exact torch
they were built with. torch has no stable C++ ABI: after torch is upgraded (or swapped for a
nightly) an extension built for the old one fails at import with
`ImportError: …/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEa`
(a mangled `c10::`, `at::` or `torch::` name). Every import of the package fails, and with it
the server that needs it. A missing `cu…` symbol (`cuGreenCtxStreamCreate`) is the same failure
against the CUDA driver instead: the extension needs a newer driver than the host has.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import _runtime as rt
from journal.pitfalls.base import Finding, Subject, finding

ID = "abi-mismatch"
ORDER = 35

UNDEFINED = re.compile(
    r"(?<![^\s'\"():])(?P<path>[^\s'\"():]*\.so(?:\.[\w.]+)?): undefined symbol: "
    r"(?P<symbol>[\w@$.]+)"
)
#: Namespaces of torch's C++ API in a mangled name: c10::, at::, torch::, caffe2::.
TORCH_SYMBOL = re.compile(r"^_Z\w*?(?:3c10|2at|5torch|6caffe2)")
DRIVER_SYMBOL = re.compile(r"^cu[A-Z]\w+")


def _package(path: str) -> str:
    package = rt.site_package(path)
    if package:
        return package
    return path.rsplit("/", 1)[-1].split(".", 1)[0] or path


def _torch_version(subject: Subject, run_host: str) -> str | None:
    for run in subject.runs:
        if run.host == run_host:
            probed = rt.torch_env(run)
            if probed and rt.torch_version(probed[0]):
                return rt.torch_version(probed[0])
    return None


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        found = run.grep(UNDEFINED, "undefined symbol", limit=3)
        if not found:
            continue
        match, line = found[0]
        path, symbol = match.group("path"), match.group("symbol")
        package = _package(path)
        torch = _torch_version(subject, run.host)
        if TORCH_SYMBOL.match(symbol):
            against = f"torch {torch}" if torch else "the installed torch"
            title = (
                f"`{package}` was built against another torch: `{path.rsplit('/', 1)[-1]}` "
                f"misses the torch C++ symbol `{symbol}`"
            )
            advice = (
                f"install the `{package}` build made for {against} (same torch version and "
                f"CUDA variant; for sgl-kernel and flash-attn the wheel names both), or rebuild "
                f"it against this torch (`pip install --no-build-isolation --force-reinstall "
                f"--no-binary :all: {package.replace('_', '-')}`); if torch moved by accident, "
                "put back the torch the extension was built for"
            )
        elif DRIVER_SYMBOL.match(symbol):
            title = (
                f"`{package}` needs the CUDA driver function `{symbol}`, which this host's "
                "driver does not have"
            )
            advice = (
                f"upgrade the NVIDIA driver to one for the CUDA `{package}` was built with, "
                f"or install the `{package}` build for the CUDA that `nvidia-smi` shows"
            )
        else:
            title = f"`{package}` does not load: `{path.rsplit('/', 1)[-1]}` misses `{symbol}`"
            advice = (
                f"reinstall `{package}` built for the libraries installed now (torch, CUDA, "
                "the C++ ABI), or rebuild it from source in this env"
            )
        yield finding(ID, "error", title, advice, [e for _, e in found], run)
