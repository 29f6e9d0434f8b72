# One queue, three clouds: a pool group's work across aws, gcp and azure
# (controller/fleet/offers.c, controller/reconcile/fleet.c, the daemon's
# follow-up pass on a shortage).
# test_planner_xcloud links fleet/ alone: the planner and its offers stay pure.
tm_add_c_test(test_planner_xcloud ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_planner_xcloud.c
              LABELS unit elastic TIMEOUT 30 LINK tarmac_fleet)
# The same through tm_reconcile with three sim clouds in one pool group:
# the request_node decision names the cloud and the offers passed over;
# the group's config checks; config/example-three-clouds.yaml loads.
tm_add_c_test(test_reconcile_xcloud ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_xcloud.c
              LABELS unit elastic TIMEOUT 30 LINK tarmac_reconcile)
# End to end on three sim clouds in one pool group: the cheapest (azure
# spot) holds one node, the second is bought on aws in the same tick (a
# follow-up pass); spend by provider from `tarmac spend`.
tm_add_test(itest_xcloud LABELS integration elastic FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/xcloud.sh)
# `tarmac check config` on config/example-three-clouds.yaml: valid, the
# group's offers cheapest first; a group mixing GPU models refused (no database).
tm_add_test(test_check_config_xcloud LABELS unit elastic TIMEOUT 30
            COMMAND ${CMAKE_SOURCE_DIR}/tests/unit/cli/check_config.sh)
# The same against the real fakes (moto, gcp_fake.py, azure_fake.py): Azure
# exhausted, AWS fills in the same tick, GCP (dearer) passed over.  Labelled
# slow: moto, both fakes and the provider checks take a minute to start here.
tm_add_test(itest_xcloud_fakes LABELS integration aws gcp azure slow FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/xcloud_fakes.sh)
