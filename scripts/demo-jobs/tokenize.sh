#!/bin/sh
# Preprocessing: a line per shard, about SECONDS long in all (default 15).
secs=${1:-15}
shards=150
echo "tokenize: job $TARMAC_JOB_ID attempt $TARMAC_ATTEMPT on GPU $CUDA_VISIBLE_DEVICES, $shards shards"
i=1
docs=0
while [ $i -le $shards ]; do
    n=$(( (i * 7919) % 900 + 100 ))
    docs=$((docs + n))
    printf 'tokenize: shard %03d/%d: %4d documents, %6d tokens, %7d documents so far\n' "$i" "$shards" "$n" $((n * 412)) "$docs"
    # sleep SECONDS/shards between shards
    [ $((i % 10)) -eq 0 ] && sleep "$(awk "BEGIN{print $secs/15}")"
    i=$((i + 1))
done
echo "tokenize: done, $docs documents in $shards shards"
