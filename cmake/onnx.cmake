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

# SequenceProto and OptionalProto, the files in which the backend test suite
# stores sequence and optional values, are in onnx-data.proto, which Debian
# ships with python3-onnx (not libonnx-dev).  When it is there it is
# generated the same way, its import of onnx-ml.proto pointed at the
# onnx.proto above (the messages it uses are the same in both); without it
# rlx_onnx_read_value reads tensors only.
find_file(RLX_ONNX_DATA_PROTO onnx-data.proto
  PATHS /usr/lib/python3/dist-packages/onnx /usr/local/lib/python3/dist-packages/onnx NO_DEFAULT_PATH)
set(RLX_ONNX_DATA_SOURCES "")
if(RLX_ONNX_DATA_PROTO)
  file(READ ${RLX_ONNX_DATA_PROTO} _rlx_data_proto)
  string(FIND "${_rlx_data_proto}" "import \"onnx/onnx-ml.proto\";" _rlx_at)
  if(_rlx_at GREATER -1)
    string(REPLACE "import \"onnx/onnx-ml.proto\";" "import \"onnx.proto\";" _rlx_data_proto "${_rlx_data_proto}")
    file(MAKE_DIRECTORY ${RLX_ONNX_GEN_DIR}/proto)
    file(WRITE ${RLX_ONNX_GEN_DIR}/proto/onnx-data.proto.new "${_rlx_data_proto}")
    configure_file(${RLX_ONNX_GEN_DIR}/proto/onnx-data.proto.new ${RLX_ONNX_GEN_DIR}/proto/onnx-data.proto COPYONLY)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${RLX_ONNX_DATA_PROTO})
    add_custom_command(
      OUTPUT ${RLX_ONNX_GEN_DIR}/onnx-data.pb-c.c ${RLX_ONNX_GEN_DIR}/onnx-data.pb-c.h
      COMMAND ${RLX_PROTOC_C} --proto_path=${RLX_ONNX_GEN_DIR}/proto --proto_path=${_rlx_onnx_proto_dir}
              --c_out=${RLX_ONNX_GEN_DIR} ${RLX_ONNX_GEN_DIR}/proto/onnx-data.proto
      DEPENDS ${RLX_ONNX_GEN_DIR}/proto/onnx-data.proto ${RLX_ONNX_GEN_DIR}/onnx.pb-c.h
      COMMENT "protoc-c: generating C code for onnx-data.proto"
      VERBATIM)
    set_source_files_properties(${RLX_ONNX_GEN_DIR}/onnx-data.pb-c.c PROPERTIES GENERATED TRUE COMPILE_OPTIONS "-w")
    set(RLX_ONNX_DATA_SOURCES ${RLX_ONNX_GEN_DIR}/onnx-data.pb-c.c)
    target_compile_definitions(rlx_objects PRIVATE RLX_HAVE_ONNX_DATA=1)
  endif()
endif()
if(NOT RLX_ONNX_DATA_SOURCES)
  message(STATUS "ONNX: onnx-data.proto (python3-onnx) not found: sequence and optional test files are not read")
endif()

file(GLOB RLX_ONNX_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/io/onnx/*.c)
target_sources(rlx_objects PRIVATE ${RLX_ONNX_GEN_DIR}/onnx.pb-c.c ${RLX_ONNX_DATA_SOURCES} ${RLX_ONNX_SOURCES})
target_include_directories(rlx_objects PRIVATE ${RLX_ONNX_GEN_DIR} ${RLX_PROTOBUF_C_INCLUDE_DIR})
target_link_libraries(rlx_objects PRIVATE ${RLX_PROTOBUF_C_LIBRARY})
list(APPEND RLX_FEATURE_DEFS RLX_HAVE_ONNX=1)
