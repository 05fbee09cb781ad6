# stoker.vision's libjpeg-turbo built from Debian 12's source (the same
# 2.1.5 that libturbojpeg0-dev and libjpeg62-turbo-dev are built from),
# static, when STOKER_JPEG_FROM_SOURCE is ON (scripts/run.sh turns it on).
# Why: Debian's build costs the train item about 6% (docs/vision.md).  Its
# hardening flags cost about 2%, and its baseline x86-64 about 3%: the
# Huffman decoder's variable shifts compile to BMI2's shlx/shrx where the
# compiler may use them.  BMI2 (with LZCNT) is used here when the building
# machine has it; a CPU without it then gets an error from the JPEG decoder
# (src/vision/jpeg_runs.h), never an illegal instruction.
# Sets STOKER_TURBOJPEG_INCLUDE_DIR/LIBRARY and STOKER_JPEG_INCLUDE_DIR/LIBRARY
# (one archive holds both APIs) and the target stoker_libjpeg_turbo to
# depend on.
include(ExternalProject)
include(CheckCXXSourceRuns)

set(STOKER_JPEG_SOURCE_URL
    "http://deb.debian.org/debian/pool/main/libj/libjpeg-turbo/libjpeg-turbo_2.1.5.orig.tar.gz"
    CACHE STRING "libjpeg-turbo 2.1.5's source tarball (a URL or a local path) for STOKER_JPEG_FROM_SOURCE")
find_program(STOKER_NASM nasm)
if(NOT STOKER_NASM)
  message(FATAL_ERROR "STOKER_JPEG_FROM_SOURCE builds libjpeg-turbo with its SIMD code, which needs NASM "
                      "(apt-get install nasm); or configure with -DSTOKER_JPEG_FROM_SOURCE=OFF to link the "
                      "system's libjpeg-turbo")
endif()

set(CMAKE_REQUIRED_FLAGS "-mbmi2 -mlzcnt")
check_cxx_source_runs([[
#include <immintrin.h>
int main() {
  volatile unsigned a = 5, b = 2;
  return _bzhi_u32(a, b) == 1 && _lzcnt_u32(a) == 29 ? 0 : 1;
}]] STOKER_BUILD_HOST_BMI2)
unset(CMAKE_REQUIRED_FLAGS)
set(_stoker_jpeg_flags "-O2 -DNDEBUG")
if(STOKER_BUILD_HOST_BMI2)
  string(APPEND _stoker_jpeg_flags " -mbmi2 -mlzcnt")
endif()

set(_stoker_jpeg_build "${CMAKE_BINARY_DIR}/libjpeg-turbo")
ExternalProject_Add(stoker_libjpeg_turbo
  URL "${STOKER_JPEG_SOURCE_URL}"
  URL_HASH SHA256=254f3642b04e309fee775123133c6464181addc150499561020312ec61c1bf7c
  DOWNLOAD_DIR "${CMAKE_BINARY_DIR}/downloads"
  DOWNLOAD_EXTRACT_TIMESTAMP ON
  SOURCE_DIR "${_stoker_jpeg_build}/src"
  BINARY_DIR "${_stoker_jpeg_build}/build"
  CMAKE_ARGS
    -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_C_FLAGS_RELEASE=${_stoker_jpeg_flags}"
    -DCMAKE_ASM_NASM_COMPILER=${STOKER_NASM}
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON
    -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=ON -DREQUIRE_SIMD=ON
  # The TurboJPEG archive alone: it holds the libjpeg API too.
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> --target turbojpeg-static
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS "${_stoker_jpeg_build}/build/libturbojpeg.a")

set(STOKER_TURBOJPEG_INCLUDE_DIR "${_stoker_jpeg_build}/src" "${_stoker_jpeg_build}/build")  # (jconfig.h: build)
set(STOKER_JPEG_INCLUDE_DIR "${STOKER_TURBOJPEG_INCLUDE_DIR}")
set(STOKER_TURBOJPEG_LIBRARY "${_stoker_jpeg_build}/build/libturbojpeg.a")
set(STOKER_JPEG_LIBRARY "${STOKER_TURBOJPEG_LIBRARY}")
message(STATUS "stoker: libjpeg-turbo 2.1.5 from source, static, C flags ${_stoker_jpeg_flags}")
