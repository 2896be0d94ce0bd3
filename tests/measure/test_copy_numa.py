"""Host buffers of the copy benchmark on the GPU's NUMA node (issue 15, item 10).

The NUMA unit (csrc/common/numa_memory.cpp, bound by csrc/cuda/numa_module.cpp)
needs no GPU: memory is bound with mbind and each page's node is read back with
move_pages, for real; sysfs is read from fake trees in tmp folders. The copy
records' host fields are checked with a stand-in for copy_times; the real copies
run in test_gpu_nccl.py on a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pybench._native import build_info
from pybench.errors import NativeError

PAGE = os.sysconf("SC_PAGE_SIZE")
BUS = "0000:3b:00.0"


@pytest.fixture(scope="module")
def numa():
    if build_info().get("cuda_module") != "ON":
        pytest.skip("pybench was built without the CUDA module (no nvcc at build time), which holds the NUMA unit")
    from pybench._native import cuda
    return cuda()


def fake_sysfs(root: Path, nodes: str | None = "0", devices: dict[str, str | None] | None = None) -> str:
    """A sysfs tree: ``nodes`` in has_memory (None: no node folder), ``devices`` bus id -> numa_node text."""
    if nodes is not None:
        (root / "devices/system/node").mkdir(parents=True)
        (root / "devices/system/node/has_memory").write_text(nodes + "\n")
    for bus, text in (devices or {}).items():
        (root / "bus/pci/devices" / bus).mkdir(parents=True)
        if text is not None:
            (root / "bus/pci/devices" / bus / "numa_node").write_text(text)
    return str(root)


def placed_pages_or_skip(numa, node: int, size: int, root: str = "/sys") -> list[int]:
    try:
        return numa.numa_placed_pages(node, size, root)
    except NativeError as exc:
        if "refuses memory policies" in str(exc):  # a container's seccomp profile: nothing to test here
            pytest.skip(str(exc))
        raise


# ---------------------------------------------------------------- placement, for real
def test_memory_on_node_0_is_there_page_by_page(numa):
    size = (8 << 20) + 1  # not a whole number of pages: the last, partial page is placed too
    pages = placed_pages_or_skip(numa, 0, size)
    assert len(pages) == -(-size // PAGE)
    assert set(pages) == {0}  # every page resident (no -ENOENT) and on node 0


def test_every_real_memory_node_holds_what_is_bound_to_it(numa):
    for node in numa.numa_memory_nodes():
        assert set(placed_pages_or_skip(numa, node, 4 * PAGE)) == {node}


@pytest.mark.parametrize("node", ["beyond", -1])
def test_a_node_that_does_not_exist_is_refused_in_one_line(numa, node):
    nodes = numa.numa_memory_nodes()
    bad = max(nodes) + 1 if node == "beyond" else node
    with pytest.raises(NativeError, match=rf"NUMA node {bad} does not exist on this machine") as err:
        numa.numa_placed_pages(bad, 1 << 20)
    assert "\n" not in str(err.value) and f"nodes with memory: {', '.join(map(str, nodes))}" in str(err.value)
    with pytest.raises(NativeError, match="needs a positive size"):
        numa.numa_placed_pages(0, 0)


# ---------------------------------------------------------------- sysfs, from fake trees
def test_numa_node_of_a_pci_device_from_sysfs(numa, tmp_path):
    root = fake_sysfs(tmp_path, "0-1", {BUS: "1\n", "0000:5e:00.0": "-1\n", "0000:86:00.0": "abc\n",
                                        "0000:87:00.0": "", "0001:00:02.0": " 0 \n", "0000:af:00.0": None})
    assert numa.numa_node_of_pci(BUS, root) == (1, "")
    assert numa.numa_node_of_pci("00000000:3B:00.0", root) == (1, "")  # NVML's 8-digit domain, upper case
    assert numa.numa_node_of_pci("0001:00:02.0", root) == (0, "")
    node, why = numa.numa_node_of_pci("0000:5e:00.0", root)
    assert node == -1 and "no NUMA node (numa_node is -1)" in why
    for garbage in ("0000:86:00.0", "0000:87:00.0"):
        node, why = numa.numa_node_of_pci(garbage, root)
        assert node == -1 and "not a node number" in why and garbage in why
    node, why = numa.numa_node_of_pci("0000:af:00.0", root)  # device folder without numa_node
    assert node == -1 and "not in sysfs" in why
    node, why = numa.numa_node_of_pci("0000:d8:00.0", root)  # no such device at all
    assert node == -1 and "not in sysfs" in why


def test_bus_ids_are_spelled_as_sysfs_spells_them(numa):
    assert numa.numa_pci_address("00000000:3B:00.0") == BUS
    assert numa.numa_pci_address(" 0000:AF:1F.7\n") == "0000:af:1f.7"
    assert numa.numa_pci_address("10000:01:00.0") == "10000:01:00.0"  # VMD domains are wider
    for bad in ("gpu0", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8", "0000:zz:00.0", "3b:00.0.0", ""):
        with pytest.raises(NativeError, match="is not a PCI address") as err:
            numa.numa_pci_address(bad)
        assert "\n" not in str(err.value)


def test_memory_nodes_from_sysfs(numa, tmp_path):
    assert numa.numa_memory_nodes(fake_sysfs(tmp_path / "a", "0-1,4\n")) == [0, 1, 4]
    assert numa.numa_memory_nodes(fake_sysfs(tmp_path / "b", None)) == [0]  # a kernel without NUMA
    online_only = tmp_path / "c/devices/system/node"
    online_only.mkdir(parents=True)
    (online_only / "online").write_text("0,2\n")
    assert numa.numa_memory_nodes(str(tmp_path / "c")) == [0, 2]
    with pytest.raises(NativeError, match=r"has_memory holds '1-0', not a node list"):
        numa.numa_memory_nodes(fake_sysfs(tmp_path / "d", "1-0"))
    assert 0 in numa.numa_memory_nodes()  # the real machine


def test_real_pci_devices_read_as_their_sysfs_file_says(numa):
    devices = sorted(Path("/sys/bus/pci/devices").glob("*/numa_node"))[:5]
    if not devices:
        pytest.skip("no PCI devices in this machine's sysfs")
    for f in devices:
        assert numa.numa_node_of_pci(f.parent.name)[0] == int(f.read_text())


def test_where_a_gpus_host_buffers_go(numa, tmp_path):
    two = fake_sysfs(tmp_path / "two", "0-1", {BUS: "1", "0000:5e:00.0": "-1", "0000:86:00.0": "3"})
    assert numa.numa_host_placement(BUS, two) == (1, True, "gpu-local node 1")
    node, bind, text = numa.numa_host_placement("0000:5e:00.0", two)
    assert (node, bind) == (-1, False) and text.startswith("no NUMA affinity known (") and "is -1" in text
    node, bind, text = numa.numa_host_placement("0000:86:00.0", two)  # a memoryless node
    assert (node, bind) == (-1, False) and "node 3 has no memory; nodes with memory: 0, 1" in text
    one = fake_sysfs(tmp_path / "one", "0", {BUS: "0", "0000:5e:00.0": "-1"})
    assert numa.numa_host_placement(BUS, one) == (0, False, "one NUMA node (node 0)")
    assert numa.numa_host_placement("0000:5e:00.0", one) == (0, False, "one NUMA node (node 0)")


# ---------------------------------------------------------------- failures leak nothing
LEAK_CHILD = textwrap.dedent("""
    import json, resource, sys
    from pybench._native import cuda
    from pybench.errors import NativeError
    c, root, missing = cuda(), sys.argv[1], int(sys.argv[2])
    vm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmSize:")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
    def attempt(node, size, sysfs="/sys"):
        try:
            return "ok %d pages" % len(c.numa_placed_pages(node, size, sysfs))
        except NativeError as exc:
            return "NativeError: " + str(exc)
    out = {"huge": attempt(0, 1 << 40),
           # sysfs says `missing` has memory, the kernel does not: mbind fails after mmap, 40 x 64 MiB
           "after_mmap": [attempt(missing, 64 << 20, root) for _ in range(40)],
           "then": [attempt(0, 64 << 20) for _ in range(10)]}
    print(json.dumps(out))
""")


def test_failures_unmap_what_they_mapped(numa, tmp_path):
    missing = max(numa.numa_memory_nodes()) + 1
    root = fake_sysfs(tmp_path, f"0-{missing}")
    r = subprocess.run([sys.executable, "-c", LEAK_CHILD, root, str(missing)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["huge"].startswith("NativeError: mmap of 1099511627776 bytes for a NUMA-placed buffer failed: "
                                  "Cannot allocate memory") and "\n" not in out["huge"]
    if "refuses memory policies" in out["after_mmap"][0]:
        pytest.skip(out["after_mmap"][0])
    # Every attempt fails at mbind, none at mmap: 40 x 64 MiB never held under a 256 MiB headroom.
    assert all(m.startswith(f"NativeError: mbind(MPOL_PREFERRED) of {64 << 20} bytes to NUMA node {missing} failed")
               for m in out["after_mmap"]), out["after_mmap"][-1]
    assert out["then"] == [f"ok {(64 << 20) // PAGE} pages"] * 10


# ---------------------------------------------------------------- the copy records (no GPU: a stand-in)
def test_copy_records_say_where_the_host_buffer_was():
    from pybench.measure.gpu.copy_bench import NOT_REPORTED, host_buffer_lines, run_copies, table_lines
    placement = "gpu-local node 1 (mmap + mbind MPOL_PREFERRED, every page touched, cudaHostRegister)"

    def copy_times(kind, src, dst, size, n, ops, engine, bidirectional):
        host = kind in ("h2d", "d2h")
        return [size / 50e9] * n, False, 0, 1 if host else -1, placement if host else ""

    recs = run_copies(["d2d", "h2d", "d2h"], [0], [1 << 20], n_samples=2, copy_times=copy_times)
    assert [(r.kind, r.host_node, r.host_placement) for r in recs] == [
        ("d2d", None, ""), ("h2d", 1, placement), ("d2h", 1, placement)]
    assert recs[1].to_dict()["host_node"] == 1 and recs[1].to_dict()["host_placement"] == placement
    lines = table_lines(recs)
    assert len(lines) == 4 and lines[1].endswith("0") and lines[2].endswith("host node 1, gpu-local")
    assert host_buffer_lines(recs) == [f"# host buffers for gpu0: {placement}"]

    def unknown(kind, src, dst, size, n, ops, engine, bidirectional):
        return [size / 50e9] * n, False, 0, -1, "no NUMA affinity known (numa_node is -1); cudaHostAlloc"

    rec = run_copies(["h2d"], [0], [1 << 20], n_samples=2, copy_times=unknown)[0]
    assert rec.host_node is None and table_lines([rec])[1].endswith("host: no NUMA affinity known")

    def refused(kind, src, dst, size, n, ops, engine, bidirectional):  # mbind denied (a container's seccomp)
        return [size / 50e9] * n, False, 0, -1, "NUMA placement refused (gpu-local node 1 wanted; ...); cudaHostAlloc"

    rec = run_copies(["d2h"], [0], [1 << 20], n_samples=2, copy_times=refused)[0]
    assert rec.host_node is None and table_lines([rec])[1].endswith("host: NUMA placement refused")

    def three_values(kind, src, dst, size, n, ops, engine, bidirectional):  # a build before NUMA placement
        return [size / 50e9] * n, False, 0

    rec = run_copies(["d2h"], [0], [1 << 20], n_samples=2, copy_times=three_values)[0]
    assert (rec.host_node, rec.host_placement) == (None, NOT_REPORTED)
    assert table_lines([rec])[1].endswith("host node not reported")
