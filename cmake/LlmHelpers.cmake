# Helpers for llmrt targets.

function(llm_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()

macro(llm_setup_sanitizers)
  if(LLM_SANITIZE)
    string(REPLACE ";" "," _llm_san "${LLM_SANITIZE}")
    add_compile_options(-fsanitize=${_llm_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    add_link_options(-fsanitize=${_llm_san})
  endif()
endmacro()

# Embeds a model file into `target` as the symbols llm_embedded_model_begin/_end
# (an assembler .incbin, so the 1 MiB file costs no compile time).
function(llm_embed_model target file)
  if(NOT EXISTS ${file})
    message(WARNING "llmrt: ${file} not found; building without an embedded model")
    return()
  endif()
  set(asm ${CMAKE_CURRENT_BINARY_DIR}/embedded_model.S)
  file(WRITE ${asm}
    "    .section .rodata\n"
    "    .balign 64\n"
    "    .globl llm_embedded_model_begin\n"
    "    .hidden llm_embedded_model_begin\n"
    "llm_embedded_model_begin:\n"
    "    .incbin \"${file}\"\n"
    "    .globl llm_embedded_model_end\n"
    "    .hidden llm_embedded_model_end\n"
    "llm_embedded_model_end:\n"
    "    .section .note.GNU-stack,\"\",@progbits\n")
  set_source_files_properties(${asm} PROPERTIES OBJECT_DEPENDS ${file})
  target_sources(${target} PRIVATE ${asm})
  target_compile_definitions(${target} PRIVATE LLM_HAVE_EMBEDDED_MODEL=1)
endfunction()

# llm_add_test(NAME SOURCES... [C]) — one GoogleTest executable per test file.
function(llm_add_gtest name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE llmrt_static llmrt_test_support GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  llm_target_warnings(${name})
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "LLM_SOURCE_DIR=${PROJECT_SOURCE_DIR}" TIMEOUT 600)
endfunction()
