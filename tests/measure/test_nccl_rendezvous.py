"""How NCCL's unique id travels, for real on CPU: over pybench._core's MPI (2 ranks
under mpiexec) and over a torch TCPStore (2 processes, as torchrun's workers).
The id here is random bytes standing in for ncclGetUniqueId's (which needs no GPU
either, but the transport is what is under test)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap

import pytest
from conftest import run_under_mpiexec

MPI_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pybench._native import core
    from pybench.measure.backends.nccl import share_id_over_mpi
    c = core()
    c.mpi_init()
    info = c.rank_info()
    # rank 0's id has bytes 0..255 and zeros: the max must keep every byte exactly
    uid = share_id_over_mpi(c, info["rank"], lambda: bytes([0, 255, 1, 254] * 32))
    open(os.path.join(sys.argv[1], f"uid{info['rank']}.json"), "w").write(json.dumps(list(uid)))
    c.mpi_finalize()
""")


@pytest.mark.mpi
def test_unique_id_travels_over_mpi(tmp_path, native):
    script = tmp_path / "uid.py"
    script.write_text(MPI_SCRIPT)
    proc = run_under_mpiexec(script, [str(tmp_path)], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [json.loads((tmp_path / f"uid{r}.json").read_text()) for r in range(2)]
    assert got[0] == got[1] == [0, 255, 1, 254] * 32


STORE_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from datetime import timedelta
    import torch.distributed as dist
    from pybench.measure.backends.nccl import share_id_over_store
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=rank == 0,
                          timeout=timedelta(seconds=60))
    uid, hosts = share_id_over_store(store, rank, world, "t1", lambda: bytes(range(128)), f"host{rank}")
    print(json.dumps({"uid": list(uid), "hosts": hosts}))
    store.set(f"done/{rank}", "1")
    if rank == 0:
        store.wait([f"done/{r}" for r in range(world)])  # the master keeps the store up until all have read
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unique_id_travels_over_a_torch_tcpstore(tmp_path):
    pytest.importorskip("torch.distributed")
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in __import__("os").environ.items()}
        env.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, "-c", STORE_SCRIPT], cwd=tmp_path, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    got = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert got[0]["uid"] == got[1]["uid"] == list(range(128))
    assert got[0]["hosts"] == got[1]["hosts"] == ["host0", "host1"]
