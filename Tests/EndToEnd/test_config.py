"""Configuration errors through `mirrorgate check` and `serve` (SPEC §1, §2): exit 2, file:line and key."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest
from harness import binary, free_port, run_cli


def write(tmp_path, text: str, name: str = "mg.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def check(path, env=None):
    r = run_cli(["check", "--config", str(path)], timeout=30, env=env)
    return r.returncode, r.stdout + r.stderr


def assert_error_at(out: str, path, line: int, *needles: str):
    name = re.escape(path.name)
    assert re.search(rf"{name}:{line}\b", out), f"expected '{path.name}:{line}' in:\n{out}"
    for n in needles:
        assert n in out, f"expected {n!r} in:\n{out}"


def test_valid_config_passes(tmp_path):
    p = write(
        tmp_path,
        f"""
        server:
          listen: 127.0.0.1:{free_port()}
          maxBodySize: 2MiB
          shutdownGrace: 3s
        dataDir: {tmp_path / 'data'}
        algolia:
          appId: APP
          apiKey: key
          hosts: ["http://127.0.0.1:9"]
          timeout: 2500ms
        """,
    )
    code, out = check(p)
    assert code == 0, out


def test_unknown_top_level_key(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 127.0.0.1:8080
        colour: blue
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert_error_at(out, p, 3, "colour")


def test_unknown_nested_key(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 127.0.0.1:8080
          maxBodySise: 1MiB
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert_error_at(out, p, 3, "maxBodySise")


def test_keys_once_unsupported_are_accepted(tmp_path):
    """Every key the configuration used to refuse as "not supported in this version" is built now
    (`MirrorgateConfiguration.unsupportedKeys` is empty; its mechanism is unit-tested with a table of its
    own): run budgets and windows (issue 17), the request-queue options (issue 16)."""
    p = write(
        tmp_path,
        """
        policies:
          p:
            maxRunDuration: 5s
            window: "22:00-06:00"
        odata:
          services:
            X:
              mount: /odata/x/
              upstream: http://127.0.0.1:9/x/
              policy: p
              enableRequestQueueOptimization: true
              enableUndoLocalCreation: true
              enableTransactionBuilder: true
        """,
    )
    code, out = check(p)
    assert code == 0, out
    assert "not supported" not in out


def test_store_encryption_keys_are_checked(tmp_path):
    p = write(
        tmp_path,
        """
        algolia:
          storeEncryptionKey: ${MG_UNSET_STORE_KEY:-}
        odata:
          services:
            X:
              mount: /odata/x/
              upstream: http://127.0.0.1:9/x/
              storeEncryptionKey: "k"
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert_error_at(out, p, 2, "algolia.storeEncryptionKey", "is empty")
    assert_error_at(out, p, 8, "storeEncryptionKey", "at least 8 characters")
    ok = write(tmp_path, 'odata:\n  services:\n    X:\n      upstream: http://127.0.0.1:9/x/\n      storeEncryptionKey: "long enough"\n')
    code, out = check(ok)
    assert code == 0, out


def test_bad_duration(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 127.0.0.1:8080
          shutdownGrace: soon
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert_error_at(out, p, 3, "shutdownGrace")


def test_bad_size(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          maxBodySize: lots
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert_error_at(out, p, 2, "maxBodySize")


def test_non_loopback_listen_needs_allow_remote(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 0.0.0.0:8080
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert "allowRemote" in out, out
    assert re.search(rf"{re.escape(p.name)}:\d+", out), out


def test_non_loopback_with_allow_remote_needs_token(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 0.0.0.0:8080
          allowRemote: true
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert "token" in out, out


def test_non_loopback_with_allow_remote_and_token_ok(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 0.0.0.0:8080
          allowRemote: true
        admin:
          token: abc
        """,
    )
    code, out = check(p)
    assert code == 0, out


def test_unset_env_var_is_error_and_default_works(tmp_path):
    p = write(
        tmp_path,
        """
        algolia:
          appId: APP
          apiKey: ${MG_E2E_SURELY_UNSET_VAR}
        """,
    )
    code, out = check(p, env={})
    assert code == 2, out
    assert_error_at(out, p, 3, "MG_E2E_SURELY_UNSET_VAR")
    p2 = write(
        tmp_path,
        """
        algolia:
          appId: APP
          apiKey: ${MG_E2E_SURELY_UNSET_VAR:-fallback}
        """,
        name="ok.yaml",
    )
    code, out = check(p2)
    assert code == 0, out


def test_env_var_interpolated(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: ${MG_E2E_LISTEN}
        """,
    )
    code, out = check(p, env={"MG_E2E_LISTEN": "0.0.0.0:8080"})
    assert code == 2 and "allowRemote" in out, "the interpolated value must be validated"
    code, out = check(p, env={"MG_E2E_LISTEN": "127.0.0.1:8080"})
    assert code == 0, out


def test_yaml_syntax_error(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 127.0.0.1:8080
         bad indent: [
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert p.name in out, out


def test_missing_config_file(tmp_path):
    code, out = check(tmp_path / "absent.yaml")
    assert code == 2, out
    assert "absent.yaml" in out


def test_serve_with_bad_config_exits_2(tmp_path):
    p = write(
        tmp_path,
        """
        server:
          listen: 127.0.0.1:8080
        nonsense: 1
        """,
    )
    r = run_cli(["serve", "--config", str(p)], timeout=20)
    assert r.returncode == 2, r.stdout + r.stderr
    assert_error_at(r.stdout + r.stderr, p, 3, "nonsense")


@pytest.mark.parametrize("args", [["frobnicate"], ["serve", "--no-such-flag"]])
def test_bad_usage_exits_2(args):
    r = run_cli(args, timeout=20)
    assert r.returncode == 2, r.stdout + r.stderr


def test_binary_exists():
    assert binary().exists(), f"{binary()} is missing"


def test_check_reports_missing_and_unreadable_bootstrap_files(tmp_path):
    """`check` opens what `serve` will need: every bootstrap file, reported at its line (SPEC §1)."""
    (tmp_path / "settings.json").write_text("{}")
    (tmp_path / "folder.xml").mkdir()
    p = write(
        tmp_path,
        f"""
        dataDir: {tmp_path / 'data'}
        algolia:
          appId: APP
          apiKey: key
          hosts: ["http://127.0.0.1:9"]
          offlineIndices:
            notes:
              bootstrap:
                settings: settings.json
                objects: [absent.json]
        odata:
          services:
            s:
              upstream: http://127.0.0.1:9/
              bootstrap:
                metadata: folder.xml
        """,
    )
    code, out = check(p)
    assert code == 2, out
    assert_error_at(out, p, 10, "algolia.offlineIndices.notes.bootstrap.objects", "'absent.json' does not exist")
    assert_error_at(out, p, 16, "odata.services.s.bootstrap.metadata", "'folder.xml' is a directory")
    assert "settings.json" not in out, out
    # the same file is accepted once the files are there
    (tmp_path / "absent.json").write_text("[]")
    (tmp_path / "folder.xml").rmdir()
    (tmp_path / "folder.xml").write_text("<edmx/>")
    code, out = check(p)
    assert code == 0, out


def _as_other_user():
    """preexec_fn that runs a child as `nobody` when the tests run as root (root may write anywhere, so a
    permission test needs another user); None as a normal user (then a mode 0555 directory does it)."""
    if os.geteuid() != 0:
        return None

    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    return drop


def _run_as(args, cwd, preexec):
    """Runs the binary (as `nobody` with `preexec`) from a copy in `cwd`, a directory `nobody` can traverse:
    the build folder may sit in a private directory (CI clones into a mode 0700 temporary folder)."""
    exe = Path(cwd) / "mirrorgate"
    if not exe.exists():
        shutil.copy2(binary(), exe)
        os.chmod(exe, 0o755)
    return subprocess.run(
        [str(exe), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=str(cwd),
        preexec_fn=preexec,
    )


def test_unwritable_data_dir_is_one_clean_line_in_check_and_serve():
    """An unwritable dataDir: `check` fails with file:line, and `serve` stops before opening anything with
    the same line, never a Foundation error dump (NSCocoaErrorDomain…)."""
    assert binary().exists(), f"{binary()} is missing"
    preexec = _as_other_user()
    # pytest's tmp_path lives in a 0700 directory of root's: `nobody` needs a path it can traverse
    base = Path(tempfile.mkdtemp(prefix="mg-e2e-perm-"))
    try:
        os.chmod(base, 0o755)
        readonly = base / "readonly"
        readonly.mkdir()
        os.chmod(readonly, 0o755 if preexec else 0o555)
        for target, expected in ((readonly / "data", "cannot be created in"), (readonly, "is not writable")):
            p = write(
                base,
                f"""
                server:
                  listen: 127.0.0.1:{free_port()}
                dataDir: {target}
                """,
            )
            os.chmod(p, 0o644)
            for command in (["check", "--config", str(p)], ["serve", "--config", str(p)]):
                r = _run_as(command, base, preexec)
                out = r.stdout + r.stderr
                assert r.returncode == 2, f"{command[0]}: exit {r.returncode}\n{out}"
                assert_error_at(out, p, 3, "dataDir", expected, "Permission denied")
                assert "NSCocoaErrorDomain" not in out and "Error Domain" not in out, out
            assert not (readonly / "data").exists()
        # `--data-dir` names the culprit too
        p = write(base, f"server:\n  listen: 127.0.0.1:{free_port()}\n", name="ok.yaml")
        os.chmod(p, 0o644)
        r = _run_as(["serve", "--config", str(p), "--data-dir", str(readonly / "d")], base, preexec)
        out = r.stdout + r.stderr
        assert r.returncode == 2, out
        assert "--data-dir: dataDir:" in out and "Permission denied" in out, out
    finally:
        os.chmod(base / "readonly", 0o755)
        shutil.rmtree(base)
