"""Stand-in wheels and package indexes for journal's offline demo.

The demo re-enacts a real GPU-server upgrade (a CUDA 12.8 torch stack replaced
by a CUDA 13.0 nightly) on a machine without a GPU or network, using the real
``uv`` installer.  For that it needs something for ``uv`` to install: this
module writes tiny pure-Python wheels that import like torch, torchvision,
torchaudio, numpy, pillow and nvidia-nccl-cu13 as far as the demo's probes
look (versions, CUDA version, NCCL version, device count), and serves them
through two PEP 503 "simple" indexes on disk that ``uv`` accepts as
``--index-url file:///.../simple``.

Everything is written deterministically, and a file is only rewritten when its
bytes would change, so building again is cheap and leaves existing files (and
their modification times) alone.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from journal.versions import canonical_name

__all__ = ["INDEX_NAMES", "StandIn", "build_indexes", "build_wheel", "index_packages"]

#: Names of the two indexes :func:`build_indexes` writes, oldest stack first.
INDEX_NAMES: tuple[str, str] = ("cu128", "cu130")

#: Value every stand-in module exposes as ``JOURNAL_STAND_IN``, so probes and
#: people can tell the demo's packages from real ones.
_MARKER_LINE = "JOURNAL_STAND_IN = True\n"

#: Fixed timestamp for zip entries, so that equal content gives equal bytes.
_ZIP_EPOCH: tuple[int, int, int, int, int, int] = (1980, 1, 1, 0, 0, 0)

_SUMMARY = "Stand-in for {name} built by journal's demo; it is not the real package."


@dataclass(frozen=True)
class StandIn:
    """One stand-in distribution: its metadata and the files it installs.

    ``files`` maps paths inside the wheel (relative to site-packages) to their
    text; the ``.dist-info`` directory is added by :func:`build_wheel`.
    """

    name: str
    version: str
    requires: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)

    @property
    def wheel_stem(self) -> str:
        """The distribution name as it appears in wheel and dist-info names (PEP 427)."""
        return canonical_name(self.name).replace("-", "_")

    @property
    def filename(self) -> str:
        """The wheel's file name (PEP 427), e.g. ``torch-2.10.0+cu128-py3-none-any.whl``."""
        return f"{self.wheel_stem}-{self.version}-py3-none-any.whl"

    @property
    def dist_info(self) -> str:
        """The wheel's ``.dist-info`` directory name."""
        return f"{self.wheel_stem}-{self.version}.dist-info"

    @property
    def project(self) -> str:
        """The PEP 503 normalized project name, used as the index directory name."""
        return normalize(self.name)


#: The PEP 503 normalized form of a project name.
normalize = canonical_name


def _module(doc: str, body: str = "") -> str:
    """Source text of a stand-in module: docstring, marker, then ``body``."""
    return f'"""{doc}"""\n\n{_MARKER_LINE}{body}'


def _simple_module(dist: str, version: str) -> str:
    """Source of a top-level module that only answers ``__version__`` and the marker."""
    return _module(
        f"Stand-in for {dist} built by journal's demo; only __version__ is real.",
        f"__version__ = {version!r}\n",
    )


def _torch(
    version: str, cuda: str, nccl: tuple[int, int, int], requires: tuple[str, ...]
) -> StandIn:
    """The torch stand-in: answers version, CUDA version, NCCL version and (absent) devices."""
    files = {
        "torch/__init__.py": _module(
            "Stand-in for torch built by journal's demo; no tensors, only what probes read.",
            "\nfrom torch import cuda, version\nfrom torch.version import __version__\n",
        ),
        "torch/version.py": _module(
            "Build facts of the torch stand-in, shaped like torch.version.",
            f"__version__ = {version!r}\ncuda = {cuda!r}\n"
            "hip = None\ngit_version = 'journal-demo'\n",
        ),
        "torch/cuda/__init__.py": _module(
            "CUDA queries of the torch stand-in: the demo machine has no GPU.",
            "\nfrom torch.cuda import nccl\n\n\n"
            "def is_available() -> bool:\n"
            '    """Whether a CUDA device can be used: never, on the demo machine."""\n'
            "    return False\n\n\n"
            "def device_count() -> int:\n"
            '    """Number of CUDA devices visible: none, on the demo machine."""\n'
            "    return 0\n",
        ),
        "torch/cuda/nccl.py": _module(
            "NCCL query of the torch stand-in, shaped like torch.cuda.nccl.",
            "\n\ndef version() -> tuple[int, int, int]:\n"
            '    """The NCCL version this torch was built against, as (major, minor, patch)."""\n'
            f"    return {nccl!r}\n",
        ),
    }
    return StandIn("torch", version, requires, files)


def _plain(name: str, module: str, version: str, requires: tuple[str, ...] = ()) -> StandIn:
    """A stand-in whose only module ``module`` (a dotted name) has ``__version__``."""
    path = module.replace(".", "/") + "/__init__.py"
    return StandIn(name, version, requires, {path: _simple_module(name, version)})


def index_packages() -> dict[str, list[StandIn]]:
    """The stand-in distributions of each index, keyed by index name.

    ``cu128`` is the old, released stack; ``cu130`` the nightly that pins older
    numpy and pillow and brings NCCL as a separate wheel.
    """
    old_torch = "2.10.0+cu128"
    new_torch = "2.12.0.dev20260226+cu130"
    return {
        "cu128": [
            _torch(old_torch, "12.8", (2, 22, 3), ()),
            _plain(
                "torchvision",
                "torchvision",
                "0.25.0+cu128",
                (f"torch=={old_torch}", "numpy", "pillow"),
            ),
            _plain("torchaudio", "torchaudio", "2.10.0+cu128", (f"torch=={old_torch}",)),
            _plain("numpy", "numpy", "2.4.2"),
            _plain("pillow", "PIL", "12.1.1"),
        ],
        "cu130": [
            _torch(
                new_torch,
                "13.0",
                (2, 28, 9),
                ("numpy==2.4.1", "pillow==12.1.0", "nvidia-nccl-cu13==2.28.9"),
            ),
            _plain(
                "torchvision",
                "torchvision",
                "0.27.0.dev20260226+cu130",
                (f"torch=={new_torch}", "numpy", "pillow"),
            ),
            _plain(
                "torchaudio", "torchaudio", "2.11.0.dev20260226+cu130", (f"torch=={new_torch}",)
            ),
            _plain("numpy", "numpy", "2.4.1"),
            _plain("pillow", "PIL", "12.1.0"),
            _plain("nvidia-nccl-cu13", "nvidia.nccl", "2.28.9"),
        ],
    }


def _record_hash(data: bytes) -> str:
    """A RECORD hash field: ``sha256=`` and the urlsafe base64 digest without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _metadata(dist: StandIn) -> str:
    """Text of the wheel's METADATA file (core metadata 2.1)."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {dist.name}",
        f"Version: {dist.version}",
        f"Summary: {_SUMMARY.format(name=dist.name)}",
        *(f"Requires-Dist: {req}" for req in dist.requires),
    ]
    return "\n".join(lines) + "\n\n"


def _wheel_file() -> str:
    """Text of the wheel's WHEEL file: a pure-Python, any-platform wheel."""
    return "Wheel-Version: 1.0\nGenerator: journal-demo\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def build_wheel(dist: StandIn) -> bytes:
    """The bytes of ``dist``'s wheel; equal input always gives equal bytes."""
    entries: list[tuple[str, bytes]] = [
        (path, text.encode("utf-8")) for path, text in sorted(dist.files.items())
    ]
    entries.append((f"{dist.dist_info}/METADATA", _metadata(dist).encode("utf-8")))
    entries.append((f"{dist.dist_info}/WHEEL", _wheel_file().encode("utf-8")))
    record_path = f"{dist.dist_info}/RECORD"
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in entries)
    entries.append((record_path, (record + f"{record_path},,\n").encode("utf-8")))

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in entries:
            info = zipfile.ZipInfo(path, date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def _write_if_changed(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, unless the file already holds exactly it."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _page(title: str, links: list[tuple[str, str]]) -> bytes:
    """A PEP 503 HTML page with one anchor per ``(href, text)`` pair."""
    anchors = "".join(
        f'    <a href="{html.escape(href)}">{html.escape(text)}</a><br/>\n' for href, text in links
    )
    text = (
        "<!DOCTYPE html>\n<html>\n  <head>\n"
        '    <meta name="pypi:repository-version" content="1.0">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n"
        f"    <h1>{html.escape(title)}</h1>\n{anchors}  </body>\n</html>\n"
    )
    return text.encode("utf-8")


def build_index(simple: Path, dists: list[StandIn]) -> Path:
    """Write ``dists`` as a PEP 503 simple index rooted at ``simple``; return ``simple``.

    Each project gets ``simple/<normalized-name>/index.html`` and its wheels
    sit beside that page, linked by relative name with a ``#sha256=`` fragment.
    """
    by_project: dict[str, list[StandIn]] = {}
    for dist in dists:
        by_project.setdefault(dist.project, []).append(dist)
    for project, members in sorted(by_project.items()):
        links: list[tuple[str, str]] = []
        for dist in members:
            data = build_wheel(dist)
            _write_if_changed(simple / project / dist.filename, data)
            digest = hashlib.sha256(data).hexdigest()
            links.append((f"{dist.filename}#sha256={digest}", dist.filename))
        _write_if_changed(simple / project / "index.html", _page(f"Links for {project}", links))
    root_links = [(f"{project}/", project) for project in sorted(by_project)]
    _write_if_changed(simple / "index.html", _page("Simple index", root_links))
    return simple


def build_indexes(root: Path) -> dict[str, Path]:
    """Write the demo's two stand-in indexes under ``root`` and return their ``simple`` dirs.

    The result maps ``"cu128"`` (the old stack) and ``"cu130"`` (the nightly)
    to directories usable as ``uv pip install --index-url file://<dir>``.
    """
    root = Path(root).resolve()
    packages = index_packages()
    return {name: build_index(root / name / "simple", packages[name]) for name in INDEX_NAMES}
