import pytest

from pybench.collectives import COLLECTIVES, canonical_dtype, canonical_op, get_collective
from pybench.errors import SizeError, UsageError


@pytest.mark.parametrize("world", [2, 3, 4, 8, 16, 64])
def test_busbw_factors_follow_nccl_tests(world):
    n = world
    expected = {
        "allreduce": 2 * (n - 1) / n,
        "allgather": (n - 1) / n,
        "reducescatter": (n - 1) / n,
        "alltoall": (n - 1) / n,
        "broadcast": 1.0,
        "sendrecv": 1.0,
    }
    assert set(expected) == set(COLLECTIVES)
    for name, factor in expected.items():
        assert COLLECTIVES[name].busbw_factor(world) == pytest.approx(factor, rel=1e-15)


def test_two_rank_allreduce_factor_is_one():
    assert COLLECTIVES["allreduce"].busbw_factor(2) == 1.0


def test_split_collectives_need_world_multiples():
    ag = get_collective("allgather")
    ag.validate(32, 4, 2, "float32")
    with pytest.raises(SizeError, match=r"multiple of ranks x element size \(4 x 4 = 16 B\)"):
        ag.validate(24, 4, 4, "float32")
    # all-reduce only needs whole elements
    get_collective("allreduce").validate(12, 4, 4, "float32")
    with pytest.raises(SizeError, match=r"6 B is not a whole number of float32 elements \(4 B each\)"):
        get_collective("allreduce").validate(6, 4, 2, "float32")


def test_buffer_sizes_follow_size_conventions():
    assert get_collective("allgather").buffer_bytes(1024, 4) == (256, 1024)
    assert get_collective("reducescatter").buffer_bytes(1024, 4) == (1024, 256)
    assert get_collective("allreduce").buffer_bytes(1024, 4) == (1024, 1024)


def test_names_and_aliases():
    assert canonical_dtype("bf16") == "bfloat16"
    assert canonical_dtype("FP16") == "float16"
    assert canonical_op("MAX") == "max"
    for bad, fn in (("float8", canonical_dtype), ("prod", canonical_op), ("allfoo", get_collective)):
        with pytest.raises(UsageError, match="known"):
            fn(bad)
