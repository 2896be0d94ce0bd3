"""Logs as clients' tools and job launchers write them, each synthesised here in that shape:
rccl-tests' JSON array (``-Z json``) and the rank layout of its MPI build (ranks x gpusPerRank),
nccl-tests' ``-C 1`` cputime table, an ``srun -l`` job whose script printed a long unlabelled
preamble, Open MPI tags behind a collector's indent or ``--timestamp-output``, and ``kubectl logs
--timestamps``. Rows are consistent: algbw = size/time/1e3 (GB/s, bytes over microseconds) and
busbw = algbw x the collective's bus factor."""

from __future__ import annotations

import json

import pytest

from pybench.cli.main import main as main_for_tests
from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements, sniff_format

SIZES = [1 << k for k in range(10, 29, 2)]   # 1 KiB .. 256 MiB
FACTORS = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
           "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}
PROGRAMS = {"allreduce": "all_reduce_perf", "broadcast": "broadcast_perf", "allgather": "all_gather_perf"}


def _time_us(size: int, in_place: int = 0) -> float:
    return 20.0 + size / 1e5 + in_place


def _bw(coll: str, world: int, size: int, t_us: float) -> tuple[float, float]:
    alg = size / t_us / 1e3
    return alg, alg * FACTORS.get(coll, lambda n: 1.0)(world)


# --- rccl-tests' JSON ---------------------------------------------------------------------------

def _rccl_object(name: str, coll: str, world: int, size: int, in_place: int, layout: dict) -> str:
    """One row as rccl-tests' Reporter writes it: keys in its order, numbers with 6 decimals, wrong quoted."""
    t = _time_us(size, in_place)
    alg, bus = _bw(coll, world, size, t)
    fields = "".join(f'"{k}":{v}, ' for k, v in layout.items())
    return (f'{{"numCycle":0, "name":"{name}", {fields}"size":{size}, "type":"float", "redop":"sum", '
            f'"inPlace":{in_place}, "time":{t:f}, "algBw":{alg:f}, "busBw":{bus:f}, "wrong":"0"}}')


def _mpi_layout(ranks: int, gpus_per_rank: int, nodes: int = 1) -> dict:
    return {"nodes": nodes, "ranks": ranks, "ranksPerNode": ranks // nodes, "gpusPerRank": gpus_per_rank}


def test_rccl_tests_json_array_is_read_like_its_json_lines(tmp_path, capsys):
    # current rccl-tests -Z json: "[", one object to a line followed by a comma (but the last), "]"
    objs = [_rccl_object("AllReduce", "allreduce", 8, s, ip, _mpi_layout(8, 1)) for s in SIZES for ip in (0, 1)]
    path = tmp_path / "rccl_ar.json"
    path.write_text("[\n" + ",\n".join(objs) + "\n]\n")
    assert sniff_format(path.read_text()) == "rccl-tests-jsonl"
    (m,) = load_measurements(path)
    assert (m.source, m.collective, m.world_size, m.dtype, m.redop) == ("rccl-tests", "allreduce", 8, "float32", "sum")
    assert m.size_bytes.tolist() == SIZES
    assert m.time_s[0] == pytest.approx(_time_us(SIZES[0]) * 1e-6)
    assert m.time_in_place_s[-1] == pytest.approx(_time_us(SIZES[-1], 1) * 1e-6)
    assert any(n.startswith("world size 8 from busbw/algbw") for n in m.notes), m.notes
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 0
    capsys.readouterr()
    # an array of one row
    path.write_text("[\n" + objs[-2] + "\n]\n")
    (one,) = load_measurements(path)
    assert (one.collective, one.world_size, one.size_bytes.tolist()) == ("allreduce", 8, [SIZES[-1]])
    # a row that is not one is named by its line (the "[" is line 1)
    path.write_text("[\n" + ",\n".join(objs[:3] + ['{"name":"AllReduce", "size":64}']) + "\n]\n")
    with pytest.raises(FileFormatError, match=r"rccl_ar.json: line 5: .*time"):
        load_measurements(path)


@pytest.mark.parametrize(("ranks", "gpus_per_rank", "nodes"), [(1, 8, 1), (2, 8, 2), (16, 1, 2)])
def test_rccl_tests_mpi_build_world_is_ranks_times_gpus_per_rank(tmp_path, ranks, gpus_per_rank, nodes):
    # an MPI build's "ranks" counts processes, each driving gpusPerRank GPUs (-g 8): a broadcast's
    # busbw/algbw is 1 whatever the count, so these fields alone give the world
    world = ranks * gpus_per_rank
    path = tmp_path / "rccl_bcast.json"
    layout = _mpi_layout(ranks, gpus_per_rank, nodes)
    path.write_text("".join(_rccl_object("Broadcast", "broadcast", world, s, ip, layout) + "\n"
                            for s in SIZES for ip in (0, 1)))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.size_bytes.tolist()) == ("broadcast", world, SIZES)
    assert any(f"world size {world} from the 'ranks' x 'gpusPerRank' fields" in n for n in m.notes), m.notes
    # a build without MPI names one process's GPUs "gpus"
    path.write_text("".join(_rccl_object("Broadcast", "broadcast", 8, s, 0, {"gpus": 8}) + "\n" for s in SIZES))
    (m,) = load_measurements(path)
    assert m.world_size == 8 and "world size 8 from the 'gpus' field" in m.notes


# --- nccl-tests' text -------------------------------------------------------------------------

def _nccl_text(coll: str, ranks: int, hosts: int = 1, *, time_name: str = "time", cputime_us: float | None = None,
               redop: str = "sum", root: int = -1) -> str:
    """nccl-tests 2.x stdout, laid out with its printf widths; with ``cputime_us`` the time columns hold
    that host time (-C 1) while the bandwidths still come from the operation's own time."""
    per_host = ranks // hosts
    lines = [f"# Collective test starting: {PROGRAMS[coll]}",
             "# nThread 1 nGpus 1 minBytes 1024 maxBytes 268435456 step: 4(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on {f'node{r // per_host:02d}':>10} device {r % per_host:2d} "
              f"[0x{r % per_host:02x}] NVIDIA H100 80GB HBM3" for r in range(ranks)]
    def cells(*v: str) -> str:   # nccl-tests' header widths: "# %10s  %12s  %8s  %6s  %6s" then 2 x "  %7s ..."
        head = f"# {v[0]:>10}  {v[1]:>12}  {v[2]:>8}  {v[3]:>6}  {v[4]:>6}"
        return head + "".join(f"  {a:>7}  {b:>6}  {c:>6}  {d:>6}" for a, b, c, d in (v[5:9], v[9:13]))

    lines += ["#", f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}{'out-of-place':>23}{'in-place':>31}",
              cells("size", "count", "type", "redop", "root", *[time_name, "algbw", "busbw", "#wrong"] * 2),
              cells("(B)", "(elements)", "", "", "", *["(us)", "(GB/s)", "(GB/s)", ""] * 2)]
    for s in SIZES:
        row = f"{s:12d}  {s // 4:12d}  {'float':>8}  {redop:>6}  {root:6d}"
        for ip in (0, 1):
            t = _time_us(s, ip)
            alg, bus = _bw(coll, ranks, s, t)
            row += f"  {t if cputime_us is None else cputime_us:7.2f}  {alg:6.2f}  {bus:6.2f}  {0:6d}"
        lines.append(row)
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 42.0", "#"]
    return "\n".join(lines) + "\n"


def test_nccl_tests_cputime_table_is_read_with_a_note(tmp_path):
    # -C 1: the time columns are "cputime", the host's time (here the launch time, flat), while algbw
    # and busbw come from the operations' own time: they disagree, and that is not a wrong unit
    path = tmp_path / "cputime.log"
    path.write_text(_nccl_text("allreduce", 8, time_name="cputime", cputime_us=6.5))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class, m.dtype) == ("allreduce", 8, "intra-node", "float32")
    assert m.size_bytes.tolist() == SIZES
    assert m.time_s.tolist() == pytest.approx([6.5e-6] * len(SIZES))
    assert any("cputime" in n and "-C 1" in n for n in m.notes), m.notes
    # a plain table says nothing of it
    path.write_text(_nccl_text("allreduce", 8))
    assert not any("-C 1" in n for n in load_measurements(path)[0].notes)


def test_srun_labels_under_a_long_unlabelled_preamble_are_stripped(tmp_path):
    # a job script prints nvidia-smi and its environment itself (no label), then srun -l runs the test:
    # the labelled lines are fewer than half, but the table header is one of them
    preamble = ["+ nvidia-smi topo -m", "\tGPU0\tGPU1\tCPU Affinity"] + \
        [f"GPU{g}\t{'X' if g == 0 else 'NV18'}\t{'NV18' if g == 0 else 'X'}\t0-55" for g in range(2)] + \
        [f"SLURM_VAR_{k}=value{k}" for k in range(150)] + ["12:00:01 up 3 days,  load average: 0.00"]
    body = _nccl_text("allreduce", 16, hosts=2)
    path = tmp_path / "slurm-1234.out"
    path.write_text("\n".join(preamble) + "\n" + "".join(f"0: {ln}\n" for ln in body.splitlines()))
    assert sniff_format(path.read_text()) == "nccl-tests"
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class) == ("allreduce", 16, "inter-node")
    assert m.size_bytes.tolist() == SIZES
    assert "16 ranks on 2 host(s) per the Rank lines" in m.notes


OMPI_LABELS = {"indented": "        [1,0]<stdout>:", "tab": "\t[1,0]<stdout>: ",
               "timestamp-output": "Wed May  1 12:00:00 2024[1,0]<stdout>:"}


@pytest.mark.parametrize("label", OMPI_LABELS.values(), ids=OMPI_LABELS.keys())
def test_open_mpi_tags_behind_an_indent_or_a_timestamp_are_stripped(tmp_path, label):
    path = tmp_path / "ompi.log"
    path.write_text("".join(f"{label}{ln}\n" for ln in _nccl_text("allgather", 8, redop="none").splitlines()))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class, m.size_bytes.tolist()) == ("allgather", 8, "intra-node", SIZES)
    assert m.redop == "" and "8 ranks on 1 host(s) per the Rank lines" in m.notes


@pytest.mark.parametrize("stamp", ["2024-05-01T12:00:{s:02d}.123456789Z", "2024-05-01T12:00:{s:02d}+02:00"])
def test_kubectl_timestamps_are_stripped(tmp_path, stamp):
    # kubectl logs --timestamps (and docker logs -t): an RFC 3339 time and a space before every line
    lines = _nccl_text("broadcast", 4, root=0, redop="none").splitlines()
    path = tmp_path / "pod.log"
    path.write_text("".join(f"{stamp.format(s=k % 60)} {ln}\n" for k, ln in enumerate(lines)))
    (m,) = load_measurements(path)
    assert (m.collective, m.world_size, m.link_class, m.size_bytes.tolist()) == ("broadcast", 4, "intra-node", SIZES)
    assert m.time_s[0] == pytest.approx(_time_us(SIZES[0]) * 1e-6, abs=5e-9)   # printed to 0.01 us
    # a malformed row is still named by its own line (the last row is 4 lines from the end)
    toks = lines[-5].split()
    lines[-5] = lines[-5].replace(f" {toks[7]} ", " x.yz ", 1)
    path.write_text("".join(f"{stamp.format(s=0)} {ln}\n" for ln in lines))
    with pytest.raises(FileFormatError, match=rf"pod.log: line {len(lines) - 4}: .*not numbers"):
        load_measurements(path)


def test_a_json_array_that_is_not_rccl_tests_is_refused_in_one_line(tmp_path):
    path = tmp_path / "other.json"
    path.write_text("[\n" + json.dumps({"a": 1}) + "\n]\n")
    with pytest.raises(FileFormatError, match=r"other.json: line 2: .*rccl-tests"):
        load_measurements(path)


def test_rccl_tests_json_of_an_mpi_build_gives_its_node_count(tmp_path, capsys):
    """An MPI build's rows carry ``nodes``: the fit takes its node count from them (no --nodes needed)."""
    objs = [_rccl_object("AllReduce", "allreduce", 16, s, 0, _mpi_layout(16, 1, nodes=2)) for s in SIZES]
    path = tmp_path / "rccl_2nodes.json"
    path.write_text("[\n" + ",\n".join(objs) + "\n]\n")
    (m,) = load_measurements(path)
    assert "16 ranks on 2 host(s) per the 'nodes' field" in m.notes
    assert main_for_tests(["fit", str(path), "-o", str(tmp_path / "m.json")]) == 0
    assert "1 topology model(s)" in capsys.readouterr().out


def test_ray_and_skypilot_worker_labels_are_stripped(tmp_path):
    """SkyPilot runs nccl-tests through Ray: every line reads "(head, rank=0, pid=3808) [1,0]<stdout>:..."."""
    from conftest import SHARED_DATA

    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    (plain,) = load_measurements(log)
    labelled = tmp_path / "sky.log"
    labelled.write_text("(worker1, rank=1, pid=2769, ip=10.100.10.12) Worker nodes\n" + "".join(
        f"(head, rank=0, pid=3808) [1,0]<stdout>:{line}\n" for line in log.read_text().splitlines()))
    (m,) = load_measurements(labelled)
    assert (m.collective, m.world_size, m.size_bytes.tolist()) == (plain.collective, plain.world_size,
                                                                    plain.size_bytes.tolist())
    assert m.notes == plain.notes


def test_a_log_quoted_in_a_markdown_reply_is_read_as_the_log(tmp_path):
    """A GitHub reply quotes the log it answers ("> " before every line, nested "> > " in a reply to a reply);
    it was refused as no recognised benchmark log."""
    from conftest import SHARED_DATA

    log = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"
    (plain,) = load_measurements(log)
    for quote in ("> ", "> > ", ">"):
        quoted = tmp_path / "reply.md"
        quoted.write_text("".join(f"{quote}{line}\n" for line in log.read_text().splitlines()))
        (m,) = load_measurements(quoted)
        assert (m.collective, m.world_size, m.size_bytes.tolist(), m.time_s.tolist()) == (
            plain.collective, plain.world_size, plain.size_bytes.tolist(), plain.time_s.tolist())
