"""Fakes of absent hardware for system detection: sysfs trees, an NVML module."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

SWITCH_BUS = "0000:c9:00.0"


# --- fakes of absent hardware -------------------------------------------------------------------

def ib_port(sysfs: Path, dev: str, port: str = "1", rate: str = "400 Gb/sec (4X NDR)", state: str = "4: ACTIVE",
            layer: str = "InfiniBand", driver: str = "mlx5_core", netdevs: tuple[str, ...] = ()) -> Path:
    where = sysfs / "class" / "infiniband" / dev / "ports" / port
    where.mkdir(parents=True)
    for name, text in (("rate", rate), ("state", state), ("link_layer", layer)):
        (where / name).write_text(text + "\n")
    drivers = sysfs / "bus" / "pci" / "drivers" / driver
    drivers.mkdir(parents=True, exist_ok=True)
    device = sysfs / "class" / "infiniband" / dev / "device"
    device.mkdir(exist_ok=True)
    if not (device / "driver").exists():
        (device / "driver").symlink_to(drivers)
    for n in netdevs:
        (device / "net" / n).mkdir(parents=True)
    return where


def netdev(sysfs: Path, name: str, speed: str = "25000", operstate: str = "up", type_: str = "1",
           virtual: bool = False) -> Path:
    real = sysfs / "devices" / ("virtual" if virtual else "pci0000:00/0000:00:03.0") / "net" / name
    real.mkdir(parents=True)
    for attr, text in (("speed", speed), ("operstate", operstate), ("type", type_)):
        (real / attr).write_text(text + "\n")
    (sysfs / "class" / "net").mkdir(parents=True, exist_ok=True)
    (sysfs / "class" / "net" / name).symlink_to(real)
    return real


class NVMLError(Exception):
    pass


def fake_nvml(gpus: list[dict], remote_type_error: bool = False, init_error: str | None = None) -> SimpleNamespace:
    """pynvml's calls that the probe makes, answering for ``gpus``: {bus, name, links: [(version,
    remote_type, peer_bus)], pcie: (generation, width)}."""
    def link(h, n):
        if n >= len(gpus[h]["links"]):
            raise NVMLError("Not Supported")
        return gpus[h]["links"][n]

    def remote_type(h, n):
        if remote_type_error:
            raise NVMLError("Function Not Found")
        return link(h, n)[1]

    def init():
        if init_error:
            raise NVMLError(init_error)

    return SimpleNamespace(
        NVMLError=NVMLError, NVML_NVLINK_MAX_LINKS=36, nvmlInit=init, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(gpus), nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: gpus[h]["name"],
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=gpus[h]["bus"].encode()),
        nvmlDeviceGetNvLinkState=lambda h, n: (link(h, n), 1)[1],
        nvmlDeviceGetNvLinkVersion=lambda h, n: link(h, n)[0],
        nvmlDeviceGetNvLinkRemoteDeviceType=remote_type,
        nvmlDeviceGetNvLinkRemotePciInfo=lambda h, n: SimpleNamespace(busId=link(h, n)[2]),
        nvmlDeviceGetMaxPcieLinkGeneration=lambda h: gpus[h].get("pcie", (4, 16))[0],
        nvmlDeviceGetMaxPcieLinkWidth=lambda h: gpus[h].get("pcie", (4, 16))[1])


def bus(i: int) -> str:
    return f"00000000:{0x10 + i:02x}:00.0"


def switched_gpus(n: int = 8, links: int = 18, version: int = 6, name: str = "NVIDIA H100 80GB HBM3") -> list[dict]:
    return [{"bus": bus(i), "name": name, "links": [(version, 2, SWITCH_BUS)] * links} for i in range(n)]
