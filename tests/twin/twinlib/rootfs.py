"""The seat image's root filesystem, built from this machine's files (no registry is reachable).

It holds Debian's system Python (the interpreter, its standard library and every shared library
`ldd` finds for it and its extension modules), /bin/sh and /usr/bin/env for `#!` lines, and a copy
of tests/twin/seat/ under /opt/seat with its bytecode. The tarball is written with fixed owners,
and times that are fixed or the copied file's own, so the same inputs give the same bytes; its
name carries a digest of them, which makes it a cache key.
"""

from __future__ import annotations

import hashlib
import io
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PYTHON = "/usr/bin/python3.11"
STDLIB = "/usr/lib/python3.11"
# Entry points for `#!/usr/bin/env python3` scripts and compose `CMD-SHELL` healthchecks.
EXTRA_BINARIES = ("/bin/sh", "/usr/bin/env")
# Parts of the standard library a server never imports; the static libpython alone is 25 MB.
STDLIB_SKIP = re.compile(
    r"^(config-3\.11-[^/]*|test|idlelib|tkinter|turtledemo|ensurepip|lib2to3|pydoc_data)(/|$)"
    r"|^lib-dynload/(_test|xxlimited|_xxtestfuzz|_ctypes_test)")
SEAT_DIR_IN_IMAGE = "/opt/seat"
MTIME = 1_700_000_000
IMAGE_CACHE_TAG = "cpython-311"  # PYTHON's


class RootfsError(RuntimeError):
    """The machine lacks something the image needs."""


def _shared_libraries(binaries: list[str]) -> set[str]:
    """Every library the dynamic linker resolves for these binaries, plus the loader itself."""
    libraries: set[str] = set()
    for start in range(0, len(binaries), 200):
        out = subprocess.run(["ldd"] + binaries[start:start + 200], capture_output=True,
                             text=True, check=False).stdout
        for line in out.splitlines():
            match = re.search(r"=>\s+(/\S+)|^\s*(/\S+)\s+\(0x", line)
            if match:
                libraries.add(match.group(1) or match.group(2))
    return libraries


def _stdlib_files() -> list[str]:
    files = []
    for dirpath, dirnames, filenames in os.walk(STDLIB):
        rel_dir = os.path.relpath(dirpath, STDLIB)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if not STDLIB_SKIP.match(rel_dir + d))
        files.extend(os.path.join(dirpath, f) for f in sorted(filenames)
                     if not STDLIB_SKIP.match(rel_dir + f))
    return files


def _seat_files(seat_dir: Path) -> list[Path]:
    if not seat_dir.is_dir():
        return []
    return sorted(p for p in seat_dir.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"))


class _Archive:
    """A tarball whose members all belong to root. What it makes carries one fixed mtime; what
    it copies from this machine keeps its own, so the bytecode Debian compiled for the standard
    library stays valid and a container's python does not compile it again at every start."""

    def __init__(self, tar: tarfile.TarFile):
        self.tar = tar
        self.names: set[str] = set()

    def _info(self, name: str, kind: bytes, mode: int, mtime: int = MTIME) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name.lstrip("/"))
        info.type, info.mode, info.mtime = kind, mode, mtime
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    def directory(self, name: str, mode: int = 0o755) -> None:
        name = name.rstrip("/")
        if not name or name in self.names:
            return
        self.directory(os.path.dirname(name))
        self.names.add(name)
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode))

    def symlink(self, name: str, target: str) -> None:
        if name in self.names:
            return
        self.directory(os.path.dirname(name))
        self.names.add(name)
        info = self._info(name, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.tar.addfile(info)

    def data(self, name: str, content: bytes, mode: int = 0o644, mtime: int = MTIME) -> None:
        if name in self.names:
            return
        self.directory(os.path.dirname(name))
        self.names.add(name)
        info = self._info(name, tarfile.REGTYPE, mode, mtime)
        info.size = len(content)
        self.tar.addfile(info, io.BytesIO(content))

    def host_path(self, path: str) -> None:
        """Copy a file from this machine at the same path, following its chain of symlinks.

        Members are named by their real directory (/usr/lib/..., not /lib/...), because a
        tarball entry below a symlink is refused by `docker import`.
        """
        path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if os.path.islink(path):
            target = os.readlink(path)
            self.symlink(path, target)
            self.host_path(os.path.normpath(os.path.join(os.path.dirname(path), target)))
        elif os.path.isfile(path):
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                self.data(path, handle.read(), stat.st_mode & 0o777, int(stat.st_mtime))

    def bytecode(self, name: str, source: Path) -> None:
        """The bytecode of ``source`` (installed as ``name``) beside it, checked by the source's
        hash rather than its mtime: the image's python 3.11 reads it and compiles nothing."""
        if sys.implementation.cache_tag != IMAGE_CACHE_TAG:
            return  # another python's bytecode: the image's would ignore it
        with tempfile.TemporaryDirectory() as work:
            compiled = py_compile.compile(str(source), cfile=os.path.join(work, "out.pyc"), doraise=True,
                                          invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
            folder, module = os.path.split(name)
            self.data("%s/__pycache__/%s.%s.pyc" % (folder, module[:-3], IMAGE_CACHE_TAG),
                      Path(compiled).read_bytes())


def _top_level_links(archive: _Archive) -> None:
    """Debian 12 merges /usr: /bin, /lib, /lib64 and /sbin are links, and ld.so lives under them."""
    for name in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(name):
            archive.symlink(name, os.readlink(name))


def inputs_digest(seat_dir: Path, programs: list) -> str:
    """A digest of everything the image is made from: this recipe, the interpreter, the seat."""
    digest = hashlib.sha256(" ".join(programs).encode())
    for path in [Path(__file__), Path(PYTHON)] + _seat_files(seat_dir):
        stat = path.stat()
        digest.update(("%s %d %d\n" % (path, stat.st_size, int(stat.st_mtime))).encode())
    return digest.hexdigest()[:16]


def build_rootfs(seat_dir: Path, cache_dir: Path, programs: list) -> Path:
    """Write (or reuse) the image tarball and return its path. Each of `programs` found in
    `seat_dir` becomes a command on the image's PATH (/usr/local/bin), run by python3."""
    if not os.access(PYTHON, os.X_OK):
        raise RootfsError("the seat image needs Debian's %s (apt-get install python3)" % PYTHON)
    cache_dir.mkdir(parents=True, exist_ok=True)
    out = cache_dir / ("seat-rootfs-%s.tar" % inputs_digest(seat_dir, programs))
    if out.exists():
        return out

    stdlib = _stdlib_files()
    extensions = [f for f in stdlib if f.endswith(".so")]
    libraries = _shared_libraries([PYTHON] + list(EXTRA_BINARIES) + extensions)
    # Twins coming up side by side may build the same image at once: each writes its own file.
    partial = out.with_name("%s.%d.partial" % (out.name, os.getpid()))
    with tarfile.open(partial, "w", format=tarfile.GNU_FORMAT) as tar:
        archive = _Archive(tar)
        _top_level_links(archive)
        for name in ("/etc", "/proc", "/sys", "/dev", "/run", "/root", "/usr/local/bin",
                     "/vllm-workspace"):
            archive.directory(name)
        archive.directory("/tmp", 0o1777)
        archive.data("/etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
                                    b"nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")
        archive.data("/etc/group", b"root:x:0:\nnogroup:x:65534:\n")
        for path in [PYTHON] + list(EXTRA_BINARIES) + sorted(libraries) + stdlib:
            archive.host_path(path)
        archive.symlink("/usr/bin/python3", "python3.11")
        for path in _seat_files(seat_dir):
            name = "%s/%s" % (SEAT_DIR_IN_IMAGE, path.relative_to(seat_dir))
            archive.data(name, path.read_bytes(), path.stat().st_mode & 0o777)
            if path.suffix == ".py":
                archive.bytecode(name, path)
        for program in programs:
            if (seat_dir / program).is_file():
                archive.data("/usr/local/bin/" + program, b'#!/bin/sh\nexec /usr/bin/python3 '
                             b'%s/%s "$@"\n' % (SEAT_DIR_IN_IMAGE.encode(), program.encode()),
                             0o755)
    partial.rename(out)
    for stale in cache_dir.glob("seat-rootfs-*.tar"):
        if stale != out:
            stale.unlink()
    return out


# The real vLLM (its CPU build, scripts/bootstrap-real-vllm) in a seat image: the stand-ins' root
# filesystem and the system libraries the engine's extension modules link to. The engine itself
# (2.4 GB of site-packages) is not copied in: the seat mounts it read-only at REAL_VLLM_SITE, where
# its PYTHONPATH points, from the host (fleet.py shares the checkout's venv with it), with the
# bytecode pip compiled against the files' own times, so the engine compiles nothing at a boot.
# Debian's Python 3.11 runs the wheels built for the venv's 3.11.
REAL_VLLM_SITE = "/opt/real-vllm/site-packages"
# vLLM's CPU executor asks lscpu for the cores and NUMA nodes to bind its threads to.
ENGINE_BINARIES = ("/usr/bin/lscpu",)


def build_engine_rootfs(base: Path, site_packages: Path, cache_dir: Path) -> Path:
    """Write (or reuse) the real engine's image tarball over ``base`` (build_rootfs's) and return
    its path; its name carries a digest of the base, this recipe and the engine's install stamp."""
    stamp = site_packages.parents[2] / ".real-vllm-requirement"
    if not stamp.is_file():
        raise RootfsError("the real-engine image needs .build/real-vllm (scripts/bootstrap-real-vllm)")
    digest = hashlib.sha256(("%s %s %d " % (base.name, stamp.read_text().strip(),
                                            int(Path(__file__).stat().st_mtime))).encode()).hexdigest()[:16]
    out = cache_dir / ("real-vllm-rootfs-%s.tar" % digest)
    if out.exists():
        return out
    missing = [binary for binary in ENGINE_BINARIES if not os.access(binary, os.X_OK)]
    if missing:
        raise RootfsError("the real-engine image needs %s (apt-get install util-linux)" % ", ".join(missing))
    extensions = [str(path) for path in site_packages.rglob("*.so*") if path.is_file()]
    libraries = {library for library in _shared_libraries(extensions + list(ENGINE_BINARIES))
                 if not library.startswith(str(site_packages))}
    partial = out.with_name("%s.%d.partial" % (out.name, os.getpid()))
    shutil.copyfile(base, partial)
    with tarfile.open(partial, "a", format=tarfile.GNU_FORMAT) as tar:
        archive = _Archive(tar)
        archive.names.update("/" + member.name.rstrip("/") for member in tar.getmembers())
        for path in sorted(libraries) + list(ENGINE_BINARIES):
            archive.host_path(path)
        archive.directory(REAL_VLLM_SITE)
    partial.rename(out)
    for stale in cache_dir.glob("real-vllm-rootfs-*.tar"):
        if stale != out:
            stale.unlink()
    return out
