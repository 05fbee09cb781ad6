"""The C++ API as an installed package.  `cmake --install` puts
headers, libstoker.a and a CMake package in a prefix; examples/cpp (an
outside project: find_package(stoker), target_link_libraries(... stoker::stoker))
builds against it, and its programs run: a plain C++ checksum reader
(threads and worker processes), a reader of the streaming cache over a real
nginx, and a libtorch training loop."""
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run(cmd, timeout=600, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """An installed stoker: scripts/run.sh installs its C++ build there
    (STOKER_CPP_PREFIX); otherwise build and install one here."""
    given = os.environ.get("STOKER_CPP_PREFIX")
    if given:
        assert os.path.exists(os.path.join(given, "lib", "cmake", "stoker", "stokerConfig.cmake")), given
        return given
    if shutil.which("cmake") is None:
        pytest.skip("no cmake")
    d = tmp_path_factory.mktemp("stoker-cpp")
    run(["cmake", "-S", REPO, "-B", str(d / "build"), "-DSTOKER_BUILD_PYTHON=OFF", "-DSTOKER_BUILD_TESTS=OFF",
         "-DSTOKER_BUILD_BENCH=OFF", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", str(d / "build"), "-j", "2"], timeout=900)
    run(["cmake", "--install", str(d / "build"), "--prefix", str(d / "prefix")])
    return str(d / "prefix")


@pytest.fixture(scope="module")
def examples(prefix, tmp_path_factory):
    import torch.utils
    b = tmp_path_factory.mktemp("examples")
    run(["cmake", "-S", os.path.join(REPO, "examples", "cpp"), "-B", str(b),
         f"-DCMAKE_PREFIX_PATH={prefix};{torch.utils.cmake_prefix_path}", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", str(b), "-j", "2"], timeout=900)
    return b


def test_install_layout(prefix):
    for rel in ["include/stoker/loader.h", "include/stoker/batch.h", "include/stoker/native_dataset.h",
                "include/stoker/status.h", "include/stoker/streaming.h", "include/stoker/store.h",
                "include/stoker/shard_index.h", "include/stoker/tar_fields.h", "lib/libstoker.a",
                "lib/libstoker_remote.a", "lib/libstoker_vision.a", "lib/cmake/stoker/stokerConfig.cmake",
                "lib/cmake/stoker/stokerConfigVersion.cmake"]:
        assert os.path.exists(os.path.join(prefix, rel)), rel
    # The public headers include nothing outside include/stoker.
    for h in os.listdir(os.path.join(prefix, "include", "stoker")):
        with open(os.path.join(prefix, "include", "stoker", h)) as f:
            for line in f:
                if line.startswith('#include "'):
                    assert line.startswith('#include "stoker/'), (h, line)
    # The exported targets name their dependencies, never this machine's paths
    # (the package's config finds them where it is installed).
    links = []
    for part in ("Core", "Remote", "Vision", "All"):
        targets = open(os.path.join(prefix, "lib", "cmake", "stoker", f"stoker{part}Targets.cmake")).read()
        links += [line for line in targets.splitlines() if "INTERFACE_LINK_LIBRARIES" in line]
    assert links and not any("/" in line.split("INTERFACE_LINK_LIBRARIES", 1)[1] for line in links), links


CORE_ONLY = """
cmake_minimum_required(VERSION 3.20)
project(core_only LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
@FIND@
add_executable(app app.cc)
target_link_libraries(app PRIVATE stoker::core)
"""

CORE_APP = """
#include <cstdio>
#include "stoker/store.h"
int main() {
  auto s = stoker::Store::Open("http://127.0.0.1:1/data");
  std::printf("%s\\n", s.ok() ? "opened" : s.status().message().c_str());
  return 0;
}
"""


def consumer(tmp_path, prefix, components, *extra):
    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    find = "find_package(stoker REQUIRED" + (f" COMPONENTS {components})" if components else ")")
    (src / "CMakeLists.txt").write_text(CORE_ONLY.replace("@FIND@", find))
    (src / "app.cc").write_text(CORE_APP)
    return subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "b"), f"-DCMAKE_PREFIX_PATH={prefix}",
                           "-DCMAKE_BUILD_TYPE=Release", *extra], capture_output=True, text=True, timeout=300)


def test_a_core_program_links_nothing_beyond_the_cpp_runtime(prefix, tmp_path):
    if shutil.which("cmake") is None or shutil.which("readelf") is None:
        pytest.skip("no cmake or readelf")
    r = consumer(tmp_path, prefix, "")
    assert r.returncode == 0, r.stderr[-3000:]
    run(["cmake", "--build", str(tmp_path / "b")], timeout=600)
    app = str(tmp_path / "b" / "app")
    needed = [line.split("[", 1)[1].rstrip("]") for line in run(["readelf", "-d", app]).stdout.splitlines()
              if "(NEEDED)" in line]
    runtime = ("libstdc++.so", "libm.so", "libgcc_s.so", "libc.so", "libdl.so", "libpthread.so", "ld-linux")
    assert needed and all(n.startswith(runtime) for n in needed), needed
    # A remote URL in a core-only program names the component to link.
    assert "link stoker::remote (CMake: find_package(stoker COMPONENTS remote))" in run([app]).stdout


def test_a_component_whose_libraries_are_missing_names_their_packages(prefix, tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("no cmake")
    # libcurl's development files as if not installed.
    r = consumer(tmp_path / "remote", prefix, "remote", "-DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON")
    assert r.returncode != 0
    err = " ".join(r.stderr.split())
    assert "stoker::remote" in err and "libcurl4-openssl-dev" in err and "libcurl-devel" in err, err
    assert "without it stoker::core reads local files" in err, err
    # No image codec library to be found (the system's library directories ignored).
    libdirs = [f"{root}/{lib}" for root in ("/usr", "", "/usr/local") for lib in
               ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu")]
    r = consumer(tmp_path / "vision", prefix, "vision", "-DCMAKE_IGNORE_PATH=" + ";".join(libdirs))
    assert r.returncode != 0
    err = " ".join(r.stderr.split())
    assert "stoker::vision" in err and "libturbojpeg0-dev" in err and "turbojpeg-devel" in err, err
    assert "libturbojpeg was not found" in err, err
    r = consumer(tmp_path / "nope", prefix, "nope")
    assert r.returncode != 0 and "no component 'nope'" in " ".join(r.stderr.split()), r.stderr
    # Without COMPONENTS, the core alone is found and the missing part named.
    r = consumer(tmp_path / "plain", prefix, "", "-DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "stoker::stoker (everything) is not defined" in " ".join(r.stdout.split()), r.stdout


def test_the_installed_python_package_carries_the_cpp_package(tmp_path):
    """pip install puts headers, libstoker.a and the CMake package inside the
    stoker package: stoker.cmake_prefix_path is enough for find_package, and
    examples/cpp builds against it."""
    import stoker
    root = stoker.cmake_prefix_path
    for rel in ["include/stoker/loader.h", "include/stoker/image_dataset.h", "lib/libstoker.a",
                "lib/cmake/stoker/stokerConfig.cmake"]:
        assert os.path.exists(os.path.join(root, rel)), rel
    if shutil.which("cmake") is None:
        pytest.skip("no cmake")
    import torch.utils
    b = tmp_path / "examples"
    run(["cmake", "-S", os.path.join(REPO, "examples", "cpp"), "-B", str(b),
         f"-DCMAKE_PREFIX_PATH={root};{torch.utils.cmake_prefix_path}", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", str(b), "-j", "2"], timeout=900)  # all of examples/cpp, libtorch's too
    assert (b / "train_libtorch").exists() and (b / "stream").exists()
    data = tmp_path / "d.bin"
    run([str(b / "checksum"), "--make", str(data), "100", "4096"])
    assert "checksum ok: 100 records" in run([str(b / "checksum"), str(data), "4096"], timeout=120).stdout


@pytest.mark.parametrize("mode", [[], ["--processes", "--workers", "3", "--batch", "7"]])
def test_plain_cpp_program_checksums_every_batch(examples, tmp_path, mode):
    data = tmp_path / "d.bin"
    run([str(examples / "checksum"), "--make", str(data), "500", "4096"])
    r = run([str(examples / "checksum"), str(data), "4096", *mode], timeout=120)
    assert "checksum ok: 500 records" in r.stdout
    # A file that is not whole records: the error names it and what is wrong.
    with open(data, "ab") as f:
        f.write(b"xyz")
    r = subprocess.run([str(examples / "checksum"), str(data), "4096"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and str(data) in r.stderr and "not a whole number of 4096-byte records" in r.stderr


def test_libtorch_program_trains_on_a_native_dataset(examples, tmp_path):
    if not (examples / "train_libtorch").exists():
        pytest.fail("libtorch was not found by examples/cpp (torch.utils.cmake_prefix_path)")
    r = run([str(examples / "train_libtorch"), str(tmp_path)], timeout=300)
    assert "trained: loss" in r.stdout and r.stdout.count("4096 samples") == 5


def test_cpp_program_streams_from_nginx(examples, tmp_path):
    import numpy as np
    from stoker.cache import write_index
    from stoker.io import write_tfrecord
    sys.path.insert(0, os.path.dirname(__file__))
    from nginx import Nginx
    www = tmp_path / "www"
    www.mkdir()
    for s in range(10):
        write_tfrecord(str(www / f"part-{s}.tfrecord"), [{"y": np.int64(s * 100 + i)} for i in range(100)])
    write_index(www)
    biggest = max(os.path.getsize(www / f) for f in os.listdir(www))
    server = Nginx(tmp_path / "nginx", www).start()
    try:
        r = run([str(examples / "stream"), server.url, str(tmp_path / "cache"), str(6 * biggest), "full", "2"],
                timeout=120)
    finally:
        server.stop()
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2 and all("1000 samples from 10 shards, each once: yes" in ln for ln in lines), r.stdout
    # A cache of 6 shards for 10: the second epoch reads what it kept, the rest streams through memory.
    assert " 0 hits" not in lines[1] and "(0 through memory)" not in lines[1], r.stdout
