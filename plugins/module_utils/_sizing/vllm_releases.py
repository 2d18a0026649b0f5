# Copyright (c) 2026, llmfleet.seats contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!

"""Which vLLM release a seat runs, and which modelled release's KV arithmetic plans it.

A seat's release comes from its image tag (``vllm/vllm-openai:v0.26.0``) or, for a digest or a
tag that names no version, from its declared ``vllm_version``. kv.py models every minor release
that has ``--kv-cache-memory-bytes`` (0.10.2, then 0.11 through 0.33), each read from one patch
release's source (``MODELLED``); patch releases of a minor share its arithmetic. A release
outside that range is refused unless the seat opts into the nearest modelled one.

Pure standard library: the module and the filters share it.
"""

from __future__ import annotations

from ansible_collections.llmfleet.seats.plugins.module_utils._common.patterns import lazy_regex

# minor -> the release whose source the arithmetic was read from
MODELLED = {
    "0.10": "0.10.2", "0.11": "0.11.2", "0.12": "0.12.0", "0.13": "0.13.0", "0.14": "0.14.1",
    "0.15": "0.15.1", "0.16": "0.16.0", "0.17": "0.17.1", "0.18": "0.18.1", "0.19": "0.19.1",
    "0.20": "0.20.2", "0.21": "0.21.0", "0.22": "0.22.1", "0.23": "0.23.0", "0.24": "0.24.0",
    "0.25": "0.25.1", "0.26": "0.26.0", "0.27": "0.27.1", "0.28": "0.28.0", "0.29": "0.29.0",
    "0.30": "0.30.0", "0.31": "0.31.0", "0.32": "0.32.0", "0.33": "0.33.0",
}
LATEST = "0.33.0"
# --kv-cache-memory-bytes first shipped in 0.10.2: an older vLLM cannot run a pinned seat.
FIRST_PINNED = (0, 10, 2)

_VERSION_RE = lazy_regex(r"\Av?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:rc|post|\.post|-|\+)[0-9A-Za-z.+-]*)?\Z")
_DIGEST_RE = lazy_regex(r"@sha256:[0-9a-f]{64}\Z")


class ReleaseError(ValueError):
    """``field``, ``expected``, ``got``: what the seat's version could not be, for one line."""

    def __init__(self, field, expected, got):
        super().__init__("%s: expected %s, got %r" % (field, expected, got))
        self.field, self.expected, self.got = field, expected, got


def parse_version(text):
    """``(major, minor, patch)`` of a version or a version tag (``v0.26.0``, ``0.11.0-cu129``,
    ``0.10.2rc1``, ``0.26``), or None."""
    found = _VERSION_RE.match(text) if isinstance(text, str) else None
    if not found:
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)


def image_version(image):
    """The version an image's tag names, or None (a digest, a local image ID, no tag, or a tag
    such as ``latest`` or ``nightly``)."""
    if not isinstance(image, str) or image.startswith("sha256:"):
        return None
    image = _DIGEST_RE.sub("", image)
    last = image.rsplit("/", 1)[-1]
    return parse_version(last.rsplit(":", 1)[1]) if ":" in last else None


def _shown(version):
    return "%d.%d.%d" % version


def _minor(version):
    return "%d.%d" % version[:2]


def _nearest(version):
    """The modelled minor closest to ``version`` (the newest one for a newer release)."""
    minors = sorted(MODELLED, key=lambda minor: tuple(int(part) for part in minor.split(".")))
    below = [minor for minor in minors if tuple(int(part) for part in minor.split(".")) <= version[:2]]
    return below[-1] if below else minors[0]


def modelled(version_text, allow_nearest=False, field="vllm_version"):
    """The modelled release for a version string (what kv_budget's ``vllm_version`` takes):
    ``{"version", "release", "nearest"}``; ``release`` is the source version the arithmetic
    follows, ``nearest`` says it is not the seat's own minor."""
    version = parse_version(version_text)
    if version is None:
        raise ReleaseError(field, "a vLLM version such as 0.26.0", version_text)
    return _modelled(version, allow_nearest, field, version_text)


def _modelled(version, allow_nearest, field, got):
    if version < FIRST_PINNED:
        raise ReleaseError(field, "vLLM 0.10.2 or later: earlier releases have no --kv-cache-memory-bytes", got)
    minor = _minor(version)
    if minor in MODELLED:
        return {"version": _shown(version), "release": MODELLED[minor], "nearest": False}
    if not allow_nearest:
        raise ReleaseError(field, "a vLLM release whose KV arithmetic is modelled (0.10.2, 0.11 through %s; "
                           "allow_nearest_vllm_release: true plans it with %s's)"
                           % (_minor(parse_version(LATEST)), MODELLED[_nearest(version)]), got)
    return {"version": _shown(version), "release": MODELLED[_nearest(version)], "nearest": True}


def seat_release(image, declared=None, allow_nearest=False):
    """The release a seat runs and the modelled one that plans it: ``modelled``'s dict plus
    ``from`` (``image tag`` or ``vllm_version``). ``declared`` is the seat's ``vllm_version``;
    it must agree with a tag that names a version. With ``allow_nearest`` and no version
    anywhere, ``version`` is None and the newest modelled release plans the seat."""
    tagged = image_version(image)
    if declared is not None:
        version = parse_version(declared)
        if version is None:
            raise ReleaseError("vllm_version", "a vLLM version such as 0.26.0", declared)
        if tagged is not None and tagged != version:
            raise ReleaseError("vllm_version", "the version the image tag names (%s), or no vllm_version"
                               % _shown(tagged), declared)
        found, origin, field, got = version, "vllm_version", "vllm_version", declared
    elif tagged is not None:
        found, origin, field, got = tagged, "image tag", "image", image
    elif allow_nearest:
        # nothing names the version: the newest arithmetic, and the boot log's version gate
        return {"version": None, "release": LATEST, "nearest": True, "from": "nothing"}
    else:
        raise ReleaseError("vllm_version", "the vLLM version the image runs (its tag names none: %s), e.g. "
                           "vllm_version: 0.26.0" % image, None)
    release = _modelled(found, allow_nearest, field, got)
    release["from"] = origin
    return release


def release_note(release):
    """The plan's words for a seat planned with another release's arithmetic, or None."""
    if not release.get("nearest"):
        return None
    if release["version"] is None:
        return "vLLM version not known, planned with %s's KV arithmetic (the newest modelled release)" % (
            release["release"])
    return "runs vLLM %s, planned with %s's KV arithmetic (the nearest modelled release)" % (
        release["version"], release["release"])
