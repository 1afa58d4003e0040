"""Reading PDDL and plan files at the edge (the command line): once, size-capped, regular files
only, decoded the way Fast Downward's translator reads them.

Nothing here quotes a file's content in an error: a file is only quoted (by the check or a
planner) after it has passed the type, size and shape tests below, so a symlink to a private
file or a device never has its bytes echoed back.
"""

from __future__ import annotations

import codecs
import os
import stat

from solvers.errors import InputError

DEFAULT_MAX_FILE_MB = 8.0

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))


class InputFileError(InputError):
    """A file that cannot be an input; the message names the file and never quotes it."""


def read_text_file(path: str, *, max_bytes: int, role: str = "pddl") -> str:
    """The text of a regular file of at most `max_bytes`. `role` "pddl" also demands that it
    starts (after comments) with "(", "plan" that it holds only plan-like lines."""
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer; the type test refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError(f"{path}: cannot open: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        for test, kind in _KINDS:
            if test(info.st_mode):
                raise InputFileError(f"{path}: is {kind}, not a regular file")
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(f"{path}: is not a regular file")
        if info.st_size > max_bytes:
            raise InputFileError(f"{path}: is {info.st_size:,} bytes, over the limit of {max_bytes:,} "
                                 "(raise it with --max-file-mb)")
        chunks, total = [], 0
        while total <= max_bytes:  # /proc-like files report size 0 and may never end
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise InputFileError(f"{path}: is over the limit of {max_bytes:,} bytes (raise it with --max-file-mb)")
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    text = decode(b"".join(chunks), path)
    if role == "pddl":
        _looks_like_pddl(text, path)
    elif role == "plan":
        _looks_like_plan(text, path)
    return text


def decode(data: bytes, path: str) -> str:
    """UTF-16/32 with a byte-order mark is decoded as such; otherwise UTF-8, or Latin-1 as the
    translator reads it (it allows any byte in comments and rejects non-ASCII elsewhere)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                raise InputFileError(f"{path}: is not valid {encoding.upper()} text") from None
    if b"\x00" in data:
        raise InputFileError(f"{path}: is binary (it contains NUL bytes), not a text file")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _first_char(text: str) -> str:
    for line in text.splitlines():
        code = line.split(";", 1)[0].strip()
        if code:
            return code[0]
    return ""


def _looks_like_pddl(text: str, path: str) -> None:
    first = _first_char(text)
    if first != "(" and first != "":
        raise InputFileError(f"{path}: does not look like PDDL (its first character outside comments is not '(')")


def _looks_like_plan(text: str, path: str) -> None:
    first = _first_char(text)
    if first and first != "(" and not (first.isdigit() or first == "."):
        raise InputFileError(f"{path}: does not look like a plan (its first step does not start with '(' "
                             "or a time)")
