# Dependencies found by header and library search rather than through the packages' CMake
# config files: Debian's CLBlast and cJSON configs hard-code /usr paths, which breaks
# builds against a relocated copy (the offline GPU host unpacks them under another prefix).
find_package(OpenCL REQUIRED)
find_package(Threads REQUIRED)

function(tdacl_find_lib var header lib hint)
  find_path(${var}_INCLUDE_DIR ${header})
  find_library(${var}_LIBRARY NAMES ${lib})
  if(NOT ${var}_INCLUDE_DIR OR NOT ${var}_LIBRARY)
    message(FATAL_ERROR "${lib} not found (${hint})")
  endif()
  set(${var}_INCLUDE_DIR ${${var}_INCLUDE_DIR} PARENT_SCOPE)
  set(${var}_LIBRARY ${${var}_LIBRARY} PARENT_SCOPE)
  message(STATUS "${lib}: ${${var}_LIBRARY}")
endfunction()

tdacl_find_lib(CLBLAST clblast_c.h clblast "apt-get install libclblast-dev")
tdacl_find_lib(CJSON cjson/cJSON.h cjson "apt-get install libcjson-dev")
