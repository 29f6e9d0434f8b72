# controller/agent/ (but metadata*.c, see agent-metadata.cmake): the node agent.

# The pure parts with known answers, linked with the pure library alone.
tm_add_c_test(test_agent_pure ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_agent_pure.c
              LABELS unit agent TIMEOUT 30 LINK tarmac_agent_pure)
# A multi-node job's rendezvous on the agent's side: the answer's fields
# (bad values refused naming them), the variables, the hostfile and
# {hostfile}, the node address check shared with the API's enrollment.
tm_add_c_test(test_agent_rendezvous ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_rendezvous.c
              LABELS unit agent TIMEOUT 30 LINK tarmac_agent_pure tarmac_spec)
# Each attempt's checkpoint folder, the newest complete checkpoint of an
# earlier attempt (a real temporary folder) and the variables naming them.
tm_add_c_test(test_agent_checkpoint ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_checkpoint.c
              LABELS unit agent TIMEOUT 30 LINK tarmac_agent_pure)

# Two agents on one host never run two jobs under one UID (job_user.c's
# locks; root only, skipped otherwise).
tm_add_c_test(test_agent_job_uid ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_job_uid.c
              LABELS unit agent TIMEOUT 30 LINK tarmac_agent)

# The whole agent against a loopback stub of the contract's routes
# (tests/unit/agent/stub_controller.py): real processes, no database; about
# 30 s on an idle machine, most of it grace periods and backoff.
tm_add_test(test_agent_stub LABELS unit agent TIMEOUT 180
            COMMAND bash ${CMAKE_SOURCE_DIR}/tests/unit/agent/test_agent_stub.sh)

# The heartbeat answer parser's fuzz target, its corpus replayed here.
add_executable(fuzz_agent_answer_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_agent_answer.c)
target_compile_definitions(fuzz_agent_answer_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_agent_answer_replay PRIVATE tarmac_agent_pure)
tm_add_test(fuzz_agent_answer_corpus LABELS unit agent TIMEOUT 60
            COMMAND fuzz_agent_answer_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/agent_answer)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_agent_answer is not built")
  else()
    add_executable(fuzz_agent_answer ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_agent_answer.c
                   ${CMAKE_SOURCE_DIR}/controller/agent/answer.c ${CMAKE_SOURCE_DIR}/core/address.c
                   ${CMAKE_SOURCE_DIR}/core/err.c)
    target_include_directories(fuzz_agent_answer PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_agent_answer PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_agent_answer PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_agent_answer PRIVATE PkgConfig::CJSON m)
  endif()
endif()

# The reader of the agent's batches of job output (controller/spec/log_chunks.c):
# known answers, and its fuzz target's corpus replayed.
tm_add_c_test(test_log_chunks ${CMAKE_SOURCE_DIR}/tests/unit/spec/test_log_chunks.c LABELS unit agent
              TIMEOUT 60 LINK tarmac_spec)
add_executable(fuzz_log_chunks_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_log_chunks.c)
target_compile_definitions(fuzz_log_chunks_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_log_chunks_replay PRIVATE tarmac_spec)
tm_add_test(fuzz_log_chunks_corpus LABELS unit agent TIMEOUT 60
            COMMAND fuzz_log_chunks_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/log_chunks)
if(TM_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_log_chunks ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_log_chunks.c
                 ${CMAKE_SOURCE_DIR}/controller/spec/log_chunks.c ${CMAKE_SOURCE_DIR}/controller/spec/json_body.c
                 ${CMAKE_SOURCE_DIR}/controller/spec/job_spec.c ${CMAKE_SOURCE_DIR}/core/model.c
                 ${CMAKE_SOURCE_DIR}/core/units.c ${CMAKE_SOURCE_DIR}/core/err.c)
  target_include_directories(fuzz_log_chunks PRIVATE ${CMAKE_SOURCE_DIR})
  target_compile_options(fuzz_log_chunks PRIVATE -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer)
  target_link_options(fuzz_log_chunks PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_log_chunks PRIVATE PkgConfig::CJSON PkgConfig::JANSSON PkgConfig::SSL ${MATH_LIB})
endif()
