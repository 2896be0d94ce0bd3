"""A torch.distributed rank whose peer died: one line, never gloo's or NCCL's traceback.

When a rank is killed mid-collective, the survivors' gloo (or NCCL) raises a RuntimeError
("Read error ...: Connection reset by peer", "Connection closed by peer", ...). It is the
environment failing, not pybench: under pybench's own launcher the survivor leaves quietly
with exit code 3 (the parent names the rank that died, in its one line); under the user's
launcher (mpirun, srun, torchrun) it says so itself, in one line, and exits 3.
"""

from __future__ import annotations

import os
import re
import sys

from pybench.errors import EnvironmentFault

# What gloo and NCCL say when the other end of a connection went away (torch 2.x).
_PEER_GONE = re.compile(r"Connection (?:reset|closed) by peer|Broken pipe|gloo/transport/|remote process exited|"
                        r"communicator was aborted|NCCL Error 6|socketProgress|Socket Timeout|"
                        r"failed to recv|recvBytes|sendBytes", re.IGNORECASE)


def peer_lost(exc: BaseException) -> EnvironmentFault | None:
    """The one-line fault ``exc`` is when it says a peer rank went away; None for anything else."""
    if not isinstance(exc, RuntimeError):
        return None
    text = str(exc).strip()
    if not _PEER_GONE.search(text):
        return None
    first = text.splitlines()[0] if text else type(exc).__name__
    first = re.sub(r"^\[[^\]]*\]\s*", "", first).split(". ")[0]  # no "[/path/pair.cc:537]", no advice
    if len(first) > 160:
        first = first[:157] + "..."
    return EnvironmentFault(f"another rank is gone (torch.distributed: {first}); it died or was killed, "
                            "see its own output")


def leave_after_peer_loss(fault: EnvironmentFault, rank: int, host: str, kept: str = "") -> int:
    """The exit code of a rank that lost a peer; says so in one line unless pybench's launcher will."""
    from pybench.measure.launch import STATUS_FILE
    if os.environ.get(STATUS_FILE):
        # pybench's parent reports the rank that died; a status would make it say nothing at all.
        sys.stderr.flush()
        return fault.exit_code
    where = f"; results so far kept in {kept}" if kept else ""
    print(f"pybench: error: rank {rank} ({host}): {fault}{where}", file=sys.stderr, flush=True)
    return fault.exit_code
