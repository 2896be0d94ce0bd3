"""Memory budgets (pybench.io.memory): the least of free RAM, ulimit -v and cgroup memory.max,
checked before anything large is allocated."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from pybench.errors import SizeError
from pybench.io.memory import check_budget
from pybench.measure.benchmark import BenchConfig, check_memory, in_flight_bytes_per_rank


def test_a_request_over_the_budget_is_refused_in_one_line_naming_the_remedy():
    check_budget(700, "a thing", "use less", available=1000)
    with pytest.raises(SizeError, match=r"a thing needs .* GiB, but .* GiB is available .*; use less") as info:
        check_budget(900, "a thing", "use less", available=1000)
    assert "\n" not in str(info.value)


def test_the_address_space_limit_counts_not_only_free_memory():
    code = ("import resource; from pybench.io.memory import memory_left, address_space_left; "
            "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "left = memory_left(); print(left, address_space_left())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    left, space = int(out[0]), int(out[1])
    assert 0 < space < 3 << 30 and left <= space


def _p2p(test: str, window: int, size: int) -> BenchConfig:
    return BenchConfig(benchmark=f"p2p_{test}", sizes=(size,), window=window)


def test_a_p2p_window_counts_every_message_in_flight():
    one = in_flight_bytes_per_rank(_p2p("bw", 1, 64 << 10), 64 << 10)
    assert in_flight_bytes_per_rank(_p2p("bw", 65536, 64 << 10), 64 << 10) == 65536 * one
    assert in_flight_bytes_per_rank(_p2p("bibw", 65536, 64 << 10), 64 << 10) == 2 * 65536 * one
    assert in_flight_bytes_per_rank(_p2p("latency", 65536, 64 << 10), 64 << 10) == 0


def test_p2p_bibw_window_65536_of_64k_is_refused_before_allocating():
    # 2 x 64 KiB of buffers per rank fit anywhere; 65536 messages of 64 KiB in flight both ways do not.
    with pytest.raises(SizeError, match="--window 65536"):
        check_memory(_p2p("bibw", 65536, 64 << 10), world=2, ranks_on_this_host=2, available=22 << 30)
    check_memory(_p2p("bibw", 64, 64 << 10), world=2, ranks_on_this_host=2, available=22 << 30)


def test_under_a_3_gib_limit_the_cli_refuses_the_window_in_one_line(tmp_path):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    p = subprocess.run([sys.executable, "-m", "pybench", "p2p", "--test", "bw", "--window", "65536", "--sizes", "64K",
                        "--np", "2", "--warmup", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       preexec_fn=limit)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "--window 65536" in p.stderr and "ulimit -v" in p.stderr


def test_a_json_file_too_big_to_parse_in_the_memory_left_is_refused_before_reading(tmp_path, monkeypatch):
    import pybench.io.memory as memory
    from pybench.io.files import read_json
    f = tmp_path / "big.json"
    f.write_text("[" + ",".join(["1.5"] * 100_000) + "]")
    assert len(read_json(f)) == 100_000
    monkeypatch.setattr(memory, "memory_left", lambda: 1 << 20)  # 1 MiB left: 6 x 400 kB does not fit
    with pytest.raises(SizeError, match=r"reading .*big\.json .* needs"):
        read_json(f)
