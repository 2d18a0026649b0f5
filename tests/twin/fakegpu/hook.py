"""The twin's nvidia-container-runtime-hook: what the NVIDIA runtime does to a GPU container.

dockerd registers its `nvidia` device driver only when an executable of this name is on its
PATH, and adds it as an OCI prestart hook to every container with a GPU reservation, after
putting the reserved devices in the container's NVIDIA_VISIBLE_DEVICES. The hook gets the
container's state on stdin (pid, bundle) before the container's root is pivoted, and, like
nvidia-container-cli, mounts the driver's files into the container's root filesystem from
inside the container's mount namespace:

- /run/fakegpu (the driver's socket and state.json), read-only: seats allocate through it;
- with the `utility` capability: the fake nvidia-smi and libnvidia-ml.so.1, where a driver
  install puts them.

Compose files therefore stay exactly as production renders them. Devices the host does not
have, or a host without a running driver, fail the container's start with the real messages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

DRIVER_DIR = "/run/fakegpu"
STATE = DRIVER_DIR + "/state.json"
SOCKET = DRIVER_DIR + "/gpu.sock"
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NVML = "libnvidia-ml.so.1"
# The toolkit's default when an image does not say (NVIDIA_DRIVER_CAPABILITIES unset).
DEFAULT_CAPABILITIES = "utility,compute"


class HookError(Exception):
    """The container must not start; the message is what nvidia-container-cli would print."""


def last_env(env: list, name: str) -> str | None:
    """The value the NVIDIA runtime takes: the last one (docker appends the reservation's
    variables after the image's; the twin's images set none, so a seat sees the same)."""
    value = None
    for entry in env:
        key, sep, rest = entry.partition("=")
        if sep and key == name:
            value = rest
    return value


def select_devices(visible: str, gpus: list) -> list:
    """The host's GPUs that NVIDIA_VISIBLE_DEVICES names (UUIDs or indices, or `all`)."""
    if visible == "all":
        return list(gpus)
    selected = []
    for token in (t.strip() for t in visible.split(",")):
        match = [g for g in gpus if token in (g["uuid"], str(g["index"]))]
        if not match:
            raise HookError("nvidia-container-cli: device error: %s: unknown device" % token)
        selected.extend(g for g in match if g not in selected)
    return selected


def utility_files() -> list:
    """[(file on the host, path in the container)] for the `utility` capability, found the way
    nvidia-container-cli finds them: nvidia-smi on PATH, the library in the ld.so cache."""
    files = []
    smi = shutil.which("nvidia-smi", path=SEARCH_PATH)
    if smi:
        files.append((smi, "/usr/bin/nvidia-smi"))
    cache = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True,
                           check=False).stdout
    for line in cache.splitlines():
        name, arrow, path = line.strip().partition(" => ")
        if arrow and name.split(" ", 1)[0] == NVML:
            files.append((path, "/usr/lib/x86_64-linux-gnu/" + NVML))
            break
    return files


def _mount_into(pid: int, rootfs: str, mounts: list) -> None:
    """Bind `mounts` ([(host path, path in container)]) read-only inside the container's
    mount namespace, creating the mount points in its root filesystem."""
    script = ['set -e']
    for source, target in mounts:
        dest = rootfs.rstrip("/") + target
        if os.path.isdir(source):
            script.append('mkdir -p "%s"' % dest)
        else:
            script.append('mkdir -p "%s" && touch "%s"' % (os.path.dirname(dest), dest))
        script.append('mount --bind -o ro "%s" "%s"' % (source, dest))
    proc = subprocess.run(["/usr/bin/nsenter", "--target", str(pid), "--mount", "--",
                           "/bin/sh", "-c", "\n".join(script)],
                          capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    if proc.returncode != 0:
        raise HookError("nvidia-container-cli: mount error: %s" % proc.stderr.strip())


def prestart(container_state: dict) -> None:
    bundle = container_state["bundle"]
    with open(os.path.join(bundle, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    env = config.get("process", {}).get("env", [])
    visible = last_env(env, "NVIDIA_VISIBLE_DEVICES")
    if visible in (None, "", "void", "none"):
        return
    if not os.path.exists(SOCKET):
        raise HookError("nvidia-container-cli: initialization error: nvml error: "
                        "driver not loaded")
    with open(STATE, encoding="utf-8") as handle:
        gpus = json.load(handle)["gpus"]
    select_devices(visible, gpus)

    rootfs = config["root"]["path"]
    if not os.path.isabs(rootfs):
        rootfs = os.path.join(bundle, rootfs)
    mounts = [(DRIVER_DIR, DRIVER_DIR)]
    capabilities = last_env(env, "NVIDIA_DRIVER_CAPABILITIES") or DEFAULT_CAPABILITIES
    if "utility" in capabilities.split(",") or capabilities == "all":
        mounts.extend(utility_files())
    _mount_into(container_state["pid"], rootfs, mounts)


def main(argv: list) -> int:
    if argv[1:2] != ["prestart"]:
        # The real hook ignores the other stages it may be called for.
        return 0
    try:
        prestart(json.load(sys.stdin))
    except HookError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
