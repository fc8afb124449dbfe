"""Network faults on loopback for the end-to-end tests: a black hole and a refused port."""

from __future__ import annotations

import socket
import threading


class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never answers (nor reads, nor closes) until stopped.

    From the client's side the connect succeeds and then the request waits forever: the shape of a
    dropped route or a hung upstream, which only the caller's own deadline can end.
    """

    def __init__(self, port: int = 0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(128)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.held: list[socket.socket] = []
        self.accepted = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "BlackHole":
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with self._lock:
                self.held.append(conn)
                self.accepted += 1

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        with self._lock:
            for c in self.held:
                try:
                    c.close()
                except OSError:
                    pass
            self.held.clear()
        self.sock.close()


def refused_port() -> int:
    """A loopback port that nothing listens on (bound once to reserve a number, then closed)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
