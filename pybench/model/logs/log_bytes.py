"""A log file's bytes as text: UTF-8 (leniently), or UTF-16/32 by its byte-order mark; one line for
what is not text (compressed, binary, empty), naming what it is where that is known."""

from __future__ import annotations

import codecs

from pybench.errors import FileFormatError

# Leading bytes of the archives and compressors a log is kept in.
_COMPRESSED = {b"\x1f\x8b": ("gzip-compressed", "gunzip it first"),
               b"BZh": ("bzip2-compressed", "bunzip2 it first"),
               b"\xfd7zXZ\x00": ("xz-compressed", "unxz it first"),
               b"\x28\xb5\x2f\xfd": ("zstd-compressed", "unzstd it first"),
               b"PK\x03\x04": ("a zip archive", "unzip it first")}
# Longest first: UTF-32 LE's mark begins with UTF-16 LE's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def decode_log(raw: bytes, path) -> str:
    """``raw`` as text, or FileFormatError in one line naming ``path`` and what the bytes are.

    Logs are decoded leniently (a stray byte in shell noise must not refuse a whole sweep); Windows
    PowerShell 5 writes ``kubectl logs pod > x.log`` as UTF-16 with a byte-order mark.
    """
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            return raw.decode(codec, errors="replace")
    for magic, (what, remedy) in _COMPRESSED.items():
        if raw.startswith(magic):
            raise FileFormatError(f"{path}: {what}: {remedy}")
    if not raw.strip():
        raise FileFormatError(f"{path}: empty file" + (" (white space only)" if raw else ""))
    head = raw[:4096]
    if b"\x00" in head:
        # ASCII text in UTF-16 without a mark: every other byte is NUL
        if head[1::2].count(0) > 0.9 * len(head[1::2]) or head[0::2].count(0) > 0.9 * len(head[0::2]):
            raise FileFormatError(f"{path}: UTF-16 text without a byte-order mark: save it as UTF-8")
        raise FileFormatError(f"{path}: binary file, not a benchmark log or result JSON")
    return raw.decode("utf-8", errors="replace")
