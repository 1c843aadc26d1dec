"""Start, stop and inspect a Neo4j server (the driver itself is memory/neo4j_driver.py).

Where a Docker engine answers, `docker/compose.yml` runs the official image. Elsewhere
(CI, offline machines) the Java launcher in `docker/neo4j-launcher` runs the same Neo4j
5.26 Community server from Maven Central artifacts: Maven builds it once into
LAUNCHER_CACHE, and it runs detached with its home (data, logs, pid file) in
`launcher_home()` (or a home the caller names, as the tests do), so the data survives
restarts.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Literal
from urllib.parse import urlsplit

from neo4j.exceptions import AuthError
from pydantic import BaseModel

from htam_graph.config import Settings, data_dir
from htam_graph.errors import ConfigError, StoreError, UserError
from htam_graph.memory.neo4j_driver import connect, neo4j_uri, server_components
from htam_graph.resources import resource_dir

log = logging.getLogger(__name__)

DEFAULT_HTTP_PORT = 7474
LAUNCHER_CACHE = Path.home() / ".cache" / "htam-graph" / "neo4j-launcher"
# The flags Neo4j's own start scripts pass, and a heap cap for small machines.
JVM_FLAGS = (
    "-Xmx1g",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
)
READY_MARK = "READY bolt://"
LOG_TAIL_LINES = 6


class ServerInfo(BaseModel):
    """How a started (or already running) server is reached."""

    uri: str
    browser: str
    via: Literal["docker", "launcher", "existing"]
    pid: int | None = None
    log: Path | None = None


class ServerStatus(BaseModel):
    uri: str
    reachable: bool
    version: str | None = None
    edition: str | None = None
    pid: int | None = None
    error: str | None = None


def launcher_home() -> Path:
    """Where `htam db start` keeps the launcher's server (data, logs, pid file)."""
    return data_dir() / "neo4j"


def status(settings: Settings, home: Path | None = None) -> ServerStatus:
    """Reachability and version; a wrong password raises rather than look like 'down'."""
    uri = neo4j_uri(settings)
    home = home or launcher_home()
    pid = _launcher_pid(home)
    try:
        driver = connect(settings)
    except UserError as e:
        if isinstance(e.__cause__, AuthError):
            raise
        return ServerStatus(uri=uri, reachable=False, pid=pid, error=str(e))
    with driver:
        version, edition = server_components(driver)
    return ServerStatus(uri=uri, reachable=True, version=version, edition=edition, pid=pid)


def start(
    settings: Settings, wait_s: float = 120, http_port: int = DEFAULT_HTTP_PORT, home: Path | None = None
) -> ServerInfo:
    """Start Neo4j (Docker if an engine answers, else the launcher); wait for Bolt.

    `home`: run the launcher with its data, logs and pid file there (a test's own server),
    never through Docker."""
    uri = neo4j_uri(settings)
    host, port = _bolt_address(uri)
    browser = f"http://{host}:{http_port}/browser/"
    use_docker = home is None and _docker_available()
    home = home or launcher_home()
    current = status(settings, home)
    if current.reachable:
        return ServerInfo(uri=uri, browser=browser, via="existing", pid=current.pid)
    if current.pid is not None:
        raise StoreError(
            f"a Neo4j launcher (pid {current.pid}) is running but does not answer at {uri};"
            " wait for it, or run `htam db stop` and start again",
            store=uri,
        )
    if use_docker:
        _compose(settings, http_port, "up", "-d")
        _wait_for_bolt(settings, time.monotonic() + wait_s)
        return ServerInfo(uri=uri, browser=browser, via="docker")
    if host not in ("127.0.0.1", "localhost"):
        raise ConfigError(
            f"without Docker, Neo4j runs on this machine only, but HTAM_NEO4J_URI={uri}:"
            " set it to bolt://127.0.0.1:<port>",
            setting="HTAM_NEO4J_URI",
            value=uri,
        )
    process = _spawn_launcher(settings, port, http_port, home)
    _await_launcher(process, settings, home, time.monotonic() + wait_s)
    return ServerInfo(uri=uri, browser=browser, via="launcher", pid=process.pid, log=_log_path(home))


def stop(settings: Settings, timeout_s: float = 60, home: Path | None = None) -> bool:
    """Stop the server this machine started (the launcher's in `home`); True if one was running."""
    explicit_home = home is not None
    home = home or launcher_home()
    pid = _launcher_pid(home)
    if pid is not None:
        _terminate(pid, timeout_s)
        _pid_path(home).unlink(missing_ok=True)
        return True
    if not explicit_home and _docker_available() and _compose(settings, DEFAULT_HTTP_PORT, "ps", "-q").strip():
        _compose(settings, DEFAULT_HTTP_PORT, "down")
        return True
    return False


def build_launcher() -> Path:
    """Compile the launcher and resolve its classpath, once per version of its sources:
    each version builds into a folder of its own, so checkouts of different versions on
    one machine never rebuild each other's launcher (or one another's running server's)."""
    source = _docker_dir() / "neo4j-launcher"
    files = [source / "pom.xml", *sorted((source / "src").rglob("*.java"))]
    files += sorted(p for p in (source.parent / "browser").rglob("*") if p.is_file())  # on its classpath too
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    cache = LAUNCHER_CACHE / digest[:16]
    stamp = cache / "source.sha256"
    if stamp.is_file() and stamp.read_text() == digest:
        return cache
    maven = _tool("mvn", "Maven 3")
    built = subprocess.run(
        [
            maven,
            "-q",
            "-B",
            "-f",
            str(source / "pom.xml"),
            f"-Dhtam.cache={cache}",
            "compile",
            "dependency:build-classpath",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise ConfigError(f"building the Neo4j launcher failed: {_tail(built.stdout + built.stderr)}")
    stamp.write_text(digest)
    return cache


def _spawn_launcher(settings: Settings, port: int, http_port: int, home: Path) -> subprocess.Popen[bytes]:
    cache = build_launcher()
    java = _tool("java", "Java 17 or newer")
    _private_dir(home)
    classpath = os.pathsep.join([str(cache / "target" / "classes"), (cache / "classpath.txt").read_text().strip()])
    command = [
        java,
        *JVM_FLAGS,
        "-cp",
        classpath,
        "htam.Launcher",
        "--home",
        str(home),
        "--bolt-port",
        str(port),
        "--http-port",
        str(http_port),
    ]
    # The password goes by environment so that it does not show in `ps`.
    env = {**os.environ, "HTAM_NEO4J_PASSWORD": settings.neo4j_password.get_secret_value()}
    with _private_file(_log_path(home)) as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=home,
            env=env,
            start_new_session=True,
        )
    with _private_file(_pid_path(home)) as pid_file:
        pid_file.write(str(process.pid).encode())
    return process


def _private_dir(path: Path) -> None:
    """The server's home (its data, its log) is the user's alone."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_uid == os.getuid():
        path.chmod(0o700)


def _private_file(path: Path) -> IO[bytes]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when it was there before
    return os.fdopen(fd, "wb")


def _await_launcher(process: subprocess.Popen[bytes], settings: Settings, home: Path, deadline: float) -> None:
    # Before READY the server may not answer yet, so Bolt is not asked earlier.
    while READY_MARK not in _log_path(home).read_text(errors="replace"):
        if process.poll() is not None:
            _pid_path(home).unlink(missing_ok=True)
            raise StoreError(f"Neo4j did not start: {_failure_reason(home)} (log: {_log_path(home)})", store=str(home))
        if time.monotonic() > deadline:
            _terminate(process.pid, timeout_s=30)
            _pid_path(home).unlink(missing_ok=True)
            raise StoreError(
                f"Neo4j did not start in time: {_failure_reason(home)} (log: {_log_path(home)})", store=str(home)
            )
        time.sleep(0.5)
    try:
        connect(settings).close()
    except UserError as e:
        if not isinstance(e.__cause__, AuthError):
            raise
        # The launcher sets a password only on a server's first start: this one has
        # another, which `db start` never changes. Stop it rather than leave it unusable.
        _terminate(process.pid, timeout_s=30)
        _pid_path(home).unlink(missing_ok=True)
        raise ConfigError(
            f"the Neo4j server in {home} has a password other than HTAM_NEO4J_PASSWORD, and `htam db start` never"
            " changes an existing password: set HTAM_NEO4J_PASSWORD to it (the server was stopped again)",
            setting="HTAM_NEO4J_PASSWORD",
        ) from e


def _wait_for_bolt(settings: Settings, deadline: float) -> None:
    while True:
        try:
            connect(settings).close()
            return
        except UserError as e:
            if isinstance(e.__cause__, AuthError):
                raise e.with_message(
                    f"{e}; the password of an existing Docker volume is never changed by `htam db start`"
                ) from e
            if time.monotonic() > deadline:
                raise
        time.sleep(1)


def _failure_reason(home: Path) -> str:
    text = _log_path(home).read_text(errors="replace")
    # Bolt and the web server word a taken port differently.
    bind = re.search(r"bind to the socket /?([\w.:]+)|Address ([\w.:]+) is already in use", text)
    if bind:
        return f"{bind.group(1) or bind.group(2)} is already in use by another process"
    return _tail(text)


def _tail(text: str) -> str:
    """The last lines worth reading, joined into one line (stack frames dropped)."""
    lines = [line.strip() for line in text.splitlines()]
    kept = [line for line in lines if line and not line.startswith(("at ", "..."))]
    return " | ".join(kept[-LOG_TAIL_LINES:])


def _bolt_address(uri: str) -> tuple[str, int]:
    parts = urlsplit(uri)
    return parts.hostname or "127.0.0.1", parts.port or 7687


def _launcher_pid(home: Path) -> int | None:
    """The pid in the pid file if that process is alive and still our launcher."""
    try:
        pid = int(_pid_path(home).read_text())
    except (FileNotFoundError, ValueError):
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not _alive(pid) or (cmdline.exists() and b"htam.Launcher" not in cmdline.read_bytes()):
        return None
    return pid


def _alive(pid: int) -> bool:
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False  # our own child, exited and now reaped
    except ChildProcessError:
        pass  # not our child: ask the kernel below
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _terminate(pid: int, timeout_s: float) -> None:
    """SIGTERM lets Neo4j checkpoint and close its stores; SIGKILL only if it hangs."""
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            _signal(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.2)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it already exited
        os.kill(pid, sig)


def _docker_available() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    probe = subprocess.run([docker, "info"], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def _compose(settings: Settings, http_port: int, *args: str) -> str:
    _, port = _bolt_address(neo4j_uri(settings))
    env = {
        **os.environ,
        "HTAM_NEO4J_PASSWORD": settings.neo4j_password.get_secret_value(),
        "HTAM_NEO4J_BOLT_PORT": str(port),
        "HTAM_NEO4J_HTTP_PORT": str(http_port),
    }
    compose_file = _docker_dir() / "compose.yml"
    done = subprocess.run(
        ["docker", "compose", "-f", str(compose_file), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise StoreError(f"`docker compose {' '.join(args)}` failed: {_tail(done.stderr)}")
    return done.stdout


def _docker_dir() -> Path:
    """docker/ of a source checkout, or its copy inside an installed wheel."""
    try:
        return resource_dir("docker")
    except FileNotFoundError as e:
        raise ConfigError(str(e)) from e


def _tool(name: str, what: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ConfigError(f"`{name}` not found: install {what}, or Docker, to run Neo4j", value=name)
    return path


def _log_path(home: Path) -> Path:
    return home / "launcher.log"


def _pid_path(home: Path) -> Path:
    return home / "launcher.pid"
