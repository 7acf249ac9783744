"""A throwaway PostgreSQL server in a temporary folder: what the tests and the load benchmark run against.

`LocalPostgres().start()` runs Debian's ``initdb`` and ``pg_ctl`` (PostgreSQL 13-17 under
``/usr/lib/postgresql/*/bin``, or on PATH) in a fresh folder, on a free TCP port of 127.0.0.1 with its unix
socket in the same folder, trust authentication, fsync off (a test database). PostgreSQL refuses to run as
root: under root the server runs as the ``postgres`` user (Debian's package creates it), through ``runuser``.
`stop()` and `restart()` are ``pg_ctl stop -m fast`` / ``start``, so a test can take the database away under
load and bring it back on the same port and data folder. `url` is the ``postgresql://`` URL to hand to
``advisor serve --store``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from advisor.errors import StoreError
from advisor.triton.server import free_port


def postgres_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (newest Debian version first, then PATH), or None."""
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if Path(folder, "initdb").exists() and Path(folder, "pg_ctl").exists():
            return Path(folder)
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


class LocalPostgres:
    """One PostgreSQL server in a temporary folder (see the module docstring)."""

    def __init__(self, database: str = "advisor"):
        self.bin = postgres_bin()
        if self.bin is None:
            raise StoreError("PostgreSQL is not installed (no initdb/pg_ctl): install Debian's `postgresql` package")
        self.database = database
        self.folder: Path | None = None
        self.port = 0
        self._user = "postgres" if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        """``postgresql://postgres@127.0.0.1:PORT/advisor`` (trust authentication: no password)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def new_database(self, name: str) -> str:
        """Create an empty database (a test's own); its URL."""
        self._run("createdb", "-h", str(self.folder), "-p", str(self.port), "-U", "postgres", name)
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, *argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / argv[0]), *argv[1:]]
        if self._user:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise StoreError(f"{argv[0]} failed ({out.returncode}): {(out.stderr or out.stdout).strip()[-400:]}")
        return out

    def start(self) -> "LocalPostgres":
        """initdb in a new temporary folder, start the server, create the database; return self."""
        self.folder = Path(tempfile.mkdtemp(prefix="advisor-pg-"))
        if self._user:
            shutil.chown(self.folder, self._user, self._user)
        self.port = free_port()
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-instructions")
        with open(self.data / "postgresql.conf", "a") as fh:
            fh.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = "
                     f"'{self.folder}'\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                     "max_connections = 200\n")
        self.restart()
        self._run("createdb", "-h", str(self.folder), "-p", str(self.port), "-U", "postgres", self.database)
        return self

    @property
    def data(self) -> Path:
        """The data folder."""
        assert self.folder is not None
        return self.folder / "data"

    def restart(self) -> None:
        """Start the (stopped) server and wait until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: disconnect clients, roll back what is open)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def close(self) -> None:
        """Stop the server and remove its folder."""
        if self.folder is None:
            return
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def __enter__(self) -> "LocalPostgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
