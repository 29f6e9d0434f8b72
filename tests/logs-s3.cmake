# The S3 log store: the S3 object client (controller/io/s3.c) against moto's
# S3 server with SigV4 checking on; the binary starts and stops its moto.
tm_add_c_test(test_s3_moto ${CMAKE_SOURCE_DIR}/tests/integration/test_s3_moto.c
              LABELS integration agent TIMEOUT 180)
# The S3 log store itself (controller/api/log_store_s3.c) over the real
# index (migrations) and moto: put never overwrites an indexed object,
# forget sweeps what a crash left unnamed, a wrong secret is refused.
tm_add_c_test(test_log_store_s3 ${CMAKE_SOURCE_DIR}/tests/integration/test_log_store_s3.c
              LABELS integration agent FIXTURES pg TIMEOUT 180)
