"""The `packages` probe: every distribution of this python with its version and installer.

Shipped to the host and run by the env being upgraded; standard library only, Python 3.8+.
Prints one JSON object. importlib.metadata reads the dist-info folders directly, about four
times faster than `pip list`. A distribution installed from a URL, a wheel file or a folder
also carries its ``direct_url`` (PEP 610), so a rollback can fetch it from there again.

The env's fingerprint comes first: the names and times of the metadata folders (and .pth
files) on sys.path, and of the folders holding them, which an install, an upgrade, a removal
or a reinstall all change. Given the fingerprint of the previous snapshot as its argument,
the probe says ``"unchanged": true`` instead of reading every distribution when it matches.
"""

import hashlib
import json
import os
import re
import sys
import time

METADATA = (".dist-info", ".egg-info", ".egg-link", ".pth")


def normalize(name):
    """PEP 503 name: lowercase, runs of -_. as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


def search_path():
    """Where the env's distributions are: sys.path without the '' that `python -c` puts
    first (the folder the probe happens to run in, not the env: a checkout's egg-info there
    is no package of the env)."""
    if sys.path and sys.path[0] == "":
        return sys.path[1:]
    return list(sys.path)


def snapshot():
    from importlib import metadata

    packages = {}
    for dist in metadata.distributions(path=search_path()):
        name = dist.metadata["Name"]
        if not name:
            continue
        try:
            installer = (dist.read_text("INSTALLER") or "").strip() or None
        except OSError:
            installer = None
        key = normalize(name)
        if key in packages:  # the same name twice on sys.path: the first one wins on import
            packages[key].setdefault("shadowed", []).append(dist.version)
            continue
        # When its dist-info was written: a reinstall at the same version changes only this.
        path = getattr(dist, "_path", None)
        try:
            installed = os.stat(str(path)).st_mtime_ns if path is not None else None
        except OSError:
            installed = None
        packages[key] = {
            "name": name,
            "version": dist.version,
            "installer": installer,
            "installed": installed,
        }
        direct = direct_url(dist)
        if direct is not None:
            packages[key]["direct_url"] = direct
    return packages


def direct_url(dist):
    """Where a distribution installed from a URL, a wheel file or a folder came from (PEP 610's
    ``direct_url.json``: ``url`` and its ``archive_info``, ``dir_info`` or ``vcs_info``), or
    None for one installed from an index."""
    try:
        text = dist.read_text("direct_url.json")
    except OSError:
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    keep = ("url", "archive_info", "dir_info", "vcs_info", "subdirectory")
    return {k: data[k] for k in keep if k in data}


def fingerprint():
    """A digest of what says which distributions are installed, read in a few milliseconds."""
    digest = hashlib.sha256()
    for folder in search_path():
        try:
            entries = sorted(os.listdir(folder or "."))
            digest.update("{}:{}\n".format(folder, os.stat(folder or ".").st_mtime_ns).encode())
        except OSError:
            continue
        for name in entries:
            if name.endswith(METADATA):
                try:
                    when = os.stat(os.path.join(folder or ".", name)).st_mtime_ns
                except OSError:
                    when = 0
                digest.update("{}:{}\n".format(name, when).encode())
    return digest.hexdigest()[:32]


def main():
    started = time.perf_counter()
    found = fingerprint()
    out = {
        "probe": "packages",
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "prefix": sys.prefix,
        "fingerprint": found,
    }
    if len(sys.argv) > 1 and sys.argv[1] == found:
        out["unchanged"] = True
    else:
        out["packages"] = snapshot()
    out["seconds"] = round(time.perf_counter() - started, 4)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
