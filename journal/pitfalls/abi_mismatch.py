"""A compiled extension does not load: built against another torch (`undefined symbol`, or the
extension's own words).

Extensions with CUDA kernels — sgl-kernel's `common_ops`, flash-attn's `flash_attn_2_cuda`,
vLLM's `_C`, torchvision's `_C`, xFormers, DeepEP, apex — link against the C++ symbols of the
exact torch they were built with. torch has no stable C++ ABI: after torch is upgraded (or
swapped for a nightly) an extension built for the old one fails at import with
`ImportError: …/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEa`
(a mangled `c10::`, `at::` or `torch::` name). Every import of the package fails, and with it
the server that needs it. A missing `cu…` symbol (`cuGreenCtxStreamCreate`) is the same failure
against the CUDA driver instead: the extension needs a newer driver than the host has.

The same line reads wherever it is printed: a bare `ImportError`, sgl-kernel's `[sgl_kernel]
CRITICAL: Could not load any common_ops library!` report (under `Error details from previous
import attempts:`), vLLM's `WARNING … Failed to import from vllm._C with ImportError('…/_C.abi3.so:
undefined symbol: …')`. Some extensions say it in their own words instead, and these count too:
xFormers' `xFormers can't load C++/CUDA extensions. xFormers was built for: PyTorch 2.6.0+cu124
with CUDA 1204 (you have 2.5.1+cu121)` (a warning: xFormers goes on without its kernels; the
same torch on both sides is another failure, not this one), torchvision's and PyG's (torch_scatter,
torch_sparse, …) `Detected that PyTorch and torchvision were compiled with different CUDA
versions. PyTorch has CUDA Version=11.7 and torchvision has CUDA Version=11.8`, and torchvision's
`Couldn't load custom C++ ops` / `operator torchvision::nms does not exist`. One finding per
package and command.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.reading.subject import Evidence, Run, Subject
from journal.versions import public_version

#: What a reader says: (package, severity, title, advice, evidence).
Said = tuple[str, str, str, str, list[Evidence]]

ID = "abi-mismatch"
ORDER = 35

UNDEFINED = re.compile(
    r"(?<![^\s'\"():])(?P<path>[^\s'\"():]*\.so(?:\.[\w.]+)?): undefined symbol: "
    r"(?P<symbol>[\w@$.]+)"
)
#: Namespaces of torch's C++ API in a mangled name: c10::, at::, torch::, caffe2::.
TORCH_SYMBOL = re.compile(r"^_Z\w*?(?:3c10|2at|5torch|6caffe2)")
DRIVER_SYMBOL = re.compile(r"^cu[A-Z]\w+")
#: xFormers' refusal (xformers/_cpp_lib.py `xFormersInvalidLibException`): the torch its
#: kernels were built for, their CUDA (``1204`` is 12.4), and the torch of this env.
XFORMERS = re.compile(
    r"xFormers was built for:[ \t]*\r?\n[ \t]*PyTorch (?P<built>[^\s()]+) with CUDA "
    r"(?P<cuda>\w+) \(you have (?P<have>[^\s()]+)\)"
)
XFORMERS_UNKNOWN = re.compile(r"xFormers was built for a different version of PyTorch or Python")
#: torchvision's `_check_cuda_version` and PyG's (torch_scatter, torch_sparse, torch_cluster,
#: torch_spline_conv) check at import, as printed (a traceback may wrap it).
CUDA_DIFFERS = re.compile(
    r"Detected that PyTorch and (?P<pkg>[A-Za-z][\w.-]{0,40}) were compiled with different"
    r"\s{1,4}CUDA\s{1,4}(?:major\s{1,4})?versions\.\s{1,4}PyTorch\s{1,4}has\s{1,4}CUDA\s{1,4}"
    r"[Vv]ersion\s?[= ]\s?(?P<torch>\d+(?:\.\d+)*)\s{1,4}and\s{1,4}[\w.-]{1,40}\s{1,4}has"
    r"\s{1,4}CUDA\s{1,4}[Vv]ersion\s?[= ]\s?(?P<ext>\d+(?:\.\d+)*)"
)
#: torchvision's words when its `_C` does not load (the raise in `torchvision/extension.py`,
#: not a quoted source line), or when its operators were never registered.
TORCHVISION_OPS = re.compile(
    r"^[ \t]*(?:RuntimeError: )?Couldn't load custom C\+\+ ops\.\s{1,4}This can happen if your "
    r"PyTorch and torchvision versions are incompatible"
    r"|operator torchvision::(?P<op>\w+) does not exist",
    re.M,
)


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


def _cuda(number: str) -> str:
    """xFormers' ``1204`` as ``12.4`` (``None`` for a build without CUDA stays as it is)."""
    if number.isdigit() and len(number) in (3, 4):
        return f"{int(number) // 100}.{int(number) % 100}"
    return number


def _undefined(subject: Subject, run: Run) -> Iterator[Said]:
    found = run.grep(UNDEFINED, "undefined symbol", limit=3)
    if not found:
        return
    match, _line = found[0]
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
    yield package.lower(), "error", title, advice, [e for _, e in found]


def _xformers(run: Run) -> Iterator[Said]:
    """xFormers naming the torch it was built for, when that is not the torch here."""
    for match, line in run.grep(XFORMERS, "xFormers was built for", limit=5):
        built, have = match.group("built"), match.group("have")
        if built == have:
            continue  # the same torch: the kernels failed to load for another reason
        cuda = _cuda(match.group("cuda"))
        wheel = " (a CPU build)" if have.endswith("+cpu") else ""
        versions = run.line_at(match.start("built"))
        if wheel:
            advice = (
                "xformers has no kernels for a CPU build of torch: on a host with GPUs put "
                f"back the CUDA torch it was built for (torch {built}); on one without, "
                "uninstall xformers or leave it unused (it runs without its kernels)"
            )
        else:
            advice = (
                f"install the xformers release built for torch {have} (each xformers release "
                "is built for one torch, from the index of torch's CUDA variant: `pip install "
                f"xformers==<release for {public_version(have)}> --index-url "
                "https://download.pytorch.org/whl/<torch's cuXXX>`), or put back torch "
                f"{built}, which it was built for"
            )
        yield (
            "xformers",
            "warning",
            f"`xformers` was built for torch {built} (CUDA {cuda}) and this env has torch "
            f"{have}{wheel}: its C++/CUDA kernels do not load, and it runs without them",
            advice,
            _unique([line, versions]),
        )
        return
    for _match, line in run.grep(XFORMERS_UNKNOWN, "xFormers was built for", limit=1):
        yield (
            "xformers",
            "warning",
            "`xformers` was built for another torch (or Python): its C++/CUDA kernels do not "
            "load, and it runs without them",
            "install the xformers release built for the torch of this env, from the index "
            "of torch's CUDA variant, or put back the torch it was built for",
            [line],
        )


def _cuda_differs(run: Run) -> Iterator[Said]:
    for match, line in run.grep(CUDA_DIFFERS, "compiled with different", limit=5):
        package, torch, ext = match.group("pkg"), match.group("torch"), match.group("ext")
        yield (
            package.lower(),
            "error",
            f"`{package}` was built for CUDA {ext} and torch for CUDA {torch}: `{package}` "
            "refuses to load",
            f"install the `{package}` build for torch's CUDA {torch} (the same index or wheel "
            f"page as torch, e.g. `…/whl/cu{torch.replace('.', '')}`, and the `{package}` "
            f"release paired with this torch), or install torch and `{package}` together "
            "from one index",
            [line],
        )


def _torchvision_ops(run: Run) -> Iterator[Said]:
    for match, line in run.grep(TORCHVISION_OPS, "torchvision", limit=1):
        what = (
            f"its operator `torchvision::{match.group('op')}` was never registered"
            if match.group("op")
            else "its C++ ops do not load"
        )
        yield (
            "torchvision",
            "error",
            f"`torchvision` was built for another torch: {what}",
            "install the torchvision release paired with this torch, from the same index "
            "(CUDA variant) as torch (`pip install torch==X torchvision==Y --index-url "
            "https://download.pytorch.org/whl/<cuXXX>`), or put back the torch it was built "
            "for",
            [line],
        )


def _unique(evidence: list[Evidence]) -> list[Evidence]:
    seen, kept = set(), []
    for item in evidence:
        if (item.line, item.text) not in seen:
            seen.add((item.line, item.text))
            kept.append(item)
    return kept


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        said: set[str] = set()
        for readers in (
            _undefined(subject, run),
            _xformers(run),
            _cuda_differs(run),
            _torchvision_ops(run),
        ):
            for package, severity, title, advice, evidence in readers:
                if package not in said:
                    said.add(package)
                    yield finding(ID, severity, title, advice, evidence, run)
