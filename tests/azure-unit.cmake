# providers/azure: request bodies, answers, error map (pure); the ARM client
# (token cache, refresh, Retry-After, 5xx budget, auth gate) against the fake.

tm_add_c_test(test_azure_arm_json ${CMAKE_SOURCE_DIR}/tests/unit/providers/azure/test_arm_json.c
              LABELS unit azure TIMEOUT 60)
tm_add_c_test(test_azure_config ${CMAKE_SOURCE_DIR}/tests/unit/providers/azure/test_azure_config.c
              LABELS unit azure TIMEOUT 60)
# The client certificate credential: the PEM file (core, linked alone), the
# signed assertion (header, claims, signature checked with OpenSSL).
tm_add_c_test(test_client_cert ${CMAKE_SOURCE_DIR}/tests/unit/core/test_client_cert.c
              LABELS unit azure TIMEOUT 60 LINK tarmac_core)
tm_add_c_test(test_azure_arm_assertion ${CMAKE_SOURCE_DIR}/tests/unit/providers/azure/test_arm_assertion.c
              LABELS unit azure TIMEOUT 60)
tm_add_c_test(test_azure_arm_client ${CMAKE_SOURCE_DIR}/tests/unit/providers/azure/test_arm_client.c
              LABELS unit azure TIMEOUT 60)

# The corpus replayed through the fuzz entry point on every ctest run.
add_executable(fuzz_azure_json_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_azure_json.c)
target_compile_definitions(fuzz_azure_json_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_azure_json_replay PRIVATE tarmac_lib)
tm_add_test(fuzz_azure_json_corpus LABELS unit azure TIMEOUT 60
            COMMAND fuzz_azure_json_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/azure_json)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_azure_json is not built")
  else()
    add_executable(fuzz_azure_json ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_azure_json.c
                   ${CMAKE_SOURCE_DIR}/providers/azure/arm_json.c
                   ${CMAKE_SOURCE_DIR}/core/units.c ${CMAKE_SOURCE_DIR}/core/log.c
                   ${CMAKE_SOURCE_DIR}/core/err.c)
    target_include_directories(fuzz_azure_json PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_azure_json PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_azure_json PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_azure_json PRIVATE PkgConfig::CJSON PkgConfig::UV PkgConfig::YAML
                          PkgConfig::SSL ${MATH_LIB})
  endif()
endif()
