# Team GPU quotas (controller/sched/quota.h): known answers, linked with
# the scheduler's library alone.
tm_add_c_test(test_quota ${CMAKE_SOURCE_DIR}/tests/unit/sched/test_quota.c
              LABELS unit quota TIMEOUT 60 LINK tarmac_sched)
# Quotas over the API and CLI against the real serve: roles, bad input
# naming the field with nothing written, show, overcommit, removal.
tm_add_test(itest_quota_api LABELS integration quota FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/quota_api.sh)
# Lend and reclaim live with the sim cloud: a borrower checkpointed and
# requeued for the owner, resumed later, no reclaim loop; removal while
# borrowing refused; quota and budget together.
tm_add_test(itest_quota_live LABELS integration quota FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/quota_live.sh)
# The live tick's quotas (controller/reconcile/quotas.c): reclaims as
# preempt or checkpoint ops naming job, owner and GPU-time redone, the
# disruption budget, never a non-preemptible borrower, the view, the
# overcommit and the whole-set check the daemon hands the API.
tm_add_c_test(test_reconcile_quota ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_reconcile_quota.c
              LABELS unit quota LINK tarmac_reconcile)
# The same with the local provider: real agents, the checkpoint signal,
# the resume from the checkpoint.
tm_add_test(itest_quota_local LABELS integration quota FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/quota_local.sh)
# Three teams with the sim cloud: each borrowed job reclaimed once, for
# each owner, and no reclaim cycle.
tm_add_test(itest_quota_three LABELS integration quota FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/quota_three.sh)
# Teams in the time replay (controller/replay/replay_quota.c): strict
# quotas never borrow, tarmac lends and reclaims, fair share, the guarantee.
tm_add_c_test(test_replay_quota ${CMAKE_SOURCE_DIR}/tests/unit/replay/test_replay_quota.c
              LABELS unit quota TIMEOUT 60 LINK tarmac_replay_lib)
# `tarmac replay --quotas FILE`: the results' keys, a sharing ratio by hand,
# a bad quotas file refused naming the entry and the field.
tm_add_test(test_replay_quota_cli LABELS unit quota TIMEOUT 60
            COMMAND ${CMAKE_SOURCE_DIR}/tests/unit/cli/replay_quota.sh)
