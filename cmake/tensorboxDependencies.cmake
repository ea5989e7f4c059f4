# tensorboxDependencies.cmake - finds the libraries libtensorbox links against and gives each
# one an INTERFACE IMPORTED target tensorbox_dep::<name>.
#
# Used twice: by the project's CMakeLists.txt (TBX_DEPS_REQUIRED ON: a missing dependency is a
# configure error) and, installed, by tensorboxConfig.cmake (a consumer of the static library
# needs the same link line; a consumer of the shared library needs none of it, so nothing
# fails there when a dependency is missing).
#
# Each dependency is looked up through pkg-config; libdeflate falls back to find_library for
# systems whose package ships no libdeflate.pc. Sets:
#   TBX_DEP_PC_MODULES   pkg-config modules that were found (for Requires.private)
#   TBX_DEP_PLAIN_LIBS   -l flags of dependencies found without pkg-config (Libs.private)
#   TBX_DEP_MISSING      names of dependencies that were not found
#   TBX_DEP_TARGETS      every dependency's target (tensorbox_dep::<name>, then Threads and
#                        libm): the library's link line, so a dependency is one _tbx_dep line
include_guard(DIRECTORY)

if(NOT DEFINED TBX_DEPS_REQUIRED)
  set(TBX_DEPS_REQUIRED OFF)
endif()

find_package(Threads QUIET)
find_package(PkgConfig QUIET)

set(TBX_DEP_PC_MODULES "")
set(TBX_DEP_PLAIN_LIBS "")
set(TBX_DEP_MISSING "")
set(TBX_DEP_TARGETS "")

# _tbx_dep(<name> <pkg-config module> <fallback library name or "">)
macro(_tbx_dep name module fallback)
  list(APPEND TBX_DEP_TARGETS tensorbox_dep::${name})
  if(NOT TARGET tensorbox_dep::${name})
    set(_tbx_found OFF)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(TBX_PC_${name} QUIET IMPORTED_TARGET ${module})
      if(TBX_PC_${name}_FOUND)
        add_library(tensorbox_dep::${name} INTERFACE IMPORTED)
        set_property(TARGET tensorbox_dep::${name} PROPERTY
                     INTERFACE_LINK_LIBRARIES PkgConfig::TBX_PC_${name})
        list(APPEND TBX_DEP_PC_MODULES ${module})
        set(_tbx_found ON)
      endif()
    endif()
    if(NOT _tbx_found AND NOT "${fallback}" STREQUAL "")
      find_library(TBX_LIB_${name} NAMES ${fallback})
      find_path(TBX_INC_${name} NAMES ${fallback}.h)
      if(TBX_LIB_${name} AND TBX_INC_${name})
        add_library(tensorbox_dep::${name} INTERFACE IMPORTED)
        set_property(TARGET tensorbox_dep::${name} PROPERTY
                     INTERFACE_LINK_LIBRARIES "${TBX_LIB_${name}}")
        set_property(TARGET tensorbox_dep::${name} PROPERTY
                     INTERFACE_INCLUDE_DIRECTORIES "${TBX_INC_${name}}")
        list(APPEND TBX_DEP_PLAIN_LIBS "-l${fallback}")
        set(_tbx_found ON)
      endif()
    endif()
    if(NOT _tbx_found)
      list(APPEND TBX_DEP_MISSING ${name})
    endif()
  endif()
endmacro()

_tbx_dep(zstd    libzstd    "")
_tbx_dep(jansson jansson    "")
_tbx_dep(cbor    libcbor    "")
# libdeflate: declared for the EMBD driver (next), which computes its CRC-32 with it; no code
# calls it yet (docs/architecture.md, "Dependencies"). Remove it here, in scripts/bootstrap.sh
# and in the docs if EMBD does not land.
_tbx_dep(deflate libdeflate libdeflate)
_tbx_dep(crypto  libcrypto  "")
# libzip: the .npz driver reads and writes its zip archives through it (docs/formats/npy.md).
_tbx_dep(zip     libzip     "")
# libcurl: remote sources (http://, https://, s3://, hf://: src/io/remote.c, docs/remote.md).
_tbx_dep(curl    libcurl    "")
# ... named in tensorbox.pc's Libs.private as -lcurl, not in Requires.private: `pkg-config
# --static` would expand libcurl's own static closure (nghttp2, ssh2, rtmp, psl, gssapi, ldap),
# whose -dev packages a system with libcurl's does not have; a consumer of libtensorbox.a links
# libcurl itself as a shared library.
if(TBX_PC_curl_FOUND)
  list(REMOVE_ITEM TBX_DEP_PC_MODULES libcurl)
  list(APPEND TBX_DEP_PLAIN_LIBS "-lcurl")
endif()

if(NOT TARGET Threads::Threads)
  list(APPEND TBX_DEP_MISSING Threads)
endif()
list(APPEND TBX_DEP_TARGETS Threads::Threads m)

if(TBX_DEP_MISSING AND TBX_DEPS_REQUIRED)
  if(NOT PKG_CONFIG_FOUND)
    message(FATAL_ERROR "tensorbox: pkg-config not found (install pkg-config); "
                        "missing: ${TBX_DEP_MISSING}")
  endif()
  message(FATAL_ERROR "tensorbox: missing dependencies: ${TBX_DEP_MISSING} "
                      "(run scripts/bootstrap.sh to install them)")
endif()
