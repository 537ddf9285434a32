# ONNX importer: C code for onnx.proto is generated at build time by protoc-c
# from the schema that Debian's libonnx-dev installs (never vendored).
find_program(RLX_PROTOC_C NAMES protoc-c)
find_library(RLX_PROTOBUF_C_LIBRARY NAMES protobuf-c)
find_path(RLX_PROTOBUF_C_INCLUDE_DIR protobuf-c/protobuf-c.h)
find_file(RLX_ONNX_PROTO onnx.proto PATHS /usr/include/onnx /usr/local/include/onnx NO_DEFAULT_PATH)
if(NOT RLX_PROTOC_C OR NOT RLX_PROTOBUF_C_LIBRARY OR NOT RLX_PROTOBUF_C_INCLUDE_DIR OR NOT RLX_ONNX_PROTO)
  message(WARNING "ONNX importer disabled: needs protoc-c, libprotobuf-c and onnx.proto "
                  "(Debian: protobuf-c-compiler libprotobuf-c-dev libonnx-dev)")
  set(RLX_HAVE_ONNX OFF)
  return()
endif()
set(RLX_HAVE_ONNX ON)

set(RLX_ONNX_GEN_DIR ${CMAKE_BINARY_DIR}/generated/onnx)
file(MAKE_DIRECTORY ${RLX_ONNX_GEN_DIR})
get_filename_component(_rlx_onnx_proto_dir ${RLX_ONNX_PROTO} DIRECTORY)
add_custom_command(
  OUTPUT ${RLX_ONNX_GEN_DIR}/onnx.pb-c.c ${RLX_ONNX_GEN_DIR}/onnx.pb-c.h
  COMMAND ${RLX_PROTOC_C} --proto_path=${_rlx_onnx_proto_dir} --c_out=${RLX_ONNX_GEN_DIR} ${RLX_ONNX_PROTO}
  DEPENDS ${RLX_ONNX_PROTO}
  COMMENT "protoc-c: generating C code for onnx.proto"
  VERBATIM)
set_source_files_properties(${RLX_ONNX_GEN_DIR}/onnx.pb-c.c PROPERTIES GENERATED TRUE
  COMPILE_OPTIONS "-w")

file(GLOB RLX_ONNX_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/io/onnx/*.c)
target_sources(rlx_objects PRIVATE ${RLX_ONNX_GEN_DIR}/onnx.pb-c.c ${RLX_ONNX_SOURCES})
target_include_directories(rlx_objects PRIVATE ${RLX_ONNX_GEN_DIR} ${RLX_PROTOBUF_C_INCLUDE_DIR})
target_link_libraries(rlx_objects PRIVATE ${RLX_PROTOBUF_C_LIBRARY})
list(APPEND RLX_FEATURE_DEFS RLX_HAVE_ONNX=1)
