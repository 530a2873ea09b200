"""The shared deployment (docker-compose.yml) on a private Docker daemon, for
tests/integration/test_compose.py.

`ComposeStack` starts its own dockerd (scripts/docker_up.sh), builds the images FROM the
local Debian base (scripts/docker_build.sh), prepares the shared directory the host's Slurm
and the containers both see at the same path, runs docker-compose with
docker/compose.hostnet.yml (the CI cluster's slurm.conf names slurmctld 127.0.0.1), and
removes all of it again (`close`), also after a failure half-way.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
# Fixed: the image's venv lives at PREFIX/venv (build argument), so a stable prefix keeps
# the build cache valid across runs. One run at a time holds PREFIX.lock.
PREFIX = Path("/var/tmp/axbgate-compose")
COMPOSE = "/usr/bin/docker-compose"
DOCKER = "/usr/bin/docker"
PROJECT = "axbgateci"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ComposeStack:
    """One private dockerd + the compose project; every step logs its wall time (s)."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.docker_dir = Path(tempfile.mkdtemp(prefix="axbgate-docker.", dir="/var/tmp"))
        self._lock = open(f"{PREFIX}.lock", "w")  # noqa: SIM115 (held until close)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        nobody = pwd.getpwnam("nobody")
        self.uid, self.gid = nobody.pw_uid, nobody.pw_gid
        self.api_port, self.db_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.api_port}"
        self.env: dict[str, str] = {}
        self.bridges: set[str] = set()  # host interfaces of the compose network(s)

    def _timed(self, name: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
        start = time.monotonic()
        try:
            return subprocess.run(argv, check=True, text=True, capture_output=True, **kw)
        except subprocess.CalledProcessError as exc:
            raise AssertionError(f"{name} failed ({exc.returncode}):\n{exc.stdout[-3000:]}\n"
                                 f"{exc.stderr[-3000:]}") from None
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.monotonic() - start

    def start(self) -> None:
        """dockerd, images, the shared directory (venv from the image, data dir for nobody)."""
        out = self._timed("dockerd up", ["bash", str(ROOT / "scripts/docker_up.sh"),
                                         str(self.docker_dir)]).stdout
        docker_host = out.strip().splitlines()[-1].split("=", 1)[1]
        self.env = {**os.environ, "DOCKER_HOST": docker_host,
                    "COMPOSE_PROJECT_NAME": PROJECT,
                    "COMPOSE_FILE": "docker-compose.yml:docker/compose.hostnet.yml",
                    "AXBGATE_DB_PASSWORD": "ci-" + os.urandom(8).hex(),
                    "AXBGATE_UID": str(self.uid), "AXBGATE_GID": str(self.gid),
                    "AXBGATE_SHARED_DIR": str(PREFIX), "AXBGATE_PORT": str(self.api_port),
                    "AXBGATE_DB_PORT": str(self.db_port), "AXBGATE_NIGHTLY": "false",
                    "AXBGATE_SLURMCTLD_HOST": socket.gethostname().split(".")[0],
                    "AXBGATE_SLURMCTLD_ADDR": "127.0.0.1"}
        self._timed("images build", ["bash", str(ROOT / "scripts/docker_build.sh"), str(PREFIX)],
                    env=self.env)
        shutil.rmtree(PREFIX, ignore_errors=True)
        (PREFIX / "data").mkdir(parents=True)
        PREFIX.chmod(0o755)
        os.chown(PREFIX / "data", self.uid, self.gid)
        # The allocation runs the service's interpreter path (plan.python): put the image's
        # own venv there on the host (its python is Debian's /usr/bin/python3, as the host's).
        tar = subprocess.Popen([DOCKER, "run", "--rm", "--network", "none", "--entrypoint", "tar",
                                "axbgate:latest", "-C", str(PREFIX), "-cf", "-", "venv"],
                               stdout=subprocess.PIPE, env=self.env)
        self._timed("venv copy", ["tar", "-xf", "-", "-C", str(PREFIX)], stdin=tar.stdout)
        assert tar.wait(timeout=120) == 0

    def compose(self, *args: str, name: str | None = None) -> subprocess.CompletedProcess:
        """Run docker-compose in the repository root with the stack's environment."""
        return self._timed(name or f"compose {args[0]}", [COMPOSE, *args], cwd=ROOT, env=self.env)

    def up(self) -> None:
        """``docker-compose up -d`` (images already built); remembers the network's bridge."""
        self.compose("up", "-d", "--no-build", name="compose up")
        ids = self._timed("docker", [DOCKER, "network", "ls", "-q", "--no-trunc", "--filter",
                                     "driver=bridge"], env=self.env).stdout.split()
        current = {f"br-{i[:12]}" for i in ids}
        assert current and all(Path("/sys/class/net", b).exists() for b in current), current
        self.bridges |= current

    def psql(self, sql: str) -> list[list[str]]:
        """Rows of ``sql`` run by psql inside the db container (fields split on '|')."""
        out = self.compose("exec", "-T", "db", "psql", "-U", "axbgate", "-d", "axbgate",
                           "-v", "ON_ERROR_STOP=1", "-At", "-F", "|", "-c", sql, name="psql").stdout
        return [line.split("|") for line in out.splitlines() if line]

    def wait_ready(self, timeout_s: float = 120.0) -> dict:
        """Poll GET /readyz until it answers 200 or the deadline passes; the answer."""
        deadline = time.monotonic() + timeout_s
        start = time.monotonic()
        last = ""
        while time.monotonic() < deadline:
            try:
                r = httpx.get(f"{self.url}/readyz", timeout=5)
                if r.status_code == 200:
                    self.timings["ready wait"] = (self.timings.get("ready wait", 0.0)
                                                  + time.monotonic() - start)
                    return r.json()
                last = f"{r.status_code} {r.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.5)
        logs = self.compose("logs", "--tail=40", name="logs").stdout
        raise AssertionError(f"api not ready after {timeout_s} s: {last}\n{logs}")

    def leftovers(self) -> list[str]:
        """What of this daemon is left: processes naming its directory, mounts, bridges, DIR."""
        found = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if f"{self.docker_dir}/" in cmd:
                    found.append(f"process {proc.name}: {cmd[:100]}")
        for line in Path("/proc/self/mounts").read_text().splitlines():
            if f" {self.docker_dir}/" in line or f" {self.docker_dir} " in line:
                found.append(f"mount {line.split()[1]}")
        found += [f"bridge {b}" for b in self.bridges if Path("/sys/class/net", b).exists()]
        if self.docker_dir.exists():
            found.append(f"directory {self.docker_dir}")
        return found

    def close(self) -> None:
        """compose down -v, stop the daemon, remove its data-root and the shared directory."""
        start = time.monotonic()
        try:
            if self.env:
                subprocess.run([COMPOSE, "down", "-v", "--remove-orphans", "-t", "5"], cwd=ROOT,
                               env=self.env, capture_output=True, timeout=120, check=False)
        finally:
            subprocess.run(["bash", str(ROOT / "scripts/docker_down.sh"), str(self.docker_dir)],
                           capture_output=True, timeout=300, check=False)
            shutil.rmtree(PREFIX, ignore_errors=True)
            self._lock.close()
            self.timings["teardown"] = time.monotonic() - start
