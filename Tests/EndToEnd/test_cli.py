"""The command line itself: `serve` with the built-in demo, --listen / --data-dir overrides (SPEC §1)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time

from harness import REPO, binary, free_port, request


def _start(args: list[str], cwd, log):
    def preexec():
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    with open(log, "ab") as f:
        return subprocess.Popen(
            [str(binary()), *args], cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=f, stderr=f, preexec_fn=preexec
        )


def _await(port: int, proc, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / 0.05) + 1):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        try:
            st, _, _ = request("GET", f"http://127.0.0.1:{port}/_mirrorgate/health", timeout=1)
            if st == 200:
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def _stop(proc) -> int | None:
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
        return None


def test_serve_without_config_runs_the_demo(tmp_path):
    """The README's first command ends in `mirrorgate serve`: with no config file it serves the demo."""
    port = free_port()
    data = tmp_path / "data"
    log = tmp_path / "demo.log"
    # as scripts/demo.sh runs it: from the repository root (the demo's bootstrap files live in config/)
    proc = _start(["serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)], REPO, log)
    try:
        assert _await(port, proc), f"demo did not start:\n{log.read_text(errors='replace')[-3000:]}"
        st, _, body = request("GET", f"http://127.0.0.1:{port}/_mirrorgate/status", timeout=5)
        assert st == 200
        doc = json.loads(body)
        assert "upstreams" in doc
        # the demo's first curl already shows local answers (SPEC §1; config/demo.yaml)
        st, _, body = request(
            "POST",
            f"http://127.0.0.1:{port}/1/indexes/demo_packages/query",
            body=b'{"query":"","hitsPerPage":3}',
            headers={
                "Content-Type": "application/json",
                "X-Algolia-Application-Id": "DEMOAPP",
                "X-Algolia-API-Key": "demo-search-key",
            },
            timeout=10,
        )
        assert st == 200, body[:300]
        res = json.loads(body)
        assert len(res["hits"]) == 3
    finally:
        code = _stop(proc)
    assert code == 0, f"exit {code}:\n{log.read_text(errors='replace')[-3000:]}"
    # whatever the demo stored is private to the user
    for root, _, files in os.walk(data):
        for name in files:
            mode = stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode)
            assert mode & 0o077 == 0, f"{name} has mode {oct(mode)}, expected 0600"


def test_listen_and_data_dir_override_the_config(tmp_path):
    cfg_port, port = free_port(), free_port()
    data = tmp_path / "override-data"
    cfg = tmp_path / "mg.yaml"
    cfg.write_text(f'server:\n  listen: "127.0.0.1:{cfg_port}"\ndataDir: "{tmp_path / "cfg-data"}"\n')
    log = tmp_path / "serve.log"
    proc = _start(["serve", "--config", str(cfg), "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)], tmp_path, log)
    try:
        assert _await(port, proc), f"did not listen on the --listen port:\n{log.read_text(errors='replace')[-3000:]}"
        try:
            st, _, _ = request("GET", f"http://127.0.0.1:{cfg_port}/_mirrorgate/health", timeout=1)
            assert False, f"the config's port must not be used when --listen is given (answered {st})"
        except OSError:
            pass
    finally:
        code = _stop(proc)
    assert code == 0
    assert not (tmp_path / "cfg-data").exists() or not any((tmp_path / "cfg-data").iterdir())


def test_version_flag():
    r = subprocess.run([str(binary()), "--version"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    assert r.stdout.strip()


def test_demo_runs_without_a_checkout(tmp_path):
    """The demo's data is compiled in: from a directory with no config/ around it (as in a container),
    `serve` answers the mirrored index, the offline index and the OData service locally, and removes the
    copy of the demo's files it wrote when it stops."""
    port = free_port()
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    log = tmp_path / "demo.log"

    def preexec():
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    env = dict(os.environ, TMPDIR=str(scratch))
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            [str(binary()), "serve", "--listen", f"127.0.0.1:{port}"],
            cwd=str(empty), stdin=subprocess.DEVNULL, stdout=f, stderr=f, preexec_fn=preexec, env=env,
        )
    try:
        assert _await(port, proc), f"demo did not start:\n{log.read_text(errors='replace')[-3000:]}"
        headers = {
            "Content-Type": "application/json",
            "X-Algolia-Application-Id": "DEMOAPP",
            "X-Algolia-API-Key": "demo-search-key",
        }
        for index in ("demo_mirror", "demo_packages"):
            st, _, body = request(
                "POST", f"http://127.0.0.1:{port}/1/indexes/{index}/query",
                body=b'{"query":"pythn","hitsPerPage":3}', headers=headers, timeout=10,
            )
            assert st == 200, body[:300]
            res = json.loads(body)
            assert res["nbHits"] > 0 and res["hits"][0]["objectID"].startswith("python"), res
            if index == "demo_mirror":
                assert res["origin"] == "local", res
        st, hdrs, body = request("GET", f"http://127.0.0.1:{port}/odata/demo/Customers?$expand=Orders", timeout=10)
        assert st == 200, body[:300]
        customers = json.loads(body)["value"]
        assert len(customers) >= 3 and any(c["Orders"] for c in customers), customers
        written = list(scratch.glob("mirrorgate-demo.*"))
        assert len(written) == 1, written
    finally:
        code = _stop(proc)
    assert code == 0, f"exit {code}:\n{log.read_text(errors='replace')[-3000:]}"
    assert list(scratch.iterdir()) == [], "the demo's files must be removed at stop"
    # the data went where the demo says: ./mirrorgate-data of the working directory
    assert (empty / "mirrorgate-data").is_dir()
