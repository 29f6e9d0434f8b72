# The runtime predictor's fallback model: known answers
# from synthetic histories, where the predictor asks it, bounded memory.
tm_add_c_test(test_estimate_model ${CMAKE_SOURCE_DIR}/tests/unit/sched/test_estimate_model.c
              LABELS unit scheduler TIMEOUT 60 LINK tarmac_sched)
