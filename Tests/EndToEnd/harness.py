"""Starting the real `mirrorgate` binary for end-to-end tests, with bounded waits everywhere.

The binary is `$MIRRORGATE_BIN`, else `<repo>/.build/release/mirrorgate`. Each gateway gets an
ephemeral loopback port, its own temporary directory holding `mirrorgate.yaml`, `data/` and
`stderr.log`, is awaited on `GET /_mirrorgate/health`, and is stopped with SIGTERM.

With `MIRRORGATE_TEST_ENCRYPTION=1` every gateway config gets `TEST_STORE_KEY` as
`algolia.storeEncryptionKey` and as the `storeEncryptionKey` of each OData service that does not set one
itself (`null` included), so that the whole suite runs on encrypted stores.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

START_TIMEOUT = 20.0  # seconds for the gateway to answer /_mirrorgate/health
STOP_SLACK = 5.0  # seconds beyond shutdownGrace that a SIGTERM may take


ENCRYPTION = os.environ.get("MIRRORGATE_TEST_ENCRYPTION") == "1"
TEST_STORE_KEY = "e2e store key 0123456789"


def with_store_keys(config: dict) -> dict:
    """`config` with the test key on every store that does not name its own (see the module's doc)."""
    config = json.loads(json.dumps(config))
    algolia = config.setdefault("algolia", {})
    algolia.setdefault("storeEncryptionKey", TEST_STORE_KEY)
    for service in ((config.get("odata") or {}).get("services") or {}).values():
        if isinstance(service, dict):
            service.setdefault("storeEncryptionKey", TEST_STORE_KEY)
    return config


def binary() -> Path:
    env = os.environ.get("MIRRORGATE_BIN")
    return Path(env) if env else REPO / ".build" / "release" / "mirrorgate"


def free_port() -> int:
    """A loopback port that was free a moment ago (the kernel picks it)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -- a tiny YAML writer: block mappings and sequences, JSON-quoted scalars (valid YAML) ----------
def _scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    return json.dumps(str(v))


def to_yaml(obj, indent: int = 0) -> str:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(obj, dict):
        if not obj:
            return pad + "{}\n"
        for k, v in obj.items():
            if isinstance(v, dict) and v:
                lines.append(f"{pad}{k}:\n{to_yaml(v, indent + 1)}")
            elif isinstance(v, list) and v:
                lines.append(f"{pad}{k}:\n{to_yaml(v, indent + 1)}")
            elif isinstance(v, dict):
                lines.append(f"{pad}{k}: {{}}\n")
            elif isinstance(v, list):
                lines.append(f"{pad}{k}: []\n")
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}\n")
        return "".join(lines)
    if isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)) and v:
                body = to_yaml(v, indent + 1)
                # put the first line after the dash
                first, _, rest = body.partition("\n")
                lines.append(f"{pad}- {first.strip()}\n{rest}")
            else:
                lines.append(f"{pad}- {_scalar(v) if not isinstance(v, (dict, list)) else json.dumps(v)}\n")
        return "".join(lines)
    return pad + _scalar(obj) + "\n"


def deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in (extra or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


class GatewayError(AssertionError):
    pass


class Gateway:
    """One running `mirrorgate serve` process."""

    def __init__(self, workdir: Path, config: dict, name: str = "gw"):
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.config = with_store_keys(config) if ENCRYPTION else config
        self.config_path = workdir / "mirrorgate.yaml"
        self.stderr_path = workdir / "stderr.log"
        self.stdout_path = workdir / "stdout.log"
        self.proc: subprocess.Popen | None = None
        self.exit_code: int | None = None
        self.port = 0
        self.token = (config.get("admin") or {}).get("token")

    # -- addresses ----------------------------------------------------------
    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.origin + path

    def admin_headers(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    # -- lifecycle ----------------------------------------------------------
    def start(self, attempts: int = 3) -> "Gateway":
        exe = binary()
        if not exe.exists():
            raise GatewayError(
                f"mirrorgate binary not found at {exe}: build it with `swift build -c release --product mirrorgate` "
                "or set MIRRORGATE_BIN"
            )
        last = ""
        for _ in range(attempts):
            self.port = free_port()
            cfg = deep_merge(self.config, {"server": {"listen": f"127.0.0.1:{self.port}"}})
            cfg.setdefault("dataDir", str(self.workdir / "data"))
            self.config_path.write_text(to_yaml(cfg))
            err = open(self.stderr_path, "ab")
            out = open(self.stdout_path, "ab")
            self.proc = subprocess.Popen(
                [str(exe), "serve", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=str(self.workdir),
                # A shell without job control starts background commands with SIGINT ignored and the
                # child would inherit that: give the gateway default dispositions, as a terminal would.
                preexec_fn=_default_signals,
            )
            err.close()
            out.close()
            ok, last = self._await_health()
            if ok:
                return self
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            if "in use" not in self.stderr().lower():
                break
        raise GatewayError(f"gateway did not become healthy: {last}\n--- stderr ---\n{self.stderr()[-4000:]}")

    def _await_health(self) -> tuple[bool, str]:
        deadline = time.monotonic() + START_TIMEOUT
        last = "no attempt"
        for _ in range(int(START_TIMEOUT / 0.05) + 1):
            if self.proc.poll() is not None:
                return False, f"process exited with {self.proc.returncode}"
            if time.monotonic() > deadline:
                break
            try:
                status, _, body = request("GET", self.url("/_mirrorgate/health"), headers=self.admin_headers(), timeout=1)
                if status == 200:
                    return True, ""
                last = f"health answered {status}: {body[:200]!r}"
            except OSError as exc:
                last = f"health: {exc!r}"
            time.sleep(0.05)
        return False, f"timeout after {START_TIMEOUT}s ({last})"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float | None = None) -> tuple[int | None, float]:
        """SIGTERM, then wait (bounded). Returns (exit code or None if it had to be killed, seconds)."""
        if self.proc is None:
            return None, 0.0
        if self.proc.poll() is not None:
            self.exit_code = self.proc.returncode
            return self.exit_code, 0.0
        grace = timeout if timeout is not None else parse_duration(
            ((self.config.get("server") or {}).get("shutdownGrace")) or "5s"
        ) + STOP_SLACK
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.proc.wait(timeout=grace)
            return self.exit_code, time.monotonic() - t0
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.exit_code = None
            return None, time.monotonic() - t0

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def parse_duration(s) -> float:
    s = str(s).strip()
    for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * mult
    return float(s)


def request(method: str, url: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 10):
    """One HTTP request with http.client (no retries, no redirects). Returns (status, headers, body)."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def raw_exchange(port: int, payload: bytes, timeout: float = 5.0, read_limit: int = 1 << 20) -> bytes:
    """Send raw bytes to 127.0.0.1:port and read until the peer closes or `timeout` passes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    deadline = time.monotonic() + timeout
    try:
        try:
            s.sendall(payload)
        except OSError:
            pass
        chunks = []
        total = 0
        for _ in range(10_000):
            left = deadline - time.monotonic()
            if left <= 0 or total >= read_limit:
                break
            s.settimeout(left)
            try:
                c = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not c:
                break
            chunks.append(c)
            total += len(c)
            if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                break
        return b"".join(chunks)
    finally:
        s.close()


def _complete(data: bytes) -> bool:
    """True when `data` holds a full response with a Content-Length body (or a bodiless one)."""
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            try:
                return len(body) >= int(v.strip())
            except ValueError:
                return False
        if k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower():
            return body.endswith(b"0\r\n\r\n")
    return False


def status_of(raw: bytes) -> int | None:
    line = raw.split(b"\r\n", 1)[0]
    parts = line.split()
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/"):
        try:
            return int(parts[1])
        except ValueError:
            return None
    return None


def run_cli(args: list[str], timeout: float = 30.0, cwd: Path | None = None, env: dict | None = None):
    """Run the binary with arguments; returns CompletedProcess (bounded by `timeout`)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run(
        [str(binary()), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(cwd) if cwd else None,
        env=e,
    )
