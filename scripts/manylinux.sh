#!/usr/bin/env bash
# The manylinux_2_28 wheel (issue 30; docs/packaging.md says why and how):
# the two extension modules compiled by zig's clang for glibc 2.28
# (`-target x86_64-linux-gnu.2.28`, libc++ linked in), with libjpeg-turbo,
# libspng, OpenSSL and libcurl built the same way from Debian 12's sources
# and linked in statically; only glibc and zlib come from the system.  The
# C++ package inside the wheel (headers, libstoker.a, the CMake package) is
# the one GCC builds, for programs built against libstdc++ and libtorch.
# Called by `bash scripts/run.sh wheel`, which installs what it needs first.
#   bash scripts/manylinux.sh            -> dist/stoker-*-manylinux_2_28_x86_64.whl
set -euo pipefail
cd "$(dirname "$0")/.."
PY="$PWD/.venv/bin/python"
W="$PWD/build/manylinux"
P="$W/prefix"
GLIBC=2.28
mkdir -p "$W/src" "$W/bin" "$P/include" "$P/lib"

"$PY" -m pip install -q --disable-pip-version-check "ziglang==0.17.1" wheel
ZIG="$("$PY" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')"
for t in cc c++; do printf '#!/bin/sh\nexec "%s" %s -target x86_64-linux-gnu.%s "$@"\n' "$ZIG" "$t" "$GLIBC" >"$W/bin/$t"; done
for t in ar ranlib; do printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$ZIG" "$t" >"$W/bin/$t"; done
chmod +x "$W/bin/"*
export CC="$W/bin/cc" CXX="$W/bin/c++" AR="$W/bin/ar" RANLIB="$W/bin/ranlib"

# Debian 12's upstream sources of what the system packages are built from.
fetch() {  # path under pool/main, sha256
  local f="$W/src/$(basename "$1")"
  [ -f "$f" ] || curl -fsS --retry 3 -o "$f" "http://deb.debian.org/debian/pool/main/$1"
  echo "$2  $f" | sha256sum -c --quiet
  tar -xf "$f" -C "$W/src"
}
if [ ! -f "$P/lib/libturbojpeg.a" ]; then
  echo "== libjpeg-turbo 2.1.5 (static, with its SIMD code)"
  fetch libj/libjpeg-turbo/libjpeg-turbo_2.1.5.orig.tar.gz 254f3642b04e309fee775123133c6464181addc150499561020312ec61c1bf7c
  s="$W/src/libjpeg-turbo-2.1.5"
  cmake -S "$s" -B "$s/zb" -G Ninja -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_AR="$AR" -DCMAKE_RANLIB="$RANLIB" -DENABLE_SHARED=OFF -DENABLE_STATIC=ON \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DWITH_TURBOJPEG=ON -DWITH_JAVA=OFF -DREQUIRE_SIMD=ON >/dev/null
  cmake --build "$s/zb" --target turbojpeg-static jpeg-static >/dev/null
  cp "$s/zb/libturbojpeg.a" "$s/zb/libjpeg.a" "$P/lib/"
  cp "$s/turbojpeg.h" "$s/jpeglib.h" "$s/jmorecfg.h" "$s/jerror.h" "$s/zb/jconfig.h" "$P/include/"
fi
# zlib: the system's (the manylinux policy allows libz.so.1), its headers.
cp /usr/include/zlib.h /usr/include/zconf.h "$P/include/" 2>/dev/null ||
  cp /usr/include/zlib.h /usr/include/x86_64-linux-gnu/zconf.h "$P/include/"
ln -sf "$(realpath /usr/lib/x86_64-linux-gnu/libz.so.1)" "$P/lib/libz.so"
if [ ! -f "$P/lib/libspng.a" ]; then
  echo "== libspng 0.7.3 (static: its one source file)"
  fetch libs/libspng/libspng_0.7.3.orig.tar.gz a50cadbe808ffda1a7fab17d145f52a23b163f34b3eb3696c7ecb5a52340fc1d
  s="$W/src/libspng-0.7.3"
  "$CC" -O3 -fPIC -DSPNG_STATIC -I"$P/include" -c "$s/spng/spng.c" -o "$s/spng.o"
  "$AR" rcs "$P/lib/libspng.a" "$s/spng.o"
  cp "$s/spng/spng.h" "$P/include/"
fi
if [ ! -f "$P/lib/libssl.a" ]; then
  echo "== OpenSSL 3.0.19 (static, for libcurl's https://)"
  fetch o/openssl/openssl_3.0.19.orig.tar.gz fa5a4143b8aae18be53ef2f3caf29a2e0747430b8bc74d32d88335b94ab63072
  (cd "$W/src/openssl-3.0.19" &&
   ./Configure linux-x86_64 no-shared no-tests no-engine no-dso no-async no-afalgeng no-comp -fPIC \
     --prefix="$P" --libdir=lib --openssldir=/etc/ssl >/dev/null &&
   make -j"$(nproc)" build_libs >/dev/null && make install_dev >/dev/null)
fi
if [ ! -f "$P/lib/libcurl.a" ]; then
  echo "== curl 7.88.1 (static: HTTP and HTTPS; stoker finds the system's CA bundle itself)"
  fetch c/curl/curl_7.88.1.orig.tar.gz cdb38b72e36bc5d33d5b8810f8018ece1baa29a8f215b4495e495ded82bbf3c7
  (cd "$W/src/curl-7.88.1" &&
   CPPFLAGS="-I$P/include" LDFLAGS="-L$P/lib" ./configure --prefix="$P" --disable-shared --enable-static \
     --with-pic --with-openssl="$P" --with-zlib="$P" --without-libpsl --without-brotli --without-zstd \
     --without-nghttp2 --without-libidn2 --without-librtmp --without-libssh2 --without-libgsasl \
     --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet --disable-tftp \
     --disable-pop3 --disable-imap --disable-smb --disable-smtp --disable-gopher --disable-mqtt \
     --disable-manual --disable-docs --without-ca-bundle --without-ca-path >/dev/null &&
   make -C lib -j"$(nproc)" >/dev/null)
  cp "$W/src/curl-7.88.1/lib/.libs/libcurl.a" "$P/lib/"
  mkdir -p "$P/include/curl" && cp "$W/src/curl-7.88.1/include/curl/"*.h "$P/include/curl/"
fi

echo "== 128-bit division without zig's compiler_rt (scripts/manylinux/int128_div.c says why)"
gcc -O2 -DSTOKER_INT128_SELF_TEST scripts/manylinux/int128_div.c -o "$W/int128_div_test" && "$W/int128_div_test"
"$CC" -O2 -fPIC -c scripts/manylinux/int128_div.c -o "$W/int128_div.o"
rm -f "$P/lib/libint128_div.a" && "$AR" rcs "$P/lib/libint128_div.a" "$W/int128_div.o"

echo "== the extension modules, for glibc $GLIBC"
rm -rf "$W/zig-wheel" "$W/gcc-wheel" "$W/merge"
# (ISA-L is not built in: 2.30's assembly does not assemble with NASM 2.16;
# the CRC-32C is stoker's own SSE4.2 loop, or the system's libisal.so.2,
# loaded at run time, where it is installed.  The modules must take memcpy
# from glibc, not from zig's compiler_rt: checked below.)
CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$P -Dpybind11_DIR=$("$PY" -m pybind11 --cmakedir) -DCMAKE_AR=$AR \
-DCMAKE_RANLIB=$RANLIB -DCURL_INCLUDE_DIR=$P/include -DCURL_LIBRARY=$P/lib/libcurl.a \
-DCMAKE_CXX_STANDARD_LIBRARIES='$P/lib/libint128_div.a $P/lib/libssl.a $P/lib/libcrypto.a $P/lib/libz.so'" \
  "$PY" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -Cbuild-dir="$W/build" . \
  -w "$W/zig-wheel"

for m in "$W/build/"_stoker*.so; do
  syms="$(readelf --dyn-syms -W "$m")"  # (not piped into grep -q: readelf's SIGPIPE under pipefail)
  grep -q " UND memcpy@GLIBC" <<<"$syms" ||
    { echo "manylinux.sh: $(basename "$m") does not take memcpy from glibc" >&2; exit 1; }
done

echo "== the C++ package, with GCC"
env -u CC -u CXX -u AR -u RANLIB "$PY" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  . -w "$W/gcc-wheel"
"$PY" -m wheel unpack -d "$W/merge/zig" "$W/zig-wheel/"stoker-*.whl >/dev/null
"$PY" -m wheel unpack -d "$W/merge/gcc" "$W/gcc-wheel/"stoker-*.whl >/dev/null
z="$(echo "$W/merge/zig/"stoker-*)"
g="$(echo "$W/merge/gcc/"stoker-*)"
rm -rf "$z/stoker/lib" "$z/stoker/include"
cp -r "$g/stoker/lib" "$g/stoker/include" "$z/stoker/"
mkdir -p "$W/merge/out" && "$PY" -m wheel pack -d "$W/merge/out" "$z" >/dev/null

rm -rf dist
PATH="$PWD/.venv/bin:$PATH" .venv/bin/auditwheel repair --plat "manylinux_${GLIBC/./_}_x86_64" \
  "$W/merge/out/"stoker-*.whl -w dist
PATH="$PWD/.venv/bin:$PATH" .venv/bin/auditwheel show dist/stoker-*.whl
ls -l dist
