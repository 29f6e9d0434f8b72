# Gangs bought whole: the planner's set launches (controller/fleet/planner.c),
# the member tokens and the launch-one-by-one-release-whole helper
# (providers/common/launch_set.c).
tm_add_c_test(test_planner_gang ${CMAKE_SOURCE_DIR}/tests/unit/fleet/test_planner_gang.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_fleet)
tm_add_c_test(test_launch_set ${CMAKE_SOURCE_DIR}/tests/unit/providers/common/test_launch_set.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_provider_common)
# The shortage memory the three clouds share (providers/common/shortage.c).
tm_add_c_test(test_shortage ${CMAKE_SOURCE_DIR}/tests/unit/providers/common/test_shortage.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_provider_common)
# The launch engine every cloud runs (providers/common/launch.c) against a
# table-driven fake cloud: shortage then the next offer, a lost answer found
# by token and adopted, a fatal answer, the relaunch and retry budgets
# (Retry-After), a gang launch set all or nothing.  Labelled with every
# cloud it serves, so each cloud's run guards it.
tm_add_c_test(test_launch_engine ${CMAKE_SOURCE_DIR}/tests/unit/providers/common/test_launch_engine.c
              LABELS unit aws gcp azure TIMEOUT 60 LINK tarmac_provider_common)
# One runner for every `tarmac check <cloud>` (providers/common/check.c):
# --help exits 0 with the usage on stdout, an unknown option exits 2.
tm_add_test(check_help LABELS unit aws gcp azure TIMEOUT 30
            COMMAND ${CMAKE_SOURCE_DIR}/tests/unit/providers/common/check_help.sh)
# A provider's copy of its pools and instance types (providers/common/pools.c).
tm_add_c_test(test_provider_pools ${CMAKE_SOURCE_DIR}/tests/unit/providers/common/test_pools.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_provider_common)
# A gang bought whole against the Azure fake, with a zone short mid-set.
tm_add_test(itest_gang_azure LABELS integration azure FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gang_azure.sh)
tm_add_c_test(test_reconcile_gang ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_gang.c
              LABELS unit elastic TIMEOUT 60 LINK tarmac_reconcile)
tm_add_c_test(test_ec2_fleet_set ${CMAKE_SOURCE_DIR}/tests/unit/providers/aws/test_ec2_fleet_set.c
              LABELS unit aws TIMEOUT 60)
# A gang bought whole on moto (CreateFleet instant), the first attempt short.
tm_add_test(itest_gang_aws LABELS integration aws FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gang_aws.sh)
# A gang bought whole on the GCP fake, its first zone exhausted.
tm_add_test(itest_gang_gcp LABELS integration gcp FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/gang_gcp.sh)
tm_add_c_test(test_sim_launch_set ${CMAKE_SOURCE_DIR}/tests/unit/providers/sim/test_sim_launch_set.c
              LABELS unit foundation TIMEOUT 60)
