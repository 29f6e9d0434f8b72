# providers/gcp: the Compute Engine client, the GCP provider, `tarmac check gcp`.

tm_add_c_test(test_gcp ${CMAKE_SOURCE_DIR}/tests/unit/providers/gcp/test_gcp.c LABELS unit gcp
              TIMEOUT 60)

# Replays the corpus through the fuzz entry point with a plain main().
add_executable(fuzz_gcp_json_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_gcp_json.c)
target_compile_definitions(fuzz_gcp_json_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_gcp_json_replay PRIVATE tarmac_lib)
tm_add_test(fuzz_gcp_json_corpus LABELS unit gcp TIMEOUT 60
            COMMAND fuzz_gcp_json_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/gcp_json)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_gcp_json is not built")
  else()
    add_executable(fuzz_gcp_json ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_gcp_json.c
                   ${CMAKE_SOURCE_DIR}/providers/gcp/gce_json.c
                   ${CMAKE_SOURCE_DIR}/providers/gcp/gce_build.c
                   ${CMAKE_SOURCE_DIR}/providers/gcp/gcp_auth.c)
    target_include_directories(fuzz_gcp_json PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_gcp_json PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_gcp_json PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_gcp_json PRIVATE tarmac_lib PkgConfig::CJSON PkgConfig::SSL)
  endif()
endif()

# The fake checked against Google's own client (google-auth-library, pinned,
# installed into a temporary folder): our JWT equals its JWT byte for byte,
# and the fake accepts what it sends.  Skipped (exit 0, said so) without npm.
tm_add_test(itest_gcp_reference_client LABELS integration gcp slow TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gcp_reference_client.sh)

# The controller end to end against the fake: check gcp, spot and
# on-demand pools, zone fallback, preemption, secrets, request validation.
tm_add_test(itest_gcp_e2e LABELS integration gcp FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gcp_e2e.sh)

# kill -9 during launches and terminations (KILLS, default 5; the soak is
# KILLS=50, see providers/gcp/README.md).
tm_add_test(itest_gcp_kill9 LABELS integration gcp slow FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gcp_kill9.sh)

add_executable(gcp_jwt_tool ${CMAKE_SOURCE_DIR}/tests/unit/providers/gcp/gcp_jwt_tool.c)
target_link_libraries(gcp_jwt_tool PRIVATE tarmac_lib)

# Faults against the fake: zone exhaustion and fallback, 429/5xx retries,
# preemption requeueing work, a revoked token.
tm_add_test(itest_gcp_faults LABELS integration gcp FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gcp_faults.sh)

# The token cache (fetch once, background refresh, invalidate, refused key)
# and the GCE client (429/5xx retried inside the budget, 403 closes the
# auth gate) on a real loop against the fake, which the binary starts.
tm_add_c_test(test_gcp_client ${CMAKE_SOURCE_DIR}/tests/integration/test_gcp_client.c
              LABELS integration gcp TIMEOUT 60)
# A gang's instances.bulkInsert requests (providers/gcp/gce_build.c) and the
# instances.get answer its tagging reads.
tm_add_c_test(test_gce_bulk ${CMAKE_SOURCE_DIR}/tests/unit/providers/gcp/test_gce_bulk.c
              LABELS unit gcp TIMEOUT 60)
# A gang through instances.bulkInsert (providers/gcp/gcp_launch_set.c) on a
# real loop against the fake: short zone, made, found again, a cloud that
# breaks minCount, a refused setLabels, an unknown placement policy.
tm_add_c_test(test_gcp_launch_set ${CMAKE_SOURCE_DIR}/tests/integration/test_gcp_launch_set.c
              LABELS integration gcp TIMEOUT 120)
