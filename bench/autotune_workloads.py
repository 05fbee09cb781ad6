"""The autotuner benchmark's workloads (bench/autotune.py), as plain
map-style datasets that any loader can take (torch, stoker, Grain, tf.data
through a generator): importable by spawned workers, no stoker import.

    gil     a Python transform that holds the GIL: COST_GIL_S of pure-Python
            work per sample, a 3x32x32 uint8 sample
    remote  a slow remote store: one HTTP GET per sample to a local server
            that answers after 20 ms (a keep-alive connection per worker thread)
    big     8 MiB samples (float32), built per __getitem__
    shift   a sleep per sample that the benchmark raises 4x mid-epoch (a
            value in shared memory), for the time to adapt
"""
from __future__ import annotations

import http.client
import http.server
import mmap
import os
import socketserver
import sys
import threading
import time

import numpy as np

COST_GIL_S = 0.0005
REMOTE_DELAY_S = 0.020


class GilBound:
    def __init__(self, n: int = 10 ** 7):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        end = time.thread_time() + COST_GIL_S
        x = 0
        while time.thread_time() < end:  # pure Python: the GIL is held throughout
            x += 1
        return np.full((3, 32, 32), i % 251, dtype=np.uint8)


class Remote:
    """Sample i: 4 KiB from http://127.0.0.1:port/i (the server waits 20 ms)."""

    def __init__(self, port: int, n: int = 10 ** 7):
        self.port, self.n = port, n
        self._local = threading.local()  # a connection per thread (tf.data calls from many)

    def __len__(self):
        return self.n

    def __getstate__(self):
        return {"port": self.port, "n": self.n}

    def __setstate__(self, state):
        self.__init__(state["port"], state["n"])

    def __getitem__(self, i):
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = self._local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self._local.pid = os.getpid()
        conn.request("GET", f"/{i}")
        body = conn.getresponse().read()
        return np.frombuffer(body, dtype=np.uint8)


class Big:
    def __init__(self, n: int = 10 ** 7):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full(2 << 20, i % 251, dtype=np.float32)  # 8 MiB


class Shift:
    """time.sleep(cost) per sample; `cost` lives in shared memory (set_cost
    in the main process changes it for forked workers too)."""

    def __init__(self, cost: float, n: int = 10 ** 7):
        self.n = n
        self._cost = np.frombuffer(mmap.mmap(-1, 8), dtype=np.float64)
        self._cost[0] = cost

    def set_cost(self, cost: float):
        self._cost[0] = cost

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self._cost[0])
        return np.full(64, i % 251, dtype=np.uint8)


class _Slow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = bytes(range(256)) * 16

    def do_GET(self):  # noqa: N802 - the library's name
        time.sleep(REMOTE_DELAY_S)
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 128


def serve(port_file: str):
    """Runs the slow server (a process of its own: python -m / -c), writing
    its port to port_file."""
    srv = _Server(("127.0.0.1", 0), _Slow)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the benchmark closes our stdin
