# The S3 log store: the S3 object client (controller/io/s3.c) against moto's
# S3 server with SigV4 checking on; the binary starts and stops its moto.
tm_add_c_test(test_s3_moto ${CMAKE_SOURCE_DIR}/tests/integration/test_s3_moto.c
              LABELS integration agent TIMEOUT 180)
# The S3 log store itself (controller/api/log_store_s3.c) over the real
# index (migrations) and moto: put never overwrites an indexed object,
# forget sweeps what a crash left unnamed, a wrong secret is refused.
tm_add_c_test(test_log_store_s3 ${CMAKE_SOURCE_DIR}/tests/integration/test_log_store_s3.c
              LABELS integration agent FIXTURES pg TIMEOUT 180)
# The same round trip as itest_agent_logs through logs.store: s3 against
# moto: 20 MB read back byte for byte after the node is gone (its bytes in
# the bucket, none in the index), a refused chunk leaving no object, kill
# -9 of the agent mid-output with no gap and no duplicate, no S3 secret in
# any log.
tm_add_test(itest_agent_logs_s3 LABELS integration agent FIXTURES pg TIMEOUT 300
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_logs_s3.sh)
# The cap and the retention through logs.store: s3 against moto: the
# bucket holds exactly the objects the index names, and the retention
# takes a stream's objects and what a crash left unnamed.
tm_add_test(itest_agent_logs_s3_cap LABELS integration agent FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/agent_logs_s3_cap.sh)
