"""Every rank's device is named by that rank: nccl-tests' readers count ranks by the names in the Rank lines."""

from __future__ import annotations

from pybench.measure.rank_devices import CPU_DEVICE, NAME_BYTES, decode_name, encode_name, gather_rank_devices


class _Rank:
    """One rank of a job whose agreement is the element-wise maximum over every rank's values (the backends'
    ``agree_max`` contract), replayed here over the ranks' own contributions."""

    def __init__(self, rank: int, device: int, name: str, job: list[_Rank]):
        self.rank, self.device, self.name, self.job = rank, device, name, job

    def rank_devices(self):
        return [(self.rank, self.device)]

    def device_name(self, index: int) -> str:
        assert index == self.device
        return self.name

    def device_address(self, index: int) -> str:
        assert index == self.device
        return f"0000:{16 * self.rank + 27:02x}:00"

    def agree_max(self, values: list[int]) -> list[int]:
        self.job.append(values)
        return values


def test_a_rank_on_another_host_is_named_by_its_own_reading():
    job: list = []
    hosts = ["node-a", "node-b"]
    ranks = [_Rank(0, 0, "NVIDIA H100 80GB HBM3", job), _Rank(1, 3, "NVIDIA H200", job)]
    for r in ranks:
        gather_rank_devices(r, {"rank": r.rank, "world_size": 2, "hosts": hosts})
    agreed = [max(column) for column in zip(*job)]

    class Agreed(_Rank):
        def agree_max(self, values):
            return agreed

    (a, b) = gather_rank_devices(Agreed(0, 0, "NVIDIA H100 80GB HBM3", []), {"rank": 0, "world_size": 2,
                                                                             "hosts": hosts})
    assert (a.host, a.device, a.name, a.address) == ("node-a", 0, "NVIDIA H100 80GB HBM3", "0000:1b:00")
    assert (b.host, b.device, b.name, b.address) == ("node-b", 3, "NVIDIA H200", "0000:2b:00")


def test_names_travel_whole_or_cut_between_characters():
    assert decode_name(encode_name("Intel(R) Xeon(R) Platinum 8480+")) == "Intel(R) Xeon(R) Platinum 8480+"
    long = "é" * NAME_BYTES  # two bytes each: the cut falls between characters, never inside one
    assert decode_name(encode_name(long)) == "é" * (NAME_BYTES // 2)
    assert all(v >= 0 for v in encode_name(long))  # a maximum with the other ranks' zeros keeps them
    assert decode_name(encode_name("")) == ""
    assert decode_name(encode_name("a\0b")) == "ab"  # a NUL would end the name early
    # a name never forges a line of the table (a reader counting Rank lines would count it)
    assert decode_name(encode_name("GPU\n#  Rank 99 Group  0 Pid 1 on x device  0 [x] NVIDIA")).count("\n") == 0


def test_a_backend_that_cannot_name_its_device_still_takes_part():
    """Every rank must reach the agreement: a name it cannot read is "GPU", never an exception on one rank."""
    class Failing(_Rank):
        def device_name(self, index):
            raise RuntimeError("CUDA error: device-side assert")

        def device_address(self, index):
            raise RuntimeError("no properties")

    (me,) = gather_rank_devices(Failing(0, 2, "", []), {"rank": 0, "world_size": 1, "hosts": ["h"]})
    assert (me.device, me.name, me.address) == (2, "GPU", "")


def test_a_cpu_rank_is_named_by_its_cpu_model():
    from pybench.measure.envinfo import cpu_model
    job: list = []
    (me,) = gather_rank_devices(_Rank(0, CPU_DEVICE, "unused", job), {"rank": 0, "world_size": 1, "hosts": ["h"]})
    assert me.device == CPU_DEVICE and me.name == cpu_model() and me.address == ""
