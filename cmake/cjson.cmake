# cJSON (Debian: libcjson-dev) parses safetensors headers, their sharding
# index and config.json.  Without it the safetensors reader is built as
# stubs that say so (RLX_ERR_UNSUPPORTED).
find_library(RLX_CJSON_LIBRARY NAMES cjson)
find_path(RLX_CJSON_INCLUDE_DIR cjson/cJSON.h)
if(RLX_CJSON_LIBRARY AND RLX_CJSON_INCLUDE_DIR)
  set(RLX_HAVE_CJSON ON)
  target_include_directories(rlx_objects PRIVATE ${RLX_CJSON_INCLUDE_DIR})
  target_link_libraries(rlx_objects PRIVATE ${RLX_CJSON_LIBRARY})
  list(APPEND RLX_FEATURE_DEFS RLX_HAVE_CJSON=1)
else()
  set(RLX_HAVE_CJSON OFF)
  message(WARNING "safetensors reader disabled: needs cJSON (Debian: libcjson-dev)")
endif()
