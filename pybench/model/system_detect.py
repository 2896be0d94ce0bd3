"""This machine as a system description: what :mod:`pybench.measure.system_probe` read from it
(NVML, sysfs, NCCL's topology dump), checked by the same validator as a named system.

A description needs every figure the model prices with (GPUs per node, fabric and its per-GPU
rate, NICs per node and their rate). When one was not detected the answer is one line naming it
and why, never a guessed value: a CPU-only host, or a virtual NIC that reports no rate, is not a
GPU system the model can price, and says so.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Mapping
from typing import Any

from pybench import __version__
from pybench.errors import FileFormatError, UsageError
from pybench.measure.system_probe import probe_system
from pybench.model.system import SystemDescription, system_from_dict

# The figures a description cannot do without, in SystemDescription's own names.
REQUIRED = ("gpus_per_node", "intra_fabric", "intra_GBps_per_gpu", "nics_per_node", "nic_Gbps")
OPTIONAL = ("nic_kind", "in_switch_reduction")


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def description_dict(probe: Mapping[str, Any], host: str | None = None, machine: str = "this host") -> dict[str, Any]:
    """The detected node as a description file's content; UsageError naming what was not detected."""
    fields = _mapping(probe.get("fields"))
    missing = [name for name in REQUIRED if name not in fields]
    if missing:
        reasons = _mapping(probe.get("not_detected"))
        by_reason: dict[str, list[str]] = {}
        for name in missing:  # one GPU-less host: one reason for three fields, said once
            by_reason.setdefault(str(reasons.get(name, "not detected")), []).append(name)
        why = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
        raise UsageError(f"{machine} cannot be described as a GPU system: {why}. Start from a named system "
                         f"(`pybench system dgx-h100 > mine.json`) and edit it, then pass --system mine.json")
    host = host or platform.node() or "this-host"
    sources = _mapping(probe.get("from"))
    provenance = "; ".join(f"{name} from {sources.get(name, '?')}" for name in (*REQUIRED, *OPTIONAL)
                           if name in fields)
    unknown = sorted(str(k) for k in _mapping(probe.get("not_detected")))
    description = f"{fields.get('gpu_name', 'GPUs')}, detected on {host}"
    if unknown:
        description += f"; not detected (file defaults apply): {', '.join(unknown)}"
    doc: dict[str, Any] = {
        "name": re.sub(r"[^A-Za-z0-9._-]", "-", f"detected-{host}")[:80],  # (a host's name may hold anything)
        "description": description[:400],
        "source": f"detected by pybench {__version__} on {host}: {provenance}"[:800],
        # as recorded: the validator, not a cast, says when a record (a result file) holds a bad value
        **{name: fields[name] for name in REQUIRED},
    }
    if fields.get("nic_kind"):
        doc["nic_kind"] = fields["nic_kind"]
    if isinstance(fields.get("in_switch_reduction"), bool) and fields.get("intra_fabric") == "nvswitch":
        doc["in_switch_reduction"] = fields["in_switch_reduction"]
    return doc


def description_from_probe(probe: Mapping[str, Any], host: str | None = None,
                           machine: str = "this host") -> SystemDescription:
    """The validated description of a probed node; UsageError in one line, naming ``machine``, when
    it cannot be one."""
    doc = description_dict(probe, host, machine)
    try:
        return system_from_dict(doc, "the detected system")
    except FileFormatError as exc:  # a detected figure outside the validator's bounds
        raise UsageError(str(exc)) from None


def detect_system(topology_dump: str | None = None, smi_timeout_s: float = 5.0) -> SystemDescription:
    """This machine's description (NVML, sysfs, NCCL's dump); UsageError saying what was not detected."""
    return description_from_probe(probe_system(topology_dump=topology_dump, smi_timeout_s=smi_timeout_s))


def recorded_probe(doc: object) -> Mapping[str, Any] | None:
    """The probe a pybench result recorded under ``environment.system`` (None when it records none)."""
    env = doc.get("environment") if isinstance(doc, Mapping) else None
    probe = env.get("system") if isinstance(env, Mapping) else None
    return probe if isinstance(probe, Mapping) and isinstance(probe.get("fields"), Mapping) else None


def recorded_system(doc: object, path: str) -> SystemDescription | None:
    """The description of the machine a pybench result ``doc`` (read from ``path``) was measured on.

    None when the result records no probe (an older pybench, another tool's file); UsageError when
    it records one that is not a describable GPU system (a CPU-only host), naming what is missing.
    """
    probe = recorded_probe(doc)
    if probe is None:
        return None
    hosts = doc.get("hosts") if isinstance(doc, Mapping) else None
    host = str(next(iter(hosts), "")) or None if isinstance(hosts, Mapping) and hosts else None
    return description_from_probe(probe, host=host, machine=f"the machine {path} was measured on")
