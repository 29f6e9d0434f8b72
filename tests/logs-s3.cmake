# The S3 log store: the S3 object client (controller/io/s3.c) against moto's
# S3 server with SigV4 checking on; the binary starts and stops its moto.
tm_add_c_test(test_s3_moto ${CMAKE_SOURCE_DIR}/tests/integration/test_s3_moto.c
              LABELS integration agent TIMEOUT 180)
