# What llm-server builds with, shared by the server (CMakeLists.txt here) and
# the request-path fuzzer (tests/fuzz): cpp-httplib and nlohmann-json, and
# the server's sources other than main.cpp.
#
# Sets _llm_httplib_target (empty when cpp-httplib is missing),
# nlohmann_json_FOUND, LLM_HTTPLIB_VERSION and LLM_SERVER_CORE_SOURCES.
# Debian's cpp-httplib is a compiled library whose pkg-config file carries
# the feature macros its ABI was built with, so it is found through
# pkg-config first; a header-only httplib.h is the fallback.
find_package(nlohmann_json 3 QUIET CONFIG)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(LLM_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
set(_llm_httplib_target "")
if(LLM_HTTPLIB_FOUND)
  set(_llm_httplib_target PkgConfig::LLM_HTTPLIB)
else()
  find_path(LLM_HTTPLIB_INCLUDE httplib.h)
  find_library(LLM_HTTPLIB_LIBRARY cpp-httplib)
  if(LLM_HTTPLIB_INCLUDE)
    if(NOT TARGET llm_httplib)
      add_library(llm_httplib INTERFACE)
      target_include_directories(llm_httplib INTERFACE ${LLM_HTTPLIB_INCLUDE})
      if(LLM_HTTPLIB_LIBRARY)
        target_link_libraries(llm_httplib INTERFACE ${LLM_HTTPLIB_LIBRARY})
      endif()
    endif()
    set(_llm_httplib_target llm_httplib)
  endif()
endif()

set(LLM_SERVER_CORE_SOURCES "")
foreach(f access.cpp client_socket.cpp embeddings_routes.cpp engine.cpp http_body.cpp messages_api.cpp metrics.cpp native_completion.cpp
          native_routes.cpp openai_request.cpp openai_response.cpp openai_tools.cpp prompt_render.cpp request_defaults.cpp
          responses_api.cpp routes.cpp slot_store.cpp
          request_limits.cpp request_peek.cpp kv_transfer_params.cpp image_url.cpp ../chat_prompt.cpp ../cli_common.cpp)
  list(APPEND LLM_SERVER_CORE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/${f})
endforeach()
