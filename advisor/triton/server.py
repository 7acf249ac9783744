"""The embedded Triton server: a real `tritonserver` (via nvidia-pytriton) hosting a SIMULATED ladder's stand-ins
or a CPU ladder's real GGUF models (llama.cpp, `advisor.triton.llama_model`).

Every model is bound as a decoupled model exposing exactly the vLLM backend's tensors, so clients cannot tell it
from a GPU deployment. GPU ladders are not served here: Triton's vLLM backend serves them from the repository
`advisor triton render` writes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import sys
import sysconfig
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from advisor.errors import BackendError, ConfigError
from advisor.triton import llama_model
from advisor.triton.responders import standin_responder
from advisor.triton.standin_model import infer_function, pytriton_tensors
from advisor.tools.tree import remove_tree

#: Seconds to wait for tritonserver to answer its health endpoint.
START_TIMEOUT_S = 90.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def ensure_libpython_on_path() -> None:
    """Put this interpreter's libpython folder on LD_LIBRARY_PATH for the tritonserver child.

    PyTriton's Python-backend stub links libpython3.X.so; with a non-system Python (pyenv) it is not on the
    loader's path and model loading fails. Called right before starting, never at import.
    """
    libdir = sysconfig.get_config_var("LIBDIR")
    if not libdir:
        return
    current = os.environ.get("LD_LIBRARY_PATH", "")
    if libdir not in current.split(":"):
        os.environ["LD_LIBRARY_PATH"] = f"{libdir}:{current}" if current else libdir


def clean_leaked(home: Path | None = None, shm: Path = Path("/dev/shm"), tmp: Path = Path("/tmp")) -> list[Path]:
    """Remove what a killed embedded Triton left behind: its PyTriton workspace (``<PYTRITON_HOME>/advisor-<pid>-*``,
    the model store and tritonserver copy), its shared-memory segments (``/dev/shm/pytrtion<pid>-*``) and the
    model copies tritonserver made (``/tmp/folderXXXXXX`` naming that workspace, `model_folders`), for
    every <pid> that no longer runs, and stop the Python-backend stubs left running by a server that is gone
    (`_stop_orphaned_stubs`). Returns what was removed."""
    if home is None:
        # heavy dependency, imported on use: pytriton
        from pytriton.constants import PYTRITON_HOME

        home = Path(PYTRITON_HOME)
    removed = []
    for path, pid in [*((p, p.name.split("-")[1]) for p in home.glob("advisor-*-*")),
                      *((p, p.name[len("pytrtion"):].split("-")[0]) for p in shm.glob("pytrtion*-*")),
                      *((p, w.name.split("-")[1]) for p, w in model_folders(home, tmp))]:
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            remove_tree(path)
            removed.append(path)
    _stop_orphaned_stubs(home)
    return removed


#: The parameter PyTriton writes into each model's config.pbtxt: the workspace of the server that loaded it
_WORKSPACE_PARAMETER = re.compile(r'key: "workspace-path"\s*value\s*\{\s*string_value: "([^"]+)"')


def model_folders(home: Path, tmp: Path = Path("/tmp")) -> list[tuple[Path, Path]]:
    """(folder, workspace) of each model copy tritonserver made in `tmp` (``folderXXXXXX``: it localizes every
    model PyTriton loads there, and a killed server leaves them) for an embedded-Triton workspace under `home`
    (``advisor-<pid>-<tag>``, named by the model's ``workspace-path`` parameter)."""
    found = []
    for folder in tmp.glob("folder??????"):
        try:
            with (folder / "config.pbtxt").open(encoding="utf-8", errors="replace") as fh:
                match = _WORKSPACE_PARAMETER.search(fh.read(64 * 1024))
        except OSError:
            continue
        workspace = Path(match.group(1)) if match else None
        if workspace is not None and workspace.parent == home and workspace.name.startswith("advisor-"):
            found.append((folder, workspace))
    return found


def _stop_orphaned_stubs(home: Path) -> None:
    """SIGKILL the processes (of ours) run from an embedded Triton's workspace (``<home>/advisor-<pid>-*``:
    tritonserver and its Python-backend stubs) whose server is gone: the advisor process <pid> no longer runs, or
    the process's parent is neither that advisor process nor a process of the same workspace (a tritonserver
    killed with SIGKILL leaves its stubs running, orphaned, also after its workspace was removed)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            workspace = _workspace_of(proc.name, home)
            if workspace is None:
                continue
            owner = workspace.split("-")[1]
            parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
            served = parent == owner or _workspace_of(parent, home) == workspace
            if not (owner.isdigit() and _running(int(owner)) and served):
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours
            continue


def _workspace_of(pid: str, home: Path) -> str | None:
    """The name of the embedded-Triton workspace (``advisor-<pid>-<tag>`` under `home`) process `pid` runs a
    program from, else None."""
    root = str(home) + "/advisor-"
    program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
    return program[len(str(home)) + 1:].split("/", 1)[0] if program.startswith(root) else None


def _running(pid: int) -> bool:
    """Whether process `pid` exists (Linux)."""
    return Path(f"/proc/{pid}").exists()


class EmbeddedTriton:
    """A real tritonserver hosting every stand-in model of a SIMULATED ladder (gRPC, HTTP and metrics).

    Use as a context manager or call `start()` / `stop()`. Ports left as None are picked free. The server
    binds `host` (loopback by default). Server logs stay quiet unless `verbose`; they are kept and quoted
    in the error when the server cannot start.

    Call `start()` from a thread that lives as long as the server (normally the main thread): PyTriton ties
    the tritonserver child to the thread that started it (it is terminated when that thread, or this
    process, ends), which is also what makes a killed `advisor triton serve` leave no server behind.
    """

    def __init__(self, ladder, *, suite_paths: Sequence[str | Path] = (), grpc_port: int | None = None,
                 http_port: int | None = None, metrics_port: int | None = None, host: str = "127.0.0.1",
                 verbose: bool = False, workers: int = 32):
        if not getattr(ladder, "embeddable", getattr(ladder, "simulated", False)):
            raise ConfigError(
                f"ladder {ladder.name!r} has models that are neither stand-ins nor llama_cpp models: GPU ladders are "
                "served by Triton's vLLM backend; use `advisor triton render` to write its model repository")
        self.ladder = ladder
        self.suite_paths = tuple(suite_paths)
        self.host = host
        self.verbose = verbose
        self._ports = {"grpc": grpc_port, "http": http_port, "metrics": metrics_port}
        self._workers = workers
        self._triton = None
        self._executor: ThreadPoolExecutor | None = None
        self._llamas: list = []  #: `LlamaServer` of each real model
        self._workspace: Path | None = None  #: this server's PyTriton workspace (``<PYTRITON_HOME>/advisor-<pid>-*``)

    # addresses -----------------------------------------------------------------------------------------
    @property
    def grpc_url(self) -> str:
        """gRPC address, ``host:port`` (what tritonclient.grpc expects)."""
        return f"{self.host}:{self._ports['grpc']}"

    @property
    def http_url(self) -> str:
        """HTTP base URL, ``http://host:port``."""
        return f"http://{self.host}:{self._ports['http']}"

    @property
    def metrics_url(self) -> str:
        """Prometheus endpoint, ``http://host:port/metrics``."""
        return f"http://{self.host}:{self._ports['metrics']}/metrics"

    @property
    def models(self) -> list[str]:
        """Triton model names served."""
        return [m.triton_model for m in self.ladder.models()]

    # lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> "EmbeddedTriton":
        """Start tritonserver and load every stand-in; return when all are ready (BackendError if not)."""
        if self._triton is not None:
            return self
        self._pick_ports()
        try:
            # heavy dependency, imported on use: pytriton
            from pytriton.model_config import ModelConfig
            from pytriton.triton import TritonConfig, TritonLifecyclePolicy, TritonSecurityConfig
        except ImportError as exc:  # pragma: no cover - depends on the platform
            raise BackendError(f"cannot start the embedded Triton: nvidia-pytriton is not installed ({exc})") from None

        if not self.verbose:
            logging.getLogger("pytriton").setLevel(logging.ERROR)
        ensure_libpython_on_path()
        # heavy dependency, imported on use: pytriton
        from pytriton.constants import PYTRITON_HOME

        clean_leaked(Path(PYTRITON_HOME))  # a killed probe leaves its workspace and shared memory behind
        workspace = self._workspace = Path(PYTRITON_HOME) / f"advisor-{os.getpid()}-{os.urandom(4).hex()}"
        config = TritonConfig(
            grpc_port=self._ports["grpc"], http_port=self._ports["http"], metrics_port=self._ports["metrics"],
            grpc_address=self.host, http_address=self.host, metrics_address=self.host,
            # no exit timeout: requests in flight are still answered (the stop waits for them), and the server does
            # not wait the timeout out for its Python-backend models to unload (2 s of every stop)
            log_verbose=1 if self.verbose else 0, exit_timeout_secs=0, strict_readiness=True)
        triton = _QuietTriton(config=config, security_config=TritonSecurityConfig(restricted_endpoints=[]),
                              verbose=self.verbose, workspace=workspace,
                              # the models are written to the workspace's repository and load as the server starts,
                              # all at once (through the load API, one after another: 8 of the 9.5 s of a start)
                              triton_lifecycle_policy=TritonLifecyclePolicy(local_model_store=True))
        self._executor = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="standin")
        inputs, outputs = pytriton_tensors()
        for model in self.ladder.models():
            if getattr(model, "llama_cpp", None) is not None:
                try:
                    server = llama_model.LlamaServer(model)
                except BaseException:
                    self.stop()
                    raise
                self._llamas.append(server)
                triton.bind(model_name=model.triton_model, infer_func=llama_model.infer_function(server),
                            inputs=inputs, outputs=outputs, config=ModelConfig(decoupled=True, batching=False))
                continue
            respond = standin_responder(model, self.suite_paths)
            latency_s = model.standin.latency_ms / 1000.0 if model.standin else 0.0
            triton.bind(model_name=model.triton_model, infer_func=infer_function(respond, latency_s, self._executor),
                        inputs=inputs, outputs=outputs, config=ModelConfig(decoupled=True, batching=False))
        self._triton = triton
        try:
            _start_process(triton)
            self._wait_healthy()
            triton.connect()  # loads the models and waits for them
            self._wait_ready()
        except BackendError:
            self.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - PyTriton raises many kinds
            logs = self._log_tail()
            self.stop()
            raise BackendError(f"embedded Triton failed to start: {exc}{logs}") from None
        return self

    def stop(self) -> None:
        """Stop the server and its workers (idempotent)."""
        triton, self._triton = self._triton, None
        if triton is not None:
            try:
                triton.stop()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
            self._remove_leftovers(triton)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        llamas, self._llamas = self._llamas, []
        for server in llamas:
            server.close()

    def _remove_leftovers(self, triton, shm: Path = Path("/dev/shm")) -> None:
        """Once the server is gone: the model copies tritonserver made in /tmp for this server's workspace and
        its Python backend's shared-memory regions (a clean stop leaves some of each behind)."""
        server = getattr(triton, "_triton_server", None)
        if self._workspace is None or (server is not None and server.is_alive()):
            return  # still stopping: the next start's `clean_leaked` removes them
        for folder, workspace in model_folders(self._workspace.parent):
            if workspace == self._workspace:
                remove_tree(folder)
        try:  # PyTriton keeps the prefix it gave the Python backend (``pytrtion<pid>-<random>``) in its config
            prefix = triton._python_backend_config["shm-region-prefix-name"]  # noqa: SLF001
        except (AttributeError, KeyError, TypeError):
            prefix = None
        if prefix:
            for segment in shm.glob(f"{prefix}*"):
                segment.unlink(missing_ok=True)

    def __enter__(self) -> "EmbeddedTriton":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def ready_line(self) -> str:
        """The machine-readable line `advisor triton serve` prints once serving."""
        return f"ready grpc={self.grpc_url} http={self.http_url} metrics={self.metrics_url}"

    # internals -------------------------------------------------------------------------------------------
    def _pick_ports(self) -> None:
        taken: set[int] = set()
        for name, port in self._ports.items():
            if port is None:
                port = free_port(self.host)
                while port in taken:
                    port = free_port(self.host)
            elif not _port_is_free(self.host, port):
                raise BackendError(f"cannot start the embedded Triton: {name} port {self.host}:{port} is already in use")
            taken.add(port)
            self._ports[name] = port

    def _alive(self) -> bool:
        server = getattr(self._triton, "_triton_server", None)
        return server is not None and server.is_alive()

    def _log_tail(self, lines: int = 6) -> str:
        server = getattr(self._triton, "_triton_server", None)
        text = server.logs() if server is not None else ""
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-lines:]
        hint = ""
        if "libpython" in text or "_recursion_count" in text:
            hint = (f" (the Python backend stub cannot load this interpreter's libpython: LD_LIBRARY_PATH must "
                    f"include {sysconfig.get_config_var('LIBDIR')})")
        return (hint + "; server log: " + " | ".join(tail)) if tail else hint

    def _get(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"{self.http_url}{path}", timeout=2) as resp:
                return resp.status
        except Exception:  # noqa: BLE001 - any failure means "not yet"
            return 0

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self._alive():
                raise BackendError(f"embedded Triton exited while starting{self._log_tail()}")
            if self._get("/v2/health/live") == 200:
                return
            time.sleep(0.1)
        raise BackendError(f"embedded Triton did not become live within {START_TIMEOUT_S:.0f}s{self._log_tail()}")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        for model in self.models:
            while self._get(f"/v2/models/{model}/ready") != 200:
                if not self._alive() or time.monotonic() > deadline:
                    raise BackendError(f"embedded Triton could not load stand-in model {model!r}{self._log_tail()}")
                time.sleep(0.1)


def _start_process(triton) -> None:
    """Start the tritonserver process of a PyTriton `Triton` (then wait ourselves: fails fast).

    PyTriton starts it with `sh`, whose output thread calls back the event loop running in the starting thread,
    if any, when the process ends. A caller inside a loop that closes before the server stops (an async test, an
    async setup) would then see "Event loop is closed" raised in that thread. So the process is started with no
    loop marked as running in this thread. (Not from another thread: PyTriton asks the kernel to stop tritonserver
    when the thread that started it ends.)
    """
    loop = asyncio._get_running_loop()  # noqa: SLF001 - asyncio's low-level pair, exported for event loops
    asyncio._set_running_loop(None)  # noqa: SLF001
    try:
        triton._run_server()  # noqa: SLF001 - PyTriton has no public "start without waiting"
    finally:
        asyncio._set_running_loop(loop)  # noqa: SLF001


def _quiet_triton_class():
    # heavy dependency, imported on use: pytriton
    from pytriton.triton import Triton

    class QuietTriton(Triton):
        """PyTriton's Triton with the server's stdout echo switchable (kept in memory for error messages), and its
        models cleaned side by side (`SideBySideModelManager`)."""

        def __init__(self, *, verbose: bool = False, **kwargs):
            self._echo = verbose
            super().__init__(**kwargs)
            self._model_manager.__class__ = _side_by_side_manager_class()  # noqa: SLF001 - built by Triton

        def _initialize_server(self) -> None:
            super()._initialize_server()
            self._triton_server._verbose = self._echo  # noqa: SLF001 - PyTriton prints every log line otherwise

    return QuietTriton


def _side_by_side_manager_class():
    # heavy dependency, imported on use: pytriton
    from pytriton.models.manager import ModelManager

    class SideBySideModelManager(ModelManager):
        """PyTriton's model manager, cleaning its models side by side.

        `Triton.stop` stops the server before it cleans the models, so there is nothing to unload; what is left is
        joining each model's threads, which PyTriton does one after another (up to 0.8 s each: three of a
        four-model stop's four seconds), and the joins are independent.
        """

        def clean(self) -> None:
            models = list(self._models.values())
            with ThreadPoolExecutor(max_workers=max(1, len(models)), thread_name_prefix="triton-models") as pool:
                for future in [pool.submit(model.clean) for model in models]:
                    future.result()
            self._models.clear()

    return SideBySideModelManager


def _QuietTriton(**kwargs):  # noqa: N802 - a lazily built class
    return _quiet_triton_class()(**kwargs)


def serve_forever(server: EmbeddedTriton, out=sys.stdout) -> None:
    """Start `server`, print its addresses and the ready line, and block until SIGINT/SIGTERM; then stop."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        print(f"embedded Triton serving {served_what(server.ladder)} of ladder {server.ladder.name!r}: "
              f"{', '.join(server.models)}", file=out)
        print(f"  gRPC    {server.grpc_url}\n  HTTP    {server.http_url}\n  metrics {server.metrics_url}", file=out)
        print(server.ready_line(), file=out, flush=True)
        while not stop.wait(0.5):
            if not server._alive():  # noqa: SLF001
                raise BackendError("embedded Triton exited unexpectedly" + server._log_tail())  # noqa: SLF001
        print("stopping", file=out, flush=True)
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def served_what(ladder) -> str:
    """What the embedded Triton serves for `ladder`, for messages: SIMULATED stand-ins or real CPU models."""
    real = [m for m in ladder.models() if getattr(m, "llama_cpp", None) is not None]
    if not real:
        return "SIMULATED stand-ins"
    return "real CPU models (llama.cpp)" if len(real) == len(ladder.models()) else "real CPU models and SIMULATED stand-ins"
