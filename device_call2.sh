#!/usr/bin/env bash
# Device call 2: the diagnosis benchmark over every CUDA example (GPU 0) and the loop with the scripted
# known fix on the four occupancy examples (GPU 1), at this checkout.
set -u
start=$(date +%s)
mkdir -p /tmp/site && tar -C /tmp/site -xJf .devsite/site.tar.xz
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/usr/local/cuda/bin:$PATH
R=/tmp/call2; mkdir -p $R/res $R/rec_cuda $R/loop_reports
make -C examples -j16 -s > $R/res/make.log 2>&1; echo "make rc=$? at $(( $(date +%s) - start ))" >> $R/res/rc
CUDA=$(python3 -c "import json; print(','.join(e['name'] for e in json.load(open('examples/examples.json')) if not e.get('language')))")
echo "cuda: $CUDA" >> $R/res/rc
(
  ( CUDA_VISIBLE_DEVICES=0 python -m benchmarks.diagnose --out $R/res/diagnose.json --record $R/rec_cuda --repeats 2 \
      --only "$CUDA" > $R/res/cuda.log 2>&1
    echo "cuda rc=$? at $(( $(date +%s) - start ))" >> $R/res/rc ) &
  ( CUDA_VISIBLE_DEVICES=1 python -m benchmarks.loop --out $R/res/loop_occupancy.json --reports $R/loop_reports \
      --only small_grid,register_limited,spill_occupancy,triton_few_warps > $R/res/loop.log 2>&1
    echo "loop rc=$? at $(( $(date +%s) - start ))" >> $R/res/rc ) &
  wait
) &
work=$!
while kill -0 $work 2>/dev/null && [ $(( $(date +%s) - start )) -lt 555 ]; do sleep 2; done
kill -0 $work 2>/dev/null && echo "deadline: still running at $(( $(date +%s) - start ))" >> $R/res/rc
tar czf $OUT/call2.tgz -C $R res rec_cuda loop_reports
cat $R/res/rc; tail -n 30 $R/res/cuda.log; tail -n 12 $R/res/loop.log
