"""The `torch-env` probe: what the GPU stack of this python really is, as one JSON object.

Shipped to the host and run by the env being upgraded; standard library only, Python 3.8+;
torch and pynvml are read when present. A field that cannot be read holds
``{"unavailable": "why"}`` instead of a value: the probe never fails because a part is missing.

Most fields are read without importing torch (metadata, torch/version.py, NVML, the NCCL and
cuDNN libraries torch ships with, nvcc): importing torch costs seconds on a GPU host. Only
what needs torch's own runtime (CUDA available, the arch list, torch's view of the devices)
is inferred from those, unless ``--import-torch`` asks torch itself (seconds slower).
"""

import ctypes
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "NVIDIA_", "PYTORCH_")
ENV_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD")
#: The fields of ``torch``; the last four only torch's runtime knows (:func:`with_torch`), or
#: :func:`infer_runtime` infers.
TORCH_FIELDS = ("version", "cuda", "cudnn", "nccl")
TORCH_FIELDS += ("cuda_available", "device_count", "arch_list", "devices")


def unavailable(reason):
    return {"unavailable": str(reason)}


def _dist(name):
    from importlib import metadata

    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def nvidia_packages():
    """Versions of the nvidia-* wheels (nccl, cudnn, cublas...) in this env."""
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("nvidia-") or name in ("triton", "pytorch-triton"):
            found[name] = dist.version
    return dict(sorted(found.items()))


def torch_files():
    """(version, folder of the torch package) from metadata, without importing torch."""
    dist = _dist("torch")
    if dist is None:
        return None, None
    folder = str(dist.locate_file("torch"))
    return dist.version, folder if os.path.isdir(folder) else None


def read_version_py(folder):
    """torch/version.py's __version__, cuda, hip and git_version, read as literals."""
    import ast

    try:
        with open(os.path.join(folder, "version.py")) as fh:
            text = fh.read()
    except OSError as exc:
        return unavailable("cannot read torch/version.py: %s" % exc)
    out = {}
    for line in text.splitlines():
        match = re.match(r"^(__version__|cuda|hip|git_version)\s*(?::[^=]*)?=\s*(.+?)\s*$", line)
        if match:
            try:
                out[match.group(1)] = ast.literal_eval(match.group(2))
            except (ValueError, SyntaxError):
                pass
    return out


def _site_lib(subdir, pattern):
    """A library shipped in a nvidia-* wheel (site-packages/nvidia/SUBDIR/lib/PATTERN)."""
    for entry in sys.path:
        hits = sorted(glob.glob(os.path.join(entry, "nvidia", subdir, "lib", pattern)))
        if hits:
            return hits[0]
    return None


def nccl_from_library(path):
    """The version a libnccl reports through ncclGetVersion, as "2.28.9"."""
    lib = ctypes.CDLL(path)
    code = ctypes.c_int()
    if lib.ncclGetVersion(ctypes.byref(code)) != 0:
        raise OSError("ncclGetVersion failed")
    value = code.value
    if value >= 10000:
        return "%d.%d.%d" % (value // 10000, value // 100 % 100, value % 100)
    return "%d.%d.%d" % (value // 1000, value // 100 % 10, value % 100)


def cudnn_from_library(path):
    """cudnnGetVersion of a libcudnn, as torch reports it (e.g. 91300)."""
    return int(ctypes.CDLL(path).cudnnGetVersion())


def wheel_library(subdir, pattern, read, errors):
    """The library of an nvidia-* wheel, loaded without torch: its path and what ``read``
    says its version is (``errors``: what a library that cannot be read raises)."""
    lib = _site_lib(subdir, pattern)
    if not lib:
        return unavailable("no nvidia-%s wheel library in this env" % subdir)
    try:
        return {"path": lib, "version": read(lib)}
    except errors as exc:
        return unavailable("loading %s failed: %s" % (lib, exc))


ARCH_LIST = re.compile(rb"^(?:(?:sm|compute)_\d{2,3}[af]?)(?: (?:sm|compute)_\d{2,3}[af]?)*$")


def arch_list_from_library(folder):
    """torch.cuda.get_arch_list() without importing torch: the arch flags string compiled
    into libtorch_python.so (what torch._C._cuda_getArchFlags() returns), found by scanning."""
    import mmap

    for name in ("libtorch_python.so", "libtorch_cuda.so"):
        path = os.path.join(folder, "lib", name)
        if not os.path.exists(path):
            continue
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            pos = data.find(b"sm_")
            while pos != -1:
                start = data.rfind(b"\0", max(0, pos - 512), pos) + 1
                end = data.find(b"\0", pos, pos + 1024)
                if end != -1 and ARCH_LIST.match(data[start:end]):
                    return data[start:end].decode().split(), path
                pos = data.find(b"sm_", pos + 3)
    return None, None


def visible_devices(devices):
    """The NVML devices torch would see, in its order, under CUDA_VISIBLE_DEVICES."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return devices
    chosen = []
    for item in value.split(","):
        item = item.strip()
        match = [
            d
            for d in devices
            if str(d.get("index")) == item
            or (item.startswith("GPU-") and str(d.get("uuid", "")).startswith(item))
        ]
        if not match:
            break  # CUDA stops at the first entry it cannot resolve
        chosen.append(match[0])
    return chosen


def _major_minor(text):
    parts = re.findall(r"\d+", str(text or ""))
    return tuple(int(p) for p in parts[:2]) if parts else None


def parse_smi_csv(text):
    """Rows of `nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,compute_cap
    --format=csv,noheader,nounits`."""
    devices = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 6:
            continue
        index, name, uuid, driver, memory, capability = cells[:6]
        devices.append(
            {
                "index": int(index),
                "name": name,
                "uuid": uuid,
                "driver": driver,
                "memory_total_mib": int(float(memory))
                if memory.replace(".", "").isdigit()
                else None,
                "capability": capability,
            }
        )
    return devices


def parse_smi_header(text):
    """Driver and CUDA-driver versions from the banner of plain `nvidia-smi`."""
    out = {}
    match = re.search(r"Driver Version:\s*([\d.]+)", text)
    if match:
        out["driver"] = match.group(1)
    match = re.search(r"CUDA Version:\s*([\d.]+)", text)
    if match:
        out["cuda_driver"] = match.group(1)
    return out


def from_nvidia_smi():
    """The NVML facts through the nvidia-smi command, for a python without pynvml."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return unavailable("nvidia-smi is not on PATH")
    query = "index,name,uuid,driver_version,memory.total,compute_cap"
    try:
        csv = subprocess.run(
            [smi, "--query-gpu=" + query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        banner = subprocess.run([smi], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return unavailable("nvidia-smi failed: %s" % exc)
    if csv.returncode != 0:
        return unavailable("nvidia-smi failed: %s" % (csv.stderr or csv.stdout).strip())
    out = parse_smi_header(banner.stdout)
    out["devices"] = parse_smi_csv(csv.stdout)
    out["source"] = "nvidia-smi"
    return out


def from_nvml():
    """Driver, CUDA-driver version and devices from NVML (pynvml, from nvidia-ml-py)."""
    try:
        import pynvml
    except ImportError:
        smi = from_nvidia_smi()
        if "unavailable" in smi:
            return unavailable(
                "pynvml (nvidia-ml-py) is not installed in this python; " + smi["unavailable"]
            )
        return smi
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return unavailable("NVML cannot start: %s" % (str(exc) or type(exc).__name__))
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        out = {
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "cuda_driver": "%d.%d" % (cuda // 1000, cuda % 1000 // 10),
            "devices": [],
            "source": "pynvml",
        }
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            out["devices"].append(
                {
                    "index": index,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                    "capability": "%d.%d" % (major, minor),
                    "memory_total_mib": memory.total // (1 << 20),
                }
            )
        return out
    except Exception as exc:
        return unavailable("NVML query failed: %s" % exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def cuda_home():
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(name):
            return os.environ[name]
    if os.path.isdir("/usr/local/cuda"):
        return os.path.realpath("/usr/local/cuda")
    return unavailable("CUDA_HOME is not set and there is no /usr/local/cuda")


def nvcc(home):
    candidates = []
    if isinstance(home, str):
        candidates.append(os.path.join(home, "bin", "nvcc"))
    found = shutil.which("nvcc")
    if found:
        candidates.append(found)
    for path in candidates:
        if os.path.exists(path):
            try:
                done = subprocess.run(
                    [path, "--version"], capture_output=True, text=True, timeout=30
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return unavailable("%s --version failed: %s" % (path, exc))
            match = re.search(r"release ([\d.]+), V([\d.]+)", done.stdout)
            if match:
                return {"path": path, "release": match.group(1), "version": match.group(2)}
            return unavailable("%s --version printed no release" % path)
    return unavailable("no nvcc in CUDA_HOME/bin or on PATH")


def system_nccl(home):
    """NCCL outside torch's wheel: NCCL_VERSION (NGC images) and libnccl.so.* on the system."""
    out = {"NCCL_VERSION": os.environ.get("NCCL_VERSION")}
    dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/local/lib",
    ]
    dirs += glob.glob("/usr/local/nccl*/lib") + glob.glob("/opt/nccl*/lib")
    if isinstance(home, str):
        dirs += [os.path.join(home, "lib64"), os.path.join(home, "lib")]
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    libraries = {}
    for folder in dirs:
        for path in glob.glob(os.path.join(folder, "libnccl.so.*")):
            match = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", path)
            if match:
                libraries[os.path.realpath(path)] = match.group(1)
    out["libraries"] = [{"path": p, "version": v} for p, v in sorted(libraries.items())]
    return out


def with_torch(result, timings):
    """The fields only torch's runtime knows: CUDA available, arch list, its devices."""
    started = time.perf_counter()
    try:
        import torch
    except Exception as exc:
        reason = "import torch failed: %s: %s" % (type(exc).__name__, exc)
        for key in TORCH_FIELDS[4:]:
            result["torch"][key] = unavailable(reason)
        return
    timings["import_torch"] = round(time.perf_counter() - started, 4)
    t = result["torch"]
    t["version"] = torch.__version__
    t["cuda"] = torch.version.cuda
    try:
        t["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        t["cudnn"] = unavailable(exc)
    try:
        t["cuda_available"] = bool(torch.cuda.is_available())
        t["device_count"] = torch.cuda.device_count()
    except Exception as exc:
        t["cuda_available"] = t["device_count"] = unavailable(exc)
    if torch.version.cuda is None:
        t["arch_list"] = unavailable("torch is a CPU build (torch.version.cuda is None)")
        t["nccl"] = unavailable("torch is a CPU build: no NCCL")
    else:
        try:
            t["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as exc:
            t["arch_list"] = unavailable(exc)
        try:
            t["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        except Exception as exc:
            t["nccl"] = unavailable(exc)
    devices = []
    if t.get("cuda_available") is True:
        for index in range(t["device_count"]):
            props = torch.cuda.get_device_properties(index)
            devices.append(
                {
                    "index": index,
                    "name": props.name,
                    "capability": "%d.%d" % (props.major, props.minor),
                    "memory_total_mib": props.total_memory // (1 << 20),
                }
            )
    t["devices"] = devices
    timings["torch_fields"] = round(time.perf_counter() - started, 4)


def probe(import_torch=True):
    started = time.perf_counter()
    timings = {}
    result = {"probe": "torch-env", "python": sys.version.split()[0], "executable": sys.executable}
    version, folder = torch_files()
    if version is None:
        reason = "torch is not installed in this python"
        torch_info = {key: unavailable(reason) for key in TORCH_FIELDS}
        import_torch = False
    else:
        torch_info = {"version": version, "path": folder}
        parsed = read_version_py(folder) if folder else unavailable("torch's folder not found")
        if "unavailable" in parsed:
            torch_info["cuda"] = parsed
        else:
            # version.py carries the local variant (+cu130) even where the wheel's metadata
            # says plain 2.11.0 (PyPI's default CUDA build): it is what torch.__version__ says.
            torch_info["version"] = parsed.get("__version__") or version
            torch_info["cuda"] = parsed.get("cuda")
            torch_info["git_version"] = parsed.get("git_version")
    result["torch"] = torch_info
    result["packages"] = nvidia_packages()
    timings["metadata"] = round(time.perf_counter() - started, 4)

    # The NCCL and cuDNN of torch's own wheels, loaded without torch.
    result["nccl_library"] = wheel_library("nccl", "libnccl.so*", nccl_from_library, OSError)
    wheels = [(n, v) for n, v in result["packages"].items() if n.startswith("nvidia-nccl-cu")]
    if "unavailable" in result["nccl_library"] and wheels:
        # The wheel is there but its library could not be read: its version is the next best.
        result["nccl_library"] = {"path": None, "version": wheels[0][1], "source": wheels[0][0]}
    result["cudnn_library"] = wheel_library(
        "cudnn", "libcudnn.so*", cudnn_from_library, (OSError, AttributeError)
    )
    timings["libraries"] = round(time.perf_counter() - started, 4)

    result["nvml"] = from_nvml()
    timings["nvml"] = round(time.perf_counter() - started, 4)
    home = cuda_home()
    result["cuda_home"] = home
    result["nvcc"] = nvcc(home)
    result["env"] = {
        k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES
    }
    result["system_nccl"] = system_nccl(home)
    timings["system"] = round(time.perf_counter() - started, 4)

    if import_torch:
        with_torch(result, timings)
    elif version is not None:
        infer_runtime(result, folder)
        timings["arch_list"] = round(time.perf_counter() - started, 4)
    for key in ("nccl", "cudnn"):  # unless torch said: what its wheels' libraries report
        library = result[key + "_library"]
        torch_info.setdefault(key, library["version"] if "version" in library else library)
    summarize(result)
    timings["total"] = round(time.perf_counter() - started, 4)
    result["seconds"] = timings
    return result


def infer_runtime(result, folder):
    """What `import torch` would say about CUDA, read from the files and NVML instead."""
    t, nvml = result["torch"], result["nvml"]
    result["torch_imported"] = False
    if t.get("cuda") is None:
        reason = "torch is a CPU build (torch.version.cuda is None)"
        t["cuda_available"], t["device_count"], t["devices"] = False, 0, []
        t["arch_list"] = unavailable(reason)
        t["nccl"] = unavailable("torch is a CPU build: no NCCL")
        return
    try:
        arch, source = arch_list_from_library(folder) if folder else (None, None)
        missing = unavailable("no arch flags string found in torch's libraries")
        t["arch_list"] = arch if arch is not None else missing
        if source:
            t["arch_list_source"] = source
    except (OSError, ValueError) as exc:
        t["arch_list"] = unavailable("scanning torch's libraries failed: %s" % exc)
    if "unavailable" in nvml:
        reason = "cannot tell without NVML: " + nvml["unavailable"]
        t["cuda_available"] = t["device_count"] = t["devices"] = unavailable(reason)
        return
    devices = visible_devices(nvml.get("devices", []))
    t["devices"] = devices
    t["device_count"] = len(devices)
    driver, runtime = _major_minor(nvml.get("cuda_driver")), _major_minor(t.get("cuda"))
    # A CUDA runtime runs on a driver of the same major version or newer.
    t["cuda_available"] = bool(devices) and bool(driver and runtime and driver[0] >= runtime[0])


def summarize(result):
    """Top-level shortcuts that expectations and views use: nccl, driver, gpu_count..."""
    t, nvml = result["torch"], result["nvml"]
    result["nccl"] = t.get("nccl")
    ok = "unavailable" not in nvml
    result["driver"] = nvml["driver"] if ok and "driver" in nvml else nvml if not ok else None
    result["cuda_driver"] = nvml.get("cuda_driver") if ok else nvml
    devices = t.get("devices")
    if not isinstance(devices, list) or (not devices and ok and nvml.get("devices")):
        devices = nvml.get("devices") if ok else devices
    result["gpu_count"] = len(devices) if isinstance(devices, list) else devices
    listed = devices if isinstance(devices, list) else []
    names = sorted({d["name"] for d in listed})
    result["gpu_name"] = ", ".join(names) if names else None
    caps = sorted({d.get("capability") for d in listed if d.get("capability")})
    result["capability"] = ", ".join(caps) if caps else None


def main(argv):
    print(json.dumps(probe(import_torch="--import-torch" in argv), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
