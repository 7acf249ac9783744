"""Reading the arrays of a ``.npz`` router artifact with every size known before a byte is decompressed.

A ``.npz`` file is a zip of ``.npy`` members. A small file can claim arrays of gigabytes (a decompression bomb)
or a header whose shape does not match its data. `read_npz` therefore reads, before loading any array:

- the zip's central directory: at most `MAX_MEMBERS` members, every one a ``.npy`` file, and the sum of their
  uncompressed sizes at most `max_artifact_bytes()` (256 MiB unless ``ADVISOR_MAX_ROUTER_MB`` says otherwise);
- each member's ``.npy`` header: a plain numeric dtype (no objects, so no pickle), and a shape whose bytes plus
  the header are exactly the member's uncompressed size.

Only then are the arrays read, each bounded by its member's stated size (zipfile never inflates past it). Any
problem is one `RouterError` line naming the file, the member and the limit.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from advisor.env_limits import mib_limit
from advisor.errors import RouterError

DEFAULT_MAX_ARTIFACT_MB = 256  #: decompressed arrays of one router artifact, unless ADVISOR_MAX_ROUTER_MB is set
MAX_ARTIFACT_ENV = "ADVISOR_MAX_ROUTER_MB"
MAX_MEMBERS = 1000  #: arrays in one .npz artifact (a trained router has a few dozen)
DTYPES = {"float32", "float64", "int32", "int64", "uint8", "bool"}  #: the numeric dtypes an artifact may hold


def max_artifact_bytes() -> int:
    """Bytes of arrays one router artifact may hold (``ADVISOR_MAX_ROUTER_MB``, default 256 MiB)."""
    return mib_limit(MAX_ARTIFACT_ENV, DEFAULT_MAX_ARTIFACT_MB)


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> None:
    """Check one member's .npy header against its stated size; raise `RouterError` when they disagree."""
    with zf.open(info) as fh:
        try:
            version = npy_format.read_magic(fh)
            reader = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
            shape, _fortran, dtype = reader(fh)
        except (ValueError, OSError, EOFError) as exc:
            raise RouterError(f"{where}: not a numpy array header ({exc})") from None
        header_bytes = fh.tell()
    if dtype.hasobject or dtype.name not in DTYPES:
        raise RouterError(f"{where}: dtype {dtype} is not one of {', '.join(sorted(DTYPES))} "
                          "(router artifacts hold plain numbers)")
    data_bytes = math.prod(shape) * dtype.itemsize
    if header_bytes + data_bytes != info.file_size:
        raise RouterError(f"{where}: header says shape {tuple(shape)} of {dtype} ({data_bytes} bytes) but the "
                          f"member holds {info.file_size - header_bytes} bytes of data")


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` artifact by name, after the header checks of the module docstring."""
    path = Path(path)
    limit = max_artifact_bytes()
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise RouterError(f"{path}: {len(infos)} members, over the limit of {MAX_MEMBERS} arrays in a router "
                              "artifact")
        total = sum(i.file_size for i in infos)
        if total > limit:
            raise RouterError(f"{path}: arrays would decompress to {total / 2**20:.0f} MiB, over the limit of "
                              f"{limit / 2**20:g} MiB on router artifacts ({MAX_ARTIFACT_ENV}); refused before "
                              "decompressing (a decompression bomb, or a router far larger than any trained one)")
        for info in infos:
            if not info.filename.endswith(".npy") or info.is_dir():
                raise RouterError(f"{path}: member {info.filename!r} is not a .npy array")
            _header(zf, info, f"{path}: member {info.filename!r}")
        arrays = {}
        for info in infos:
            with zf.open(info) as fh:
                arrays[info.filename[: -len(".npy")]] = npy_format.read_array(fh, allow_pickle=False)
    return arrays
