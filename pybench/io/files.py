"""Reading and writing pybench's files safely.

Writes are atomic (a temporary file in the same folder, fsync, ``os.replace``)
so a reader sees the old file or the new one, never half of one, and the new
file gets the permissions a plain ``open()`` would give. Reads of JSON turn every
way a hostile or broken file can fail (not UTF-8, not JSON, nested past the
parser's recursion limit, too large) into one FileFormatError line. Nothing read
is ever executed: JSON only, never pickle.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pybench.errors import FileFormatError, UsageError

# A result or model file is kilobytes to a few hundred megabytes (raw samples);
# anything bigger is not one of ours and is refused before it is read into memory.
MAX_JSON_BYTES = 1 << 30


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def refuse_existing(path: str | os.PathLike, force: bool) -> None:
    """One-line error when ``path`` exists and the user did not pass --force, or cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{p} is a folder; give a file name")
    if p.exists() and not force:
        raise UsageError(f"{p} already exists; pass --force to overwrite it or choose another file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write {p}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write {p}: folder {parent} is not writable")


def parse_json(text: str, source: str) -> Any:
    """``json.loads`` with every failure as a one-line FileFormatError naming ``source``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise FileFormatError(f"{source}: JSON nested too deeply to be a pybench file") from None
    except ValueError as exc:
        raise FileFormatError(f"{source} is not JSON: {exc}") from None


def read_text(path: str | os.PathLike, limit_bytes: int = MAX_JSON_BYTES) -> str:
    """The file's text, or a one-line FileFormatError (missing, unreadable, too large, not UTF-8)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > limit_bytes:
            raise FileFormatError(f"{p} is {size} bytes, larger than any pybench file ({limit_bytes}); wrong file?")
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise FileFormatError(f"{p} is not UTF-8 text") from None
    except IsADirectoryError:
        raise FileFormatError(f"{p} is a folder, not a file") from None
    except OSError as exc:
        raise FileFormatError(f"cannot read {p}: {exc.strerror or exc}") from None


def read_json(path: str | os.PathLike) -> Any:
    """Read and parse a JSON file; one-line FileFormatError on any failure."""
    return parse_json(read_text(path), str(path))
