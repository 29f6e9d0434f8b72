# The demand forecaster (controller/fleet/forecast.c, its series readers
# fleet/forecast_series.c, and `tarmac forecast` in cli/forecast.c).
# test_forecast links fleet/ alone (no libuv, libpq or libcurl), so a stray
# I/O call in the forecaster fails to link; test_forecast_cli is the same
# file with the `tarmac forecast` cases too, linked with the whole tree.
# test_forecast reads one Helios series from ../shared/traces beside the
# source tree and skips that case when it is absent.
tm_add_c_test(test_forecast ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_forecast.c
              LABELS unit elastic TIMEOUT 120 LINK tarmac_fleet)
tm_add_c_test(test_forecast_cli ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_forecast.c
              LABELS unit elastic TIMEOUT 120)
target_compile_definitions(test_forecast_cli PRIVATE TM_FORECAST_CLI_TESTS)
