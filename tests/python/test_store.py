"""Stores by URL (a directory, HTTP with a real nginx):
sizes, range reads, downloads that resume, retries with backoff, clear
errors after the last attempt."""
import os
import signal
import subprocess
import sys
import threading
import time
import zlib

import pytest

from stoker.cache import Store
from nginx import Nginx


@pytest.fixture
def www(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    data = os.urandom(3 << 20)
    (root / "shard-0.bin").write_bytes(data)
    (root / "index.txt").write_text("shard-0.bin\n")
    return root, data


@pytest.fixture
def server(tmp_path, www):
    root, _ = www
    n = Nginx(tmp_path / "nginx", root).start()
    yield n
    n.stop()


def test_directory_store(www, tmp_path):
    root, data = www
    for url in (str(root), f"file://{root}"):
        s = Store(url)
        assert s.size("shard-0.bin") == len(data)
        assert s.read("shard-0.bin", 1000, 50) == data[1000:1050]
        out = tmp_path / "copy"
        out.write_bytes(data[:12345])  # a partial download: resumed
        assert s.download("shard-0.bin", str(out), len(data)) == len(data)
        assert out.read_bytes() == data
        out.unlink()
    with pytest.raises(OSError, match="nope.bin"):
        Store(str(root)).size("nope.bin")
    with pytest.raises(ValueError, match="is not a directory"):
        Store(str(root / "shard-0.bin"))


def test_http_size_ranges_download_and_connection_reuse(server, www, tmp_path):
    _, data = www
    s = Store(server.url + "/")
    assert s.size("shard-0.bin") == len(data)
    assert s.read("shard-0.bin", 0, 10) == data[:10]
    assert s.read("shard-0.bin", len(data) - 7, 7) == data[-7:]
    assert s.read_all("index.txt") == b"shard-0.bin\n"
    out = tmp_path / "d"
    assert s.download("shard-0.bin", str(out), len(data)) == len(data) and out.read_bytes() == data
    assert s.requests == 5 and s.retries == 0
    with pytest.raises(ValueError, match=r"shard-9.bin: no such object on the store \(HTTP 404\)"):
        s.size("shard-9.bin")
    with pytest.raises(ValueError, match="past the end of the object"):
        s.read("shard-0.bin", len(data) + 10, 5)
    # A size that disagrees with the index is named.
    out.unlink()
    with pytest.raises(ValueError, match=r"has 3145728 bytes, the index says 100"):
        s.download("shard-0.bin", str(out), 100)


@pytest.mark.parametrize("in_place", [True, False], ids=["in-place", "libcurl"])
def test_http_reads_both_ways_keep_alive_redirects_and_a_restarted_server(server, www, in_place):
    # Read over http:// receives into the caller's memory (HttpRangeGet) or,
    # with receive_in_place=False, through libcurl's buffer: the same bytes,
    # the same requests, the same errors.
    _, data = www
    s = Store(server.url, receive_in_place=in_place)
    spans = [(0, 1), (0, len(data)), (12345, 1 << 20), (len(data) - 1, 1), (7, 300000)]
    for off, n in spans * 3:  # one kept-alive connection for all of them
        assert s.read("shard-0.bin", off, n) == data[off:off + n]
    assert s.requests == 15 and s.retries == 0
    # A redirect is followed (the in-place path leaves it to libcurl).
    assert Store(server.url + "/moved", receive_in_place=in_place).read("shard-0.bin", 5, 10) == data[5:15]
    # A server that closes after each answer (Connection: close): a new connection each time.
    closing = Store(server.url + "/close", receive_in_place=in_place)
    for off, n in spans:
        assert closing.read("shard-0.bin", off, n) == data[off:off + n]
    assert closing.requests == len(spans) and closing.retries == 0
    with pytest.raises(ValueError, match=r"shard-9.bin: no such object on the store \(HTTP 404\)"):
        s.read("shard-9.bin", 0, 10)
    with pytest.raises(ValueError, match="past the end of the object"):
        s.read("shard-0.bin", len(data) + 10, 5)
    # The server restarts: the kept-alive connection is dead; the next read
    # connects again.
    server.stop()
    server.start()
    assert s.read("shard-0.bin", 100, 200) == data[100:300]


def test_http_read_survives_a_stalled_server(server, www):
    # nginx stopped (SIGSTOP) mid-session: the read waits stall_timeout_s,
    # fails that attempt, and the retry after SIGCONT gets every byte.
    _, data = www
    s = Store(server.url, stall_timeout_s=1.0, attempts=6, backoff_s=0.2)
    assert s.read("shard-0.bin", 0, 10) == data[:10]
    os.killpg(server.proc.pid, signal.SIGSTOP)
    threading.Timer(2.0, lambda: os.killpg(server.proc.pid, signal.SIGCONT)).start()
    t = time.monotonic()
    assert s.read("shard-0.bin", 0, len(data)) == data
    assert s.retries >= 1 and time.monotonic() - t < 20


def test_server_killed_mid_read_resumes_from_the_byte_it_stopped_at(server, www):
    _, data = www
    s = Store(server.url + "/slow", attempts=10, backoff_s=0.2)  # 1 MiB/s

    def kill_and_restart():
        time.sleep(1.0)
        server.stop(signal.SIGKILL)
        time.sleep(0.5)
        server.start()
    threading.Thread(target=kill_and_restart).start()
    assert s.read("shard-0.bin", 0, len(data)) == data
    assert s.retries >= 1


def test_server_down_retries_then_a_clear_error(server, tmp_path):
    server.stop()
    s = Store(server.url, attempts=3, backoff_s=0.05)
    t = time.monotonic()
    with pytest.raises(OSError, match=rf"GET {server.url}/shard-0.bin failed after 3 attempts over .* s: .*"
                                      r"(Couldn't connect|Connection refused|curl error 7)") as caught:
        s.download("shard-0.bin", str(tmp_path / "x"), 0)
    assert s.retries == 2 and time.monotonic() - t < 5
    # Said once, in the caller's words: no errno of a system call that did
    # not fail, and the option as this caller passes it.
    msg = str(caught.value)
    assert "errno" not in msg and "Input/output error" not in msg, msg
    assert "StoreOptions" not in msg and "attempts option" in msg, msg


def test_server_back_during_the_retries(server, www, tmp_path):
    _, data = www
    server.stop()
    threading.Timer(0.5, server.start).start()
    s = Store(server.url, attempts=8, backoff_s=0.1)
    out = tmp_path / "d"
    assert s.download("shard-0.bin", str(out), len(data)) == len(data)
    assert out.read_bytes() == data and s.retries >= 1


def test_server_killed_mid_download_resumes_with_a_range_request(server, www, tmp_path):
    _, data = www
    out = tmp_path / "d"
    s = Store(server.url + "/slow", attempts=10, backoff_s=0.2)  # 1 MiB/s: 3 MiB take 3 s

    def kill_and_restart():
        time.sleep(1.0)
        server.stop(signal.SIGKILL)  # the connection dies mid-body
        time.sleep(0.5)
        server.start()
    threading.Thread(target=kill_and_restart).start()
    got = s.download("shard-0.bin", str(out), len(data))
    assert got == len(data) and out.read_bytes() == data
    assert s.retries >= 1, "the cut transfer was retried"
    assert s.bytes_received < 2 * len(data), "resumed from where it stopped, not from the start"


def test_an_error_page_never_lands_in_a_download(server, tmp_path):
    # nginx answers 404 with an HTML body: the partial file keeps its bytes
    # (a later resume must not continue from an error page's end).
    part = tmp_path / "gone.part"
    part.write_bytes(b"0123456789")
    with pytest.raises(ValueError, match="no such object on the store"):
        Store(server.url).download("gone.bin", str(part), 20)
    assert part.read_bytes() == b"0123456789"


def _self_signed(d):
    """A certificate for 127.0.0.1 signed by itself, and its key."""
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_https_checks_the_certificate_against_ssl_cert_file(tmp_path, www):
    # The CA bundle comes from SSL_CERT_FILE, else from where the
    # distribution keeps it (a libcurl built elsewhere knows only its own
    # place, the manylinux wheel's none): trusted there, the download works;
    # not, the error says what it was checked against and what to set.
    root, data = www
    tls = _self_signed(tmp_path)
    n = Nginx(tmp_path / "nginx", root, tls=tls).start()
    code = f"""
import sys, zlib
from stoker.cache import Store
s = Store("https://127.0.0.1:{n.tls_port}/", attempts=1)
try:
    got = s.read_all("shard-0.bin")
except OSError as e:
    print("ERR", e)
else:
    print("OK", zlib.crc32(got))
"""
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        env.pop("SSL_CERT_FILE", None)
        trusted = subprocess.run([sys.executable, "-c", code], env=dict(env, SSL_CERT_FILE=tls[0]),
                                 capture_output=True, text=True, timeout=120)
        assert trusted.stdout.strip() == f"OK {zlib.crc32(data)}", trusted.stdout + trusted.stderr
        untrusted = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                   timeout=120)
        out = untrusted.stdout.strip()
        assert out.startswith("ERR") and "certificate" in out and "SSL_CERT_FILE" in out, out + untrusted.stderr
    finally:
        n.stop()
