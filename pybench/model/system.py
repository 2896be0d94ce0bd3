"""A system description: the hardware a collective runs on, as data (GPUs, fabric, NICs).

Named systems are JSON files in ``pybench/model/systems/``, each citing the public specification
its figures come from; a user's own machine is a file of the same shape (``--system FILE``).
Descriptions are validated by pydantic (a maintained validator: typed, bounded, one line per
error), so a bad one is refused before it prices anything.

What the model takes from a description:

* the inter-node link of a layout that was never measured across nodes: every NIC of a node
  counts (``nics_per_node x nic_Gbps``), not one port, at the efficiency that real multi-node
  logs reach (:mod:`pybench.model.calibration`);
* the intra-node link of a node never measured, from its fabric's per-GPU rate;
* whether a GPU count never measured inside a node is determined at all: through NVSwitch every
  GPU count sees the same per-GPU rate, so other counts follow from the algorithm; through direct
  NVLink links (a hybrid cube-mesh, or 4 GPUs linked pairwise) or PCIe, a subset of the GPUs has
  a subset of the links, and only a measurement at that count says what it gets;
* how large the NVLink domain is (GB200 NVL72: 72 GPUs over 18 trays), which decides whether
  "nodes" talk over NVLink or over the network.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pybench.errors import FileFormatError, UsageError
from pybench.io.files import read_json

SYSTEMS_DIR = Path(__file__).with_name("systems")

# Backends whose ranks are GPUs ("" when the caller did not say): a description's GPUs, fabric and NIC
# placement are theirs; CPU ranks (MPI) are processes sharing one memory and every NIC of their node.
GPU_BACKENDS = ("nccl", "")
# Direct links between every pair of GPUs (NVLink on 4-GPU boards, AMD Infinity Fabric on MI300-class nodes)
# give a subset of GPUs a subset of the links, as a mesh does: only a switch serves every count alike.
Fabric = Literal["nvswitch", "nvlink-all-to-all", "infinity-fabric-all-to-all", "nvlink-mesh", "pcie"]
# Fabrics through which any number of GPUs of a node reaches the full per-GPU rate.
SWITCHED_FABRICS = ("nvswitch",)


# The most GPUs one NVLink domain joins: NVIDIA's NVLink Switch System connects up to 576 GPUs (GB200 NVL576). A
# fit over more ranks whose bus bandwidth outruns any NIC crossed a network between NVLink domains too.
LARGEST_NVLINK_DOMAIN_GPUS = 576


NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.+()/:,@-]*")
"""A description's name: printable, one line, no terminal escapes (it heads every table it prices)."""


class SystemDescription(BaseModel):
    """One kind of machine, per node, with the public source of its figures."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=80)
    description: str = Field(default="", max_length=400)
    source: str = Field(min_length=1, max_length=800)
    gpus_per_node: int = Field(ge=1, le=1024)
    intra_fabric: Fabric
    # (lower bounds: 10 Mb/s, the slowest Ethernet; below, times overflow what a float holds)
    intra_GBps_per_gpu: float = Field(ge=0.01, le=1e5, allow_inf_nan=False)
    """Per direction, per GPU, as vendors quote NVLink (GB/s = 1e9 B/s)."""
    nics_per_node: int = Field(ge=1, le=1024)
    nic_Gbps: float = Field(ge=0.01, le=1e5, allow_inf_nan=False)
    """Per NIC port and direction, in Gbit/s as vendors quote it."""
    nic_kind: Literal["infiniband", "roce", "ethernet", "efa", "slingshot"] = "infiniband"
    rail_optimised: bool = False
    nvlink_domain_gpus: int | None = Field(default=None, ge=1, le=LARGEST_NVLINK_DOMAIN_GPUS)
    """GPUs that share one NVLink domain (NVL72: 72); by default one node."""
    in_switch_reduction: bool = False
    """The NVSwitches reduce (NVLink SHARP, third-generation NVSwitch on: H100, H200, B200), which NCCL's NVLS
    all-reduce runs on (:mod:`pybench.model.switch_reduction`)."""

    @field_validator("name")
    @classmethod
    def _one_line_name(cls, name: str) -> str:
        if not NAME_PATTERN.fullmatch(name):
            raise ValueError("a name is letters, digits and ' _.+()/:,@-' on one line, from a letter or digit")
        return name

    @model_validator(mode="after")
    def _domain_holds_whole_nodes(self) -> SystemDescription:
        domain = self.nvlink_domain_gpus
        if domain is not None and (domain < self.gpus_per_node or domain % self.gpus_per_node):
            raise ValueError(f"nvlink_domain_gpus {domain} must be a multiple of gpus_per_node "
                             f"{self.gpus_per_node}")
        if self.in_switch_reduction and self.intra_fabric != "nvswitch":
            raise ValueError(f"in_switch_reduction needs intra_fabric nvswitch, not {self.intra_fabric}: only "
                             f"NVSwitches reduce")
        return self

    @property
    def nic_Bps_per_node(self) -> float:
        """Every NIC of a node together, per direction, in bytes per second."""
        return self.nics_per_node * self.nic_Gbps * 1e9 / 8.0

    @property
    def intra_Bps_per_gpu(self) -> float:
        return self.intra_GBps_per_gpu * 1e9

    @property
    def switched(self) -> bool:
        """Whether every GPU count inside a node sees the full per-GPU rate (NVSwitch)."""
        return self.intra_fabric in SWITCHED_FABRICS

    def domain_gpus(self) -> int:
        return self.nvlink_domain_gpus or self.gpus_per_node

    def hosts_per_domain(self) -> int:
        """Hosts (trays) one NVLink domain spans: 1 unless the domain is larger than a node."""
        return self.domain_gpus() // self.gpus_per_node

    def per_nvlink_domain(self) -> SystemDescription:
        """This system with one NVLink domain as its node (the GPUs and NICs of all its hosts): what the
        network joins. Itself when a domain is one node."""
        hosts = self.hosts_per_domain()
        if hosts == 1:
            return self
        data = {**self.model_dump(), "gpus_per_node": self.domain_gpus(), "nics_per_node": self.nics_per_node * hosts,
                "nvlink_domain_gpus": None,
                "description": f"{self.description} (per NVLink domain of {hosts} hosts)"[:400]}
        try:
            return SystemDescription.model_validate(data)
        except ValidationError as exc:
            raise UsageError(f"{self.name}: one NVLink domain of {hosts} hosts does not make a node this model can "
                             f"hold ({exc.errors()[0]['msg']})") from None

    def check_layout(self, world: int, nodes: int) -> None:
        """UsageError when ``world`` ranks on ``nodes`` nodes cannot run on this system (one GPU per rank)."""
        if nodes < 1 or world < nodes or world % nodes:
            raise UsageError(f"{world} ranks on {nodes} node(s) is not a whole number of ranks per node; "
                             f"give --world as ranks per node x --nodes")
        if world // nodes > self.gpus_per_node:
            raise UsageError(f"{world // nodes} ranks per node exceed the {self.gpus_per_node} GPUs per node of "
                             f"{self.name}; give more --nodes or another --system")

    def summary(self) -> str:
        """One line: what the description says, for reports and notes."""
        domain = f", NVLink domain {self.nvlink_domain_gpus} GPUs" if self.nvlink_domain_gpus else ""
        domain += " (a node here is one NVLink domain)" if "per NVLink domain" in self.description else ""
        return (f"{self.name}: {self.gpus_per_node} GPUs per node, {self.intra_fabric} at "
                f"{self.intra_GBps_per_gpu:g} GB/s per GPU, {self.nics_per_node} x {self.nic_Gbps:g} Gb/s "
                f"{self.nic_kind} per node{domain}")


def named_systems() -> list[str]:
    """The names of the systems pybench ships a description of."""
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.json"))


@lru_cache(maxsize=64)
def most_ports_per_gpu(nic_Bps: float) -> float:
    """The most NIC ports of rate ``nic_Bps`` (per direction) per GPU that a named system has, at least 1.

    A link preset is one port's rate, not a count: nodes built on 100 Gb/s ports hold up to four per
    GPU (AWS p5: 32 for 8 GPUs), while 400 Gb/s nodes hold one. The named descriptions (public
    specifications) bound how many ports of a rate a rank may drive."""
    counts = [d.nics_per_node / d.gpus_per_node for d in map(_named, named_systems())
              if abs(d.nic_Gbps * 1e9 / 8.0 - nic_Bps) <= 1e-6 * nic_Bps]
    return max([1.0, *counts])


@lru_cache(maxsize=1)  # (asked at every layout a prediction weighs: the files are read once)
def most_gpus_per_node() -> int:
    """The most GPUs one node of a named system holds (public specifications): a one-node fit asked for more
    ranks than that and than it measured is not asked about one node unless the caller says so."""
    return max(_named(name).gpus_per_node for name in named_systems())


SYSTEM_FILE_BYTES = 1 << 20
"""A description is a few hundred bytes: a file past this is the wrong file, refused before it is read."""


def system_from_dict(data: object, source: str) -> SystemDescription:
    """A validated description; FileFormatError naming the first problem otherwise."""
    try:
        return SystemDescription.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the description"
        raise FileFormatError(f"{source}: system description: {where}: {first['msg']} "
                              f"(see pybench/model/systems/*.json for the fields)") from None


@lru_cache(maxsize=64)
def _named(name: str) -> SystemDescription:
    path = SYSTEMS_DIR / f"{name}.json"
    return system_from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))


def load_system(name_or_path: str | Path) -> SystemDescription:
    """A named system (``dgx-h100``) or a description file; UsageError listing the names otherwise."""
    key = str(name_or_path).strip()
    if key.lower() in named_systems():
        return _named(key.lower())
    path = Path(key)
    if key.endswith(".json") or path.exists():
        return system_from_dict(read_json(path, SYSTEM_FILE_BYTES), key)
    raise UsageError(f"unknown system {key!r}: give a description file (JSON) or one of "
                     f"{', '.join(named_systems())}")
