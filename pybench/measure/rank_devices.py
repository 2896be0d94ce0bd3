"""Every rank's process, host, device and device name, gathered from all ranks for nccl-tests' Rank lines.

nccl-tests names each rank's own device (``device  0 [0000:1b:00] NVIDIA H100 80GB HBM3``), and programs that read
its output count ranks by those names (CloudAI counts the Rank lines naming "NVIDIA"), so a rank on another
host is named by that rank itself, not by rank 0's guess. The facts travel in the backend's one agreement
call (an element-wise maximum of integers): each rank fills its own slots and leaves the others 0.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from pybench.measure.envinfo import cpu_model

# The device index a rank reports when it runs on the CPU (the mpi backend, torch over gloo).
CPU_DEVICE = -1
# A name travels as UTF-8 bytes, 7 to a slot (a maximum over non-negative 64-bit integers carries them);
# nccl-tests' own Rank lines hold names far shorter than this.
_NAME_SLOTS = 9
_BYTES_PER_SLOT = 7
NAME_BYTES = _NAME_SLOTS * _BYTES_PER_SLOT
_ADDRESS_SLOTS = 2  # a PCI address as nccl-tests prints it, "0000:1b:00"
_SLOTS = 2 + _NAME_SLOTS + _ADDRESS_SLOTS  # pid, device + 1, the name, the address


class RankDevice(NamedTuple):
    pid: int
    host: str
    device: int
    """A GPU index, or :data:`CPU_DEVICE`."""
    name: str
    """The device's name as its own rank reads it (a GPU's model, the CPU's model for a CPU rank)."""
    address: str = ""
    """A GPU's PCI address as its own rank reads it (domain:bus:device, nccl-tests' ``[0000:1b:00]``), or ''."""


def encode_name(name: str, slots: int = _NAME_SLOTS) -> list[int]:
    """``name``'s first ``7 * slots`` UTF-8 bytes (a character never split; NULs dropped, other characters that do
    not print, a newline among them, a space: a name never makes a line of its own) in ``slots`` slots."""
    size = slots * _BYTES_PER_SLOT
    name = "".join(c if c.isprintable() else " " for c in name.replace("\0", ""))
    raw = name.encode("utf-8")[:size].decode("utf-8", "ignore").encode("utf-8").ljust(size, b"\0")
    return [int.from_bytes(raw[k:k + _BYTES_PER_SLOT], "big") for k in range(0, size, _BYTES_PER_SLOT)]


def decode_name(slots: list[int]) -> str:
    raw = b"".join(int(v).to_bytes(_BYTES_PER_SLOT, "big") for v in slots)
    return raw.rstrip(b"\0").decode("utf-8", "replace")


def own_device_name(backend: Any, device: int) -> str:
    """What this process calls one of its ranks' devices: the backend's name of a GPU (``device_name``), the
    CPU's model for a CPU rank."""
    if device == CPU_DEVICE:
        return cpu_model() or "CPU"
    name = getattr(backend, "device_name", None)
    try:  # (a rank that raised here would leave the others waiting in the agreement)
        return (name(device) if callable(name) else None) or "GPU"
    except Exception:
        return "GPU"


def own_device_address(backend: Any, device: int) -> str:
    """A GPU's PCI address as the backend reads it (``device_address``), '' where it has none."""
    address = getattr(backend, "device_address", None)
    try:
        return (address(device) if callable(address) and device != CPU_DEVICE else None) or ""
    except Exception:
        return ""


def gather_rank_devices(backend: Any, info: dict) -> list[RankDevice]:
    """:class:`RankDevice` of every rank, by rank (a collective: every rank calls it)."""
    world = info["world_size"]
    mine = getattr(backend, "rank_devices", lambda: [(info["rank"], CPU_DEVICE)])()
    values = [0] * (_SLOTS * world)
    for rank, device in mine:
        values[_SLOTS * rank:_SLOTS * (rank + 1)] = [
            os.getpid(), device + 1, *encode_name(own_device_name(backend, device)),
            *encode_name(own_device_address(backend, device), _ADDRESS_SLOTS)]
    got = backend.agree_max(values)
    names = 2 + _NAME_SLOTS
    return [RankDevice(got[_SLOTS * r], info["hosts"][r], got[_SLOTS * r + 1] - 1,
                       decode_name(got[_SLOTS * r + 2:_SLOTS * r + names]),
                       decode_name(got[_SLOTS * r + names:_SLOTS * (r + 1)])) for r in range(world)]
