# controller/agent/metadata*.c: the interruption-notice watches.

# The parsers with known answers, linked with the parser library alone.
tm_add_c_test(test_metadata_parse ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_metadata_parse.c
              LABELS unit agent TIMEOUT 30 LINK tm_agent_metadata_parse)

# Each watch against its loopback fake (tests/lib/metadata_fixture.py).
tm_add_c_test(test_metadata_watch ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_metadata_watch.c
              LABELS unit agent TIMEOUT 90 LINK tm_agent_metadata)

add_executable(fuzz_metadata_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_metadata.c)
target_compile_definitions(fuzz_metadata_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_metadata_replay PRIVATE tm_agent_metadata_parse)
tm_add_test(fuzz_metadata_corpus LABELS unit agent TIMEOUT 60
            COMMAND fuzz_metadata_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/metadata)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_metadata is not built")
  else()
    add_executable(fuzz_metadata ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_metadata.c
                   ${CMAKE_SOURCE_DIR}/controller/agent/metadata_parse.c
                   ${CMAKE_SOURCE_DIR}/core/err.c)
    target_include_directories(fuzz_metadata PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_metadata PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_metadata PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_metadata PRIVATE PkgConfig::CJSON)
  endif()
endif()
