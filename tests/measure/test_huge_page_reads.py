"""The huge-page backing of a size's buffers is read (from /proc/self/smaps, tens of milliseconds
per read on an MPI rank) only where a buffer can hold a huge page, and only by rank 0, whose
record is the one kept: a long sweep of small sizes pays nothing for it."""

import json
from pathlib import Path

import pytest
from conftest import run_under_mpiexec

from pybench.measure.benchmark import HUGE_PAGE_BYTES, BenchConfig, measure_size, run_sizes
from pybench.measure.stopping import StopRule


class CountingBench:
    """Fixed samples; counts how often the huge-page backing is asked for."""

    reads = 0

    def warmup(self, n):
        pass

    def check(self, iters):
        return 0

    def measure(self, n_samples, ops_per_sample):
        return [1e-5] * n_samples, 1e-5 * n_samples * ops_per_sample

    @property
    def huge_page_fraction(self):
        CountingBench.reads += 1
        return 0.5


def _cfg(benchmark="allreduce", sizes=(4096,)):
    return BenchConfig(benchmark=benchmark, sizes=sizes, timing="per-op", warmup=0, check_iters=0,
                       stop=StopRule(precision=None, fixed_iters=6))


def test_small_buffers_are_not_read_and_recorded_as_unknown():
    CountingBench.reads = 0
    rec = measure_size(_cfg(), CountingBench(), 4096, 2)
    assert rec.huge_page_fraction is None and CountingBench.reads == 0


def test_buffers_of_a_huge_page_are_read():
    CountingBench.reads = 0
    rec = measure_size(_cfg(), CountingBench(), HUGE_PAGE_BYTES, 2)
    assert rec.huge_page_fraction == 0.5 and CountingBench.reads == 1


def test_the_larger_buffer_decides():
    # all-gather's output buffer is the size; its input is a world's share of it
    CountingBench.reads = 0
    rec = measure_size(_cfg("allgather"), CountingBench(), HUGE_PAGE_BYTES, 4)
    assert rec.huge_page_fraction == 0.5
    rec = measure_size(_cfg("p2p_bw"), CountingBench(), HUGE_PAGE_BYTES - 1, 2)
    assert rec.huge_page_fraction is None and CountingBench.reads == 1


def test_only_the_rank_that_keeps_the_record_reads_it():
    sizes = (HUGE_PAGE_BYTES, 2 * HUGE_PAGE_BYTES)
    for is_root, reads in ((False, 0), (True, 2)):
        CountingBench.reads = 0
        records = []
        run_sizes(_cfg(sizes=sizes), 2, records.append, lambda cfg, size: CountingBench(), read_huge_pages=is_root)
        assert CountingBench.reads == reads
        assert [r.huge_page_fraction for r in records] == ([0.5, 0.5] if is_root else [None, None])


@pytest.mark.mpi
def test_the_native_reader_reads_smaps_once_for_both_buffers(tmp_path, native):
    out = tmp_path / "reads.json"
    script = Path(__file__).parents[1] / "mpi_scripts" / "smaps_reads.py"
    proc = run_under_mpiexec(script, [str(out)], cwd=tmp_path, nprocs=1)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(out.read_text())
    # one read of the file (it changes a little between reads), where each buffer used to read it
    assert got["read_bytes"] < 1.5 * got["smaps_bytes"], got
    assert 0.0 <= got["fraction"] <= 1.0


def test_a_size_without_an_in_place_form_keeps_its_in_place_block_empty():
    # make_in_place answers None for a collective with no one-buffer form (NCCL's alltoall): the size is
    # measured once and its in-place fields stay unset (N/A in the table), as other sizes get both.
    records = []
    run_sizes(_cfg(sizes=(8, 16)), 2, records.append, lambda cfg, size: CountingBench(), read_huge_pages=False,
              make_in_place=lambda cfg, size: CountingBench() if size == 8 else None)
    assert [r.in_place_time_s for r in records] == [1e-5, None]
    assert records[1].time_s == 1e-5 and records[1].in_place_busbw_gbps is None
