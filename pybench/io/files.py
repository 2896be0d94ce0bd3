"""Reading and writing pybench's files safely.

Writes are atomic (a nameless O_TMPFILE file in the same folder, fsync, then a
link and ``os.replace``) so a reader sees the old file or the new one, never half
of one, a writer killed mid-write leaves no temporary file behind, and the new
file gets the permissions a plain ``open()`` would give. Reads of JSON turn every
way a hostile or broken file can fail (not UTF-8, not JSON, nested past the
parser's recursion limit, too large) into one FileFormatError line. Nothing read
is ever executed: JSON only, never pickle.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pybench.errors import EnvironmentFault, FileFormatError, UsageError
from pybench.io.formats import FileFormat, check_document
from pybench.io.memory import check_budget

# A result or model file is kilobytes to a few hundred megabytes (raw samples);
# anything bigger is not one of ours and is refused before it is read into memory.
MAX_JSON_BYTES = 1 << 30


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def refuse_non_regular(path: Path) -> None:
    """Writes replace regular files only: never a device, FIFO, socket or the target of a symlink."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{path} is a symbolic link; pybench does not write through links: give the real path")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path} is not a regular file ({_kind(st.st_mode)}); give a file name")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "not a regular file"


def _anonymous_file(folder: Path) -> int | None:
    """A nameless file in ``folder``'s file system (O_TMPFILE), or None where it is not supported.

    Nothing named exists until :func:`_publish` links it, so a writer killed (SIGKILL included)
    while writing leaves nothing behind: the kernel frees a nameless file with its last descriptor.
    """
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return None
    try:
        return os.open(folder, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o666 & ~_umask())
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT) and folder.is_dir():
            return None  # a file system without O_TMPFILE (some FUSE and network mounts)
        raise


def _publish(fd: int, folder: Path, path: Path, replace: bool) -> None:
    """Give the anonymous file ``fd`` the name ``path``: exclusively (``replace`` False: EEXIST when
    ``path`` exists), or replacing it atomically through a random name that lives for one rename."""
    source = f"/proc/self/fd/{fd}"
    # linkat(AT_SYMLINK_FOLLOW) links the file /proc's entry points to; CPython calls linkat, not
    # link, only when given a folder descriptor, hence dst_dir_fd.
    dir_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not replace:
            os.link(source, path.name, dst_dir_fd=dir_fd, follow_symlinks=True)
            return
        for _ in range(16):
            tmp = f".{path.name[:200]}.{secrets.token_hex(6)}.tmp"
            try:
                os.link(source, tmp, dst_dir_fd=dir_fd, follow_symlinks=True)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))
        try:
            os.rename(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
    finally:
        os.close(dir_fd)


def _unlink_quietly(path: str | os.PathLike) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_atomic(path: str | os.PathLike, data: str | bytes | Iterable[bytes], replace: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (a regular file only; see the module docstring).

    ``data`` may be an iterable of byte chunks, written as they come, so that a document
    streamed from a journal is never held whole in memory; if it raises, nothing is published.

    With ``replace`` False the file must not exist yet (FileExistsError otherwise): of two runs
    given one file name, the second fails instead of overwriting the first's results. Either way
    the file appears complete or not at all, and a writer killed mid-write leaves no temporary.
    """
    path = Path(path)
    refuse_non_regular(path)
    try:
        _write_atomic(path, data.encode() if isinstance(data, str) else data, replace)
    except OSError as exc:
        if exc.filename == str(path) or isinstance(exc, FileExistsError) and not replace:
            raise
        # Name the file asked for, not the temporary name the error came from.
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None


def _write_atomic(path: Path, payload: bytes | Iterable[bytes], replace: bool) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    fd = _anonymous_file(folder)
    if fd is not None:
        try:
            _write_all(fd, payload)
            _publish(fd, folder, path, replace)
        finally:
            os.close(fd)
        return
    # mkstemp opens with O_EXCL in the target's own folder: nothing planted there can be followed.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=folder)
    try:
        try:
            _write_all(fd, payload)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _write_all(fd: int, payload: bytes | Iterable[bytes]) -> None:
    for chunk in (payload,) if isinstance(payload, bytes) else payload:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]
    os.fsync(fd)


def null_non_finite(x: Any) -> Any:
    """``x`` with every NaN or infinite float, however deeply nested, as None: a figure that could not
    be measured (a ratio against a zero time, say) is written as JSON null, never as a NaN token."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: null_non_finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [null_non_finite(v) for v in x]
    return x


def json_text(doc: Any) -> str:
    """Strict JSON text of ``doc`` (no NaN or Infinity tokens, which other readers reject)."""
    try:
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"
    except ValueError as exc:
        raise UsageError(f"refusing to write a non-finite number ({exc}); check the inputs for nan or inf") from None


def write_json(path: str | os.PathLike, doc: Any, force: bool = True) -> None:
    """Write ``doc`` as strict JSON, atomically (as :func:`write_output` without ``force``)."""
    write_output(path, json_text(doc), force)


def write_output(path: str | os.PathLike, data: str | bytes | Iterable[bytes], force: bool) -> None:
    """Write a command's output file atomically: replacing what is there only with ``force`` (--force); without,
    exclusively, so that of two runs given one name (each checked it free with :func:`refuse_existing` before its
    work) the second says so instead of overwriting the first's output."""
    try:
        write_atomic(path, data, replace=force)
    except FileExistsError:
        if force:
            raise
        raise UsageError(f"{path} appeared while this command ran (another run writing it?); pass --force to "
                         f"overwrite it or choose another file name") from None


def refuse_existing(path: str | os.PathLike, force: bool, inputs: Iterable[str | os.PathLike] = ()) -> None:
    """One-line error when ``path`` exists and the user did not pass --force, is one of the command's
    ``inputs`` (--force would destroy what it reads), or cannot be written."""
    p = Path(path)
    try:
        if p.is_dir():
            raise UsageError(f"{p} is a folder; give a file name")
        if p.exists() and any(_same_file(p, q) for q in inputs):
            raise UsageError(f"{p} is one of this command's inputs: writing it would destroy what it reads; "
                             f"choose another file name")
        if p.exists() and not force:
            raise UsageError(f"{p} already exists; pass --force to overwrite it or choose another file name")
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"cannot write {p}: folder {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise UsageError(f"cannot write {p}: folder {parent} is not writable")
        # A name longer than the file system allows fails only when the file is made: ask it now.
        limit = os.pathconf(parent, "PC_NAME_MAX")
        _probe_folder(parent)
    except OSError as exc:
        raise path_error(exc, p, "write") from None
    if len(os.fsencode(p.name)) > limit:
        raise UsageError(f"cannot write {_shown(p)}: its name is longer than the {limit} bytes the file system "
                         f"allows; choose a shorter name")
    refuse_non_regular(p)  # before any work: --force replaces a file, never a device, FIFO or link


def _probe_folder(folder: Path) -> None:
    """Make (and drop) a file in ``folder`` before any work: a folder that takes none (``/proc``, ``/sys``, a
    read-only mount that answers access() yes) fails here, not after a run's output is printed. OSError if not."""
    fd = _anonymous_file(folder)
    if fd is None:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".pybench-probe-")
        _unlink_quietly(name)
    os.close(fd)


def _same_file(path: Path, other: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(path, other)
    except (OSError, ValueError, TypeError):  # an input that is gone, a '-' for stdin: not this file
        return False


# errno values that say the path given cannot be used (bad input: choose another), as opposed
# to a machine that failed (a full disk, an I/O error, a read-only file system mid-run).
_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.EISDIR,
                errno.ELOOP, errno.EEXIST, errno.EINVAL}


def _shown(path: str | os.PathLike) -> str:
    text = str(path)
    return text if len(text) <= 120 else f"{text[:60]}...{text[-40:]}"


def path_error(exc: OSError, path: str | os.PathLike | None, action: str) -> UsageError | EnvironmentFault:
    """One line for an OSError on a path the user gave: UsageError (exit 2) when the path cannot be
    used as given (too long, no permission, no such folder), EnvironmentFault (exit 3) otherwise."""
    where = _shown(path if path is not None else (exc.filename or "a file"))
    why = exc.strerror or str(exc)
    if exc.errno in _PATH_ERRNOS:
        return UsageError(f"cannot {action} {where}: {why}; choose another path")
    return EnvironmentFault(f"cannot {action} {where}: {why}")


# Deeper than any file pybench writes (a result is 4 levels deep); checked after parsing so a
# hostile file cannot drive the recursive walkers that read documents into RecursionError.
MAX_JSON_DEPTH = 64


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (non-finite numbers are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} overflows a double")
    return value


# No number in a pybench file needs more than a signed 64-bit integer; Python's own int() would
# take 4300 digits, which numpy then cannot hold (OverflowError far from the reader).
_MAX_INT_DIGITS = 19


def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    value = int(text) if len(digits) <= _MAX_INT_DIGITS else None
    if value is None or not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"integer {text[:24]}{'...' if len(text) > 24 else ''} does not fit in 64 bits")
    return value


def _printable(text: str) -> bool:
    """Whether ``text`` can be written out as UTF-8 (JSON's \\ud800 escapes can make lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _depth(data: Any) -> int:
    """How deeply ``data`` nests; ValueError on a string that is not text (a lone surrogate)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if not _printable(node):
                raise ValueError(f"string {node[:40]!r} holds a lone surrogate (\\ud800-\\udfff), which is not text")
        elif isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                break
            if isinstance(node, dict):
                stack.extend((k, depth) for k in node)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list, str)))
    return deepest


def parse_json(text: str, source: str) -> Any:
    """Strict ``json.loads``: every failure, NaN/Infinity, overflow and deep nesting as one FileFormatError line."""
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
        deepest = _depth(data)
    except RecursionError:
        raise FileFormatError(f"{source}: JSON nested too deeply to be a pybench file") from None
    except ValueError as exc:
        raise FileFormatError(f"{source} is not JSON pybench reads: {str(exc)[:200]}") from None
    if deepest > MAX_JSON_DEPTH:
        raise FileFormatError(f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep; not a pybench file")
    return data


def read_bytes(path: str | os.PathLike, limit_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The file's bytes, or a one-line FileFormatError (missing, not a regular file, too large).

    The file is opened without blocking (a FIFO cannot hang the open), checked on the opened
    descriptor (a symlink to /dev/zero is a character device there), and read no further than
    ``limit_bytes``.
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path):  # bytes, None, a number, a dict from Python
        raise UsageError(f"a file is named by a non-empty str or pathlib.Path, not {type(path).__name__} "
                         f"{str(path)[:40]!r}")
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise FileFormatError(f"{p} is a folder, not a file") from None
    except OSError as exc:
        raise FileFormatError(f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileFormatError(f"{p} is {_kind(st.st_mode)}, not a regular file; give a file")
        if st.st_size > limit_bytes:
            raise FileFormatError(f"{p} is {st.st_size} bytes, larger than any pybench file ({limit_bytes}); "
                                  f"wrong file?")
        chunks, total = [], 0
        while total <= limit_bytes:
            chunk = os.read(fd, min(1 << 20, limit_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit_bytes:
            raise FileFormatError(f"{p} grew past {limit_bytes} bytes while being read; wrong file?")
        return b"".join(chunks)
    except OSError as exc:
        raise FileFormatError(f"cannot read {p}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, limit_bytes: int = MAX_JSON_BYTES) -> str:
    """The file's text (:func:`read_bytes`, strict UTF-8, a leading byte-order mark as Windows editors write it
    dropped), or a one-line FileFormatError."""
    try:
        return read_bytes(path, limit_bytes).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FileFormatError(f"{Path(path)} is not UTF-8 text") from None


# Reading a JSON file holds its bytes, its text and then the parsed objects (about 1x the text
# for arrays of numbers, several times that for many small objects): budgeted before reading.
JSON_MEMORY_FACTOR = 6


def read_json(path: str | os.PathLike, limit_bytes: int = MAX_JSON_BYTES) -> Any:
    """Read and parse a JSON file; one-line FileFormatError on any failure, SizeError when
    parsing it would not fit in the memory this process may use."""
    try:
        size = os.stat(path).st_size
    except (OSError, TypeError, ValueError):
        size = 0  # read_bytes says why in its own line
    if size <= limit_bytes:
        check_budget(JSON_MEMORY_FACTOR * size, f"reading {_shown(path)} ({size / 1e6:.0f} MB of JSON)",
                     "give a smaller file or raise the limit")
    return parse_json(read_text(path, limit_bytes), str(path))


def read_document(path: str | os.PathLike, fmt: FileFormat, limit_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """Read a pybench document of ``fmt`` (see :mod:`pybench.io.formats`); one-line FileFormatError otherwise."""
    return check_document(read_json(path, limit_bytes), fmt, str(path))
