#!/bin/sh
# Inference on a share of a GPU (TARMAC_GPU_MILLI): batches for SECONDS.
secs=${1:-10}
end=$(( $(date +%s) + secs ))
n=0
while [ "$(date +%s)" -lt "$end" ]; do
    n=$((n + 32))
    sleep 1
done
echo "infer: job $TARMAC_JOB_ID served $n requests on ${TARMAC_GPU_MILLI:-1000} milli-GPU of $CUDA_VISIBLE_DEVICES"
