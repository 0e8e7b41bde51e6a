# Third-party libraries, all from Debian packages through pkg-config. Each codec can be
# switched off; the ones switched on are required (a missing package is a configure
# error naming it, not a silently smaller build).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

set(ZF_PKG_REQUIRES "")
macro(zf_require_pkg option target module debian)
  if(${option})
    pkg_check_modules(${target} REQUIRED IMPORTED_TARGET ${module})
    if(NOT ${target}_FOUND)
      message(FATAL_ERROR "${module} not found: apt-get install ${debian}, or -D${option}=OFF")
    endif()
    string(APPEND ZF_PKG_REQUIRES " ${module}")
  endif()
endmacro()

zf_require_pkg(ZF_WITH_LZ4 LZ4 liblz4 liblz4-dev)
zf_require_pkg(ZF_WITH_ZSTD ZSTD libzstd libzstd-dev)
zf_require_pkg(ZF_WITH_DEFLATE DEFLATE libdeflate libdeflate-dev)
zf_require_pkg(ZF_WITH_ISAL ISAL libisal libisal-dev)
zf_require_pkg(ZF_WITH_LZO LZO lzo2 liblzo2-dev)
zf_require_pkg(ZF_WITH_URING URING liburing liburing-dev)
# xxh3 checksums of stored objects: not optional.
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
string(APPEND ZF_PKG_REQUIRES " libxxhash")
