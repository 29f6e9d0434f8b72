# The demand forecaster (controller/fleet/forecast.c, cli/forecast.c).
# test_forecast runs `tarmac forecast` too, so it links the whole tree.
# test_forecast reads one Helios series from ../shared/traces beside the
# source tree and skips that case when it is absent.
tm_add_c_test(test_forecast ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_forecast.c
              LABELS unit elastic TIMEOUT 120)
