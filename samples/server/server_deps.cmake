# What llm-server builds with, shared by the server (CMakeLists.txt here) and
# the request-path fuzzer (tests/fuzz): cpp-httplib and nlohmann-json, and
# the server's sources other than main.cpp.
#
# Sets _llm_httplib_target (empty when cpp-httplib is missing),
# nlohmann_json_FOUND, LLM_HTTPLIB_VERSION, LLM_HTTPLIB_TLS and
# LLM_SERVER_CORE_SOURCES. Debian's cpp-httplib is a compiled library whose
# pkg-config file carries the feature macros its ABI was built with
# (CPPHTTPLIB_OPENSSL_SUPPORT among them: https:// image URLs, image_fetch.h),
# so it is found through pkg-config first; a header-only httplib.h is the
# fallback, with OpenSSL when find_package finds it (Debian: libssl-dev).
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
      else()
        find_package(OpenSSL QUIET)
        if(OpenSSL_FOUND)
          target_compile_definitions(llm_httplib INTERFACE CPPHTTPLIB_OPENSSL_SUPPORT)
          target_link_libraries(llm_httplib INTERFACE OpenSSL::SSL OpenSSL::Crypto)
        endif()
      endif()
    endif()
    set(_llm_httplib_target llm_httplib)
  endif()
endif()

set(LLM_HTTPLIB_TLS OFF)
if(LLM_HTTPLIB_FOUND AND LLM_HTTPLIB_CFLAGS MATCHES "CPPHTTPLIB_OPENSSL_SUPPORT")
  set(LLM_HTTPLIB_TLS ON)
elseif(TARGET llm_httplib)
  get_target_property(_llm_httplib_defs llm_httplib INTERFACE_COMPILE_DEFINITIONS)
  if(_llm_httplib_defs MATCHES "CPPHTTPLIB_OPENSSL_SUPPORT")
    set(LLM_HTTPLIB_TLS ON)
  endif()
endif()

set(LLM_SERVER_CORE_SOURCES "")
foreach(f access.cpp client_socket.cpp embeddings_routes.cpp engine.cpp http_body.cpp messages_api.cpp metrics.cpp native_completion.cpp
          native_routes.cpp openai_request.cpp openai_response.cpp openai_tools.cpp prompt_render.cpp request_defaults.cpp
          responses_api.cpp routes.cpp slot_store.cpp
          request_limits.cpp request_peek.cpp kv_transfer_params.cpp image_url.cpp remote_url.cpp image_fetch.cpp ../chat_prompt.cpp ../cli_common.cpp)
  list(APPEND LLM_SERVER_CORE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/${f})
endforeach()
