"""Open MPI's stderr on its way to ours: its multi-line abort banners and start-up chatter turned into facts
(which rank died and how, what MPI said), held back so that a failed run ends in one line."""

from __future__ import annotations

import os
import re
import resource
import sys
import threading

_BANNER_RULE = re.compile(rb"^\s*-{20,}\s*$")
_MPI_ERROR_LINE = re.compile(rb"^\s*\[[^\]]*\] \*\*\*")
# What MPI's failures print besides its banners: PMIx's "[host:pid] PMIX ERROR: ... in file F at line N",
# the "Local abort" line, and the unprefixed MPI_ERRORS_ARE_FATAL block ("*** An error occurred in X", its
# "*** MPI_ERR_..." line, then boilerplate), and the launcher's own assertion as it goes down with them. Held back
# as the banners are (a warning if the run went on): the one line names the rank that failed. Any other line,
# "*** stack smashing detected ***" included, is the ranks' own and goes through.
_MPI_INIT_CHATTER = re.compile(rb"^(\[[^\]]*\] (PMIX ERROR: |Local abort )|\*\*\* (An error occurred in |MPI_ERR_)"
                               rb"|(prterun|mpirun|mpiexec): .*Assertion .* failed)")
_FATAL_BOILERPLATE = re.compile(rb"^\*\*\* +(on communicator |on a NULL communicator|MPI_ERRORS_ARE_FATAL"
                                rb"|and MPI will try)")
# Open MPI's bundled libevent logs to stderr as "[warn] ..." / "[err] ...": the event loop's view of a
# failure MPI reports itself (a descriptor closed under it as a rank died), never a cause of its own.
_EVENT_LIBRARY_LINE = re.compile(rb"^\[(warn|err|msg|debug)\] ")
_KILLED = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+) \(([^)]*)\)")
_NONZERO = re.compile(r"exited with non-zero status.*?Process name: \[[^\]]*?,(\d+)\].*?Exit code:\s*(\d+)")


# Open MPI 5 start-up failures that happen before any rank runs and go away on a second
# try (a race in PMIx's listener start seen in CI logs of other projects, and here about
# 1 launch in 30 under load): nothing ran, so nothing is lost by launching again.
_START_RACES = ("PMIx server's listener thread failed to start",)
START_ATTEMPTS = 3


def failed_to_start(stderr: str) -> bool:
    """Whether a launcher's stderr shows it failed before any rank ran (a start-up race)."""
    return any(m in stderr for m in _START_RACES)


def first_sentence(text: str, limit: int = 240) -> str:
    """The first sentence of an Open MPI banner, on one line."""
    text = " ".join(text.split())
    end = text.find(". ")
    text = text[:end + 1] if 0 < end < limit else text
    return text if len(text) <= limit else text[:limit - 3] + "..."


class StderrRelay(threading.Thread):
    """Copies the ranks' stderr (through mpiexec) to ours as it comes, and turns
    Open MPI's multi-line abort banners into facts: which rank died and how."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.failures: list[str] = []
        self.banners: list[str] = []  # Open MPI messages that are not about a rank dying
        self.event_library: list[str] = []  # libevent's lines: a warning if the run went on, else the cause says it
        self.start_failed = False  # mpiexec itself failed before any rank ran (worth one more try)
        self.init_failed = False  # MPI_Init (or PMIx under it) failed: no rank started its work

    def run(self) -> None:
        out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
        banner: list[bytes] | None = None
        pending = b""
        fd = self.stream.fileno()
        # Read what arrives, not whole lines: a progress line ends in "\r", not "\n",
        # and must reach the terminal when it is written.
        while True:
            data = os.read(fd, 65536)
            if not data:
                break
            pending += data.replace(b"\0", b"")  # Open MPI's help messages can start with a NUL
            *lines, pending = pending.split(b"\n")
            for line in lines:
                banner = self._line(line + b"\n", banner, out)
            if pending and banner is None and not pending.lstrip().startswith((b"-", b"[")):
                self._write(out, pending)
                pending = b""
        if pending:
            banner = self._line(pending, banner, out)
        if banner:
            self._digest(banner, out)
        self.stream.close()

    def _line(self, raw: bytes, banner: list[bytes] | None, out) -> list[bytes] | None:
        """Forward one line, or collect it into an Open MPI banner; returns the banner state."""
        if _BANNER_RULE.match(raw):
            if banner is None:
                return []
            self._digest(banner, out)
            return None
        if banner is not None:
            banner.append(raw)
        elif _EVENT_LIBRARY_LINE.match(raw):
            self.event_library.append(first_sentence(raw.decode(errors="replace")))
        elif _MPI_ERROR_LINE.match(raw):  # "[host:pid] *** An error occurred in MPI_Init": said in our line
            self.banners.append(first_sentence(raw.decode(errors="replace").split("***", 1)[1]))
        elif _MPI_INIT_CHATTER.match(raw):
            text = raw.decode(errors="replace").strip()
            self.init_failed |= "PMIX ERROR" in text or "MPI_Init" in text
            self.banners.append(first_sentence(text.lstrip("* ")))
        elif _FATAL_BOILERPLATE.match(raw):
            pass
        elif not raw.startswith(b"Abort is in progress"):  # prterun's Ctrl-C chatter; we say it in one line
            self._write(out, raw)
        return banner

    def _digest(self, lines: list[bytes], out) -> None:
        text = " ".join(b.decode(errors="replace").strip() for b in lines)
        killed = _KILLED.search(text)
        nonzero = _NONZERO.search(text)
        if any(m in text for m in _START_RACES):
            self.start_failed = True
            self.failures.append(f"mpiexec could not start: {text[:120]}")
        elif killed:
            rank, pid, host, sig, name = killed.groups()
            self.failures.append(f"rank {rank} ({host}, pid {pid}) was killed by signal {sig} ({name})")
        elif nonzero:
            rank, code = nonzero.groups()
            why = "timed out" if code == "124" else f"exited with code {code}"
            self.failures.append(f"rank {rank} {why}")
        elif text.strip():
            # A banner we do not understand (MPI_Init failing: no transport, a full TMPDIR, ...): its
            # first sentence, held back; the parent says it in its one line if the run fails, or
            # as one warning if the run went on regardless.
            self.banners.append(first_sentence(text))

    @staticmethod
    def _write(out, data: bytes) -> None:
        if out is not None:
            out.write(data)
            out.flush()
        else:
            sys.stderr.write(data.decode(errors="replace"))


# Below this file-size limit (``ulimit -f``) MPI's shared-memory files (PMIx's store, the ranks' segments)
# cannot be made, and the ranks die in MPI_Init with messages that do not name the cause.
_MPI_SHARED_FILES_BYTES = 64 << 20


def file_size_limit_hint() -> str:
    """Where a file-size limit is what stopped MPI, a clause that says so (empty otherwise)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY or soft >= _MPI_SHARED_FILES_BYTES:
        return ""
    return (f" (the file-size limit, ulimit -f, is {soft} bytes: MPI's shared-memory files need more; raise it, "
            f"e.g. `ulimit -f unlimited`)")
