# Compiler flags shared by every target: the warning set of libdeflate/lz4/liburing CI,
# -Werror where asked, and the sanitizers of the dev/tsan presets.
set(ZF_WARNINGS
  -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wundef -Wvla
  -Wcast-align -Wpointer-arith -Wimplicit-fallthrough -Wformat=2)
if(ZF_WERROR)
  list(APPEND ZF_WARNINGS -Werror)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:C>:${ZF_WARNINGS}>")

if(ZF_SANITIZE)
  set(zf_san_flags -fsanitize=${ZF_SANITIZE} -fno-omit-frame-pointer)
  if(ZF_SANITIZE MATCHES "undefined")
    list(APPEND zf_san_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options(${zf_san_flags})
  add_link_options(-fsanitize=${ZF_SANITIZE})
endif()
if(ZF_DEBUG_FULL)
  add_compile_definitions(ZF_DEBUG_FULL=1)
endif()
