# The configuration loader: unit tests, corpus replay and the fuzz target.

tm_add_c_test(test_config ${CMAKE_SOURCE_DIR}/tests/unit/core/test_config.c LABELS unit foundation LINK tarmac_core)

# Replays every seed in the corpus through the fuzz entry point with a plain
# main(), so the corpus is exercised by every compiler on every ctest run.
add_executable(fuzz_config_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_config.c)
target_compile_definitions(fuzz_config_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_config_replay PRIVATE tarmac_core)
tm_add_test(fuzz_config_corpus LABELS unit foundation TIMEOUT 60
            COMMAND fuzz_config_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/config)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_config is not built")
  else()
    # The loader is compiled into the target itself so that it carries the
    # fuzzer's coverage instrumentation, not only the harness (with the
    # spot hazard table a provider's spot_hazards names, and its reader).
    add_executable(fuzz_config ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_config.c
                   ${CMAKE_SOURCE_DIR}/core/config.c ${CMAKE_SOURCE_DIR}/core/config_table.c
                   ${CMAKE_SOURCE_DIR}/core/config_check.c ${CMAKE_SOURCE_DIR}/core/config_load.c
                   ${CMAKE_SOURCE_DIR}/core/config_lookup.c
                   ${CMAKE_SOURCE_DIR}/core/units.c ${CMAKE_SOURCE_DIR}/core/log.c
                   ${CMAKE_SOURCE_DIR}/core/err.c ${CMAKE_SOURCE_DIR}/core/file.c
                   ${CMAKE_SOURCE_DIR}/core/yaml_table.c ${CMAKE_SOURCE_DIR}/core/spot_hazards.c
                   ${CMAKE_SOURCE_DIR}/core/client_cert.c ${TM_CONFIG_KIND_SOURCES})
    target_include_directories(fuzz_config PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_config PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_config PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_config PRIVATE PkgConfig::YAML PkgConfig::SSL ${MATH_LIB})
  endif()
endif()

# The whole-file reader the trace and table loaders share (core/file.c).
tm_add_c_test(test_file ${CMAKE_SOURCE_DIR}/tests/unit/core/test_file.c LABELS unit foundation LINK tarmac_core)

# The one duration and one price parser every layer uses (core/units.c).
tm_add_c_test(test_units ${CMAKE_SOURCE_DIR}/tests/unit/core/test_units.c LABELS unit foundation LINK tarmac_core)
