# providers/aws: the EC2 client, the AWS provider, `tarmac check aws`.

tm_add_c_test(test_ec2_xml ${CMAKE_SOURCE_DIR}/tests/unit/providers/aws/test_ec2_xml.c LABELS unit aws
              TIMEOUT 60)

# Replays the corpus through the fuzz entry point with a plain main(), so
# every compiler exercises it on every ctest run.
add_executable(fuzz_ec2_xml_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_ec2_xml.c)
target_compile_definitions(fuzz_ec2_xml_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_ec2_xml_replay PRIVATE tarmac_lib)
tm_add_test(fuzz_ec2_xml_corpus LABELS unit aws TIMEOUT 60
            COMMAND fuzz_ec2_xml_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/ec2_xml)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_ec2_xml is not built")
  else()
    # The parser is compiled into the target so it carries the fuzzer's
    # coverage instrumentation, not only the harness.
    add_executable(fuzz_ec2_xml ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_ec2_xml.c
                   ${CMAKE_SOURCE_DIR}/providers/aws/ec2_xml.c
                   ${CMAKE_SOURCE_DIR}/controller/io/xml_tree.c
                   ${CMAKE_SOURCE_DIR}/core/units.c ${CMAKE_SOURCE_DIR}/core/log.c
                   ${CMAKE_SOURCE_DIR}/core/err.c)
    target_include_directories(fuzz_ec2_xml PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_ec2_xml PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_ec2_xml PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_ec2_xml PRIVATE PkgConfig::EXPAT PkgConfig::UV PkgConfig::YAML
                          PkgConfig::SSL ${MATH_LIB})
  endif()
endif()

# Against moto with SigV4 checking on, and the fault proxy in front of it;
# the test binary starts and stops both (one moto per binary).
tm_add_c_test(test_aws_moto ${CMAKE_SOURCE_DIR}/tests/integration/test_aws_moto.c
              LABELS integration aws TIMEOUT 300)

# The controller end to end against moto: check aws, jobs on on-demand and
# spot pools, kill -9 in the launch path (KILLS random kills, default 50).
tm_add_test(itest_aws_e2e LABELS integration aws FIXTURES pg TIMEOUT 900
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/aws_e2e.sh)
