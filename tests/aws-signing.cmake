# AWS request signing (core/sigv4.c) and the credential chain
# (controller/io/aws_credentials.c): unit tests, the botocore cross-check, the
# IMDSv2 integration tests, corpus replay and the fuzz target.

# All 31 official SigV4 vectors, stage by stage, plus encoder and hygiene.
# The same binary is the C driver of the botocore cross-check (--sign-stdin).
tm_add_c_test(test_sigv4 ${CMAKE_SOURCE_DIR}/tests/unit/providers/aws/test_sigv4.c LABELS unit aws TIMEOUT 60)

# 400 random EC2 POST requests (fixed seed) signed by us and by botocore.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  tm_add_test(sigv4_botocore LABELS unit aws TIMEOUT 120
              COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/lib/sigv4_botocore.py
                      $<TARGET_FILE:test_sigv4> 400)
  # 300 random path-style S3 requests signed by us and by botocore's S3SigV4Auth.
  tm_add_test(sigv4_s3_botocore LABELS unit aws TIMEOUT 120
              COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/lib/sigv4_s3_botocore.py
                      $<TARGET_FILE:test_sigv4> 300)
endif()

# Environment, shared files, region, endpoint: temporary files only.
tm_add_c_test(test_aws_credentials ${CMAKE_SOURCE_DIR}/tests/unit/providers/aws/test_aws_credentials.c
              LABELS unit aws TIMEOUT 60)
# The same binary against tests/lib/imds_fixture.py (a fake IMDSv2).
tm_add_test(test_aws_credentials_imds LABELS integration aws TIMEOUT 120
            COMMAND $<TARGET_FILE:test_aws_credentials> imds)

# Replays the corpus through the fuzz entry point with a plain main().
add_executable(fuzz_sigv4_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_sigv4.c)
target_compile_definitions(fuzz_sigv4_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_sigv4_replay PRIVATE tarmac_lib)
tm_add_test(fuzz_sigv4_corpus LABELS unit aws TIMEOUT 60
            COMMAND fuzz_sigv4_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/sigv4)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_sigv4 is not built")
  else()
    # The signer is compiled into the target so it carries the coverage
    # instrumentation, not only the harness.
    add_executable(fuzz_sigv4 ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_sigv4.c
                   ${CMAKE_SOURCE_DIR}/core/sigv4.c ${CMAKE_SOURCE_DIR}/core/err.c)
    target_include_directories(fuzz_sigv4 PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_sigv4 PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_sigv4 PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_sigv4 PRIVATE PkgConfig::SSL)
  endif()
endif()
