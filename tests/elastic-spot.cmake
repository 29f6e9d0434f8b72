# Spot hazards and availability fitted from the public spot traces
# (controller/fleet/spot_fit.c, spot_traces.c, cli/spot_fit.c, core/spot_hazards.c) and
# their use by the elastic replay (`replay --elastic --hazards FILE`).
# test_spot_fit reads ../shared/traces/spot beside the source tree and skips
# that case when it is absent.
tm_add_c_test(test_spot_fit ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_spot_fit.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_fleet)
tm_add_c_test(test_spot_replay ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_spot_replay.c
              LABELS unit elastic TIMEOUT 120)
