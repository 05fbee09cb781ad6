"""A real nginx on 127.0.0.1 serving a directory, for the HTTP store tests:
started by the test, stopped (and killed if need be) after it."""
import os
import shutil
import signal
import socket
import subprocess
import time

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx serving `root` at http://127.0.0.1:port/ and, rate-limited to
    `slow_rate` per connection, at /slow/; at /paced/, 20 requests a second
    (each waits its turn: 50 ms apart, nginx's limit_req); /moved/x redirects (302) to /x; /close/ answers with Connection: close.
    With tls=(certificate, key) files, also at https://127.0.0.1:tls_port/."""

    def __init__(self, workdir, root, port=None, slow_rate="1m", tls=None):
        self.workdir, self.root = str(workdir), str(root)
        self.port = port or free_port()
        self.tls_port = free_port() if tls else None
        https = (f"server {{ listen 127.0.0.1:{self.tls_port} ssl; ssl_certificate {tls[0]}; "
                 f"ssl_certificate_key {tls[1]}; root {self.root}; }}") if tls else ""
        self.slow_rate = slow_rate
        self.proc = None
        os.makedirs(self.workdir, exist_ok=True)
        self.conf = os.path.join(self.workdir, "nginx.conf")
        w = self.workdir
        with open(self.conf, "w") as f:
            f.write(f"""
daemon off;
master_process off;
worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/error.log warn;
events {{ worker_connections 128; }}
http {{
  access_log off;
  client_body_temp_path {w}/body;
  proxy_temp_path {w}/proxy;
  fastcgi_temp_path {w}/fastcgi;
  uwsgi_temp_path {w}/uwsgi;
  scgi_temp_path {w}/scgi;
  keepalive_requests 100000;
  limit_req_zone $server_addr zone=paced:1m rate=20r/s;
  server {{
    listen 127.0.0.1:{self.port};
    root {self.root};
    location /slow/ {{ alias {self.root}/; limit_rate {self.slow_rate}; }}
    location /paced/ {{ alias {self.root}/; limit_req zone=paced burst=100000; }}
    location /moved/ {{ rewrite ^/moved/(.*)$ /$1 redirect; }}
    location /close/ {{ alias {self.root}/; keepalive_requests 1; }}
  }}
  {https}
}}
""")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.proc = subprocess.Popen([NGINX, "-c", self.conf, "-p", self.workdir], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {self.proc.stderr.read().decode()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start listening within 10 s")

    def stop(self, sig=signal.SIGTERM):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
