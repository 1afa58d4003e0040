"""An .npz "bomb": a few MB on disk whose one array (all zeros) declares `inflated_bytes` once
loaded. Written in chunks, so making it never holds more than one chunk in memory."""

from __future__ import annotations

import zipfile
from pathlib import Path

from numpy.lib import format as npy_format

CHUNK = 16 * 1024 * 1024


def write_npz_bomb(path: Path, inflated_bytes: int = 2 * 1024**3) -> Path:
    count = inflated_bytes // 4
    header = {"descr": "<f4", "fortran_order": False, "shape": (count,)}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive, \
            archive.open("weights.npy", "w", force_zip64=True) as member:
        npy_format.write_array_header_1_0(member, header)
        zeros = bytes(CHUNK)
        left = count * 4
        while left > 0:
            member.write(zeros[:min(CHUNK, left)])
            left -= CHUNK
    return path
