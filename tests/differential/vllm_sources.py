"""The few source files of one vLLM release that the differential harnesses read, from PyPI.

A release's x86_64 wheel is 290 to 490 MB, but only a dozen of its Python files are read. A wheel
is a zip whose index sits at its end, so HTTP range requests fetch that index and then just the
members asked for (a few hundred KB in all). They are kept under ``<cache>/<version>/`` with the
wheel's file list, so a file asked for later is fetched alone and one the release lacks is known
without asking again. Where the index (PyPI or a mirror of it) answers a range request with the
whole file, the wheel is read from a temporary download instead.
"""

from __future__ import annotations

import functools
import io
import json
import shutil
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

PYPI = "https://pypi.org/pypi/vllm/json"
# where every harness and test keeps what it read, one directory per release
CACHE = Path(__file__).resolve().parents[2] / ".build" / "cache" / "vllm-src"
NAMES = ".wheel-names.json"
TIMEOUT = 300


class SourceUnavailable(RuntimeError):
    """A release's source could not be fetched or read; the message says why."""


class _RangeReader(io.RawIOBase):
    """A seekable read-only view of a remote file, each read one HTTP range request."""

    def __init__(self, url, size):
        super().__init__()
        self.url, self.size, self.position = url, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.position

    def seek(self, offset, whence=io.SEEK_SET):
        self.position = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence] + offset
        return self.position

    def readinto(self, buffer):
        end = min(self.position + len(buffer), self.size)
        if end <= self.position:
            return 0
        data = _get(self.url, "bytes=%d-%d" % (self.position, end - 1))
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def _get(url, byte_range=None):
    request = urllib.request.Request(url, headers={"Range": byte_range} if byte_range else {})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
        if byte_range and answer.status != 206:
            raise _NoRanges()
        return answer.read()


class _NoRanges(Exception):
    """The server sent the whole file for a range request."""


@functools.lru_cache(maxsize=None)
def _wheel_url(version, index):
    with urllib.request.urlopen(index, timeout=TIMEOUT) as answer:
        files = json.load(answer)["releases"].get(version) or []
    wheels = [f for f in files if f["filename"].endswith(".whl") and "x86_64" in f["filename"]]
    if not wheels:
        raise SourceUnavailable("PyPI lists no x86_64 wheel of vllm %s" % version)
    return urllib.parse.urljoin(index, wheels[0]["url"]), wheels[0]["filename"], wheels[0]["size"]


def _extract(archive, names, wanted, root):
    for name in sorted(wanted & names):
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        partial.write_bytes(archive.read(name))
        partial.replace(target)


def release_files(version, wanted, cache_dir=CACHE, index=PYPI):
    """The directory holding ``version``'s files among ``wanted`` (paths such as
    ``vllm/v1/core/kv_cache_utils.py``); those the release does not have are simply absent.
    ``index`` is PyPI's JSON page for vllm (or a mirror's)."""
    root = Path(cache_dir) / version
    listing = root / NAMES
    wanted = set(wanted)
    if listing.exists():
        names = set(json.loads(listing.read_text())["names"])
        if all((root / name).exists() for name in wanted & names):
            return root
    try:
        url, filename, size = _wheel_url(version, index)
        try:
            with zipfile.ZipFile(io.BufferedReader(_RangeReader(url, size), buffer_size=1 << 16)) as archive:
                names = set(archive.namelist())
                _extract(archive, names, wanted, root)
        except _NoRanges:
            with tempfile.TemporaryFile() as whole:
                with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
                    shutil.copyfileobj(answer, whole, 1 << 20)
                with zipfile.ZipFile(whole) as archive:
                    names = set(archive.namelist())
                    _extract(archive, names, wanted, root)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise SourceUnavailable("reading vllm %s's wheel from PyPI failed: %s" % (version, exc)) from None
    root.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps({"wheel": filename, "names": sorted(n for n in names if n.endswith(".py"))}))
    return root


def wheel_name(root):
    """The wheel a release_files directory was read from."""
    return json.loads((Path(root) / NAMES).read_text())["wheel"]


def wheel_names(version, cache_dir=CACHE, index=PYPI):
    """The Python files ``version``'s wheel holds (read once, kept beside its files)."""
    root = release_files(version, (), cache_dir, index)
    return json.loads((root / NAMES).read_text())["names"]
