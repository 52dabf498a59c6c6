#!/usr/bin/env bash
# One device call: record the occupancy examples, triton_atomic's new fixed version and triton_few_warps' Proton launch.
set -u
start=$(date +%s)
mkdir -p /tmp/site && tar -C /tmp/site -xJf .devsite/site.tar.xz
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/usr/local/cuda/bin:$PATH
R=/tmp/call1; mkdir -p $R/res $R/rec_py $R/rec_cuda $R/rec_proton
nvidia-smi -L > $R/res/smi.txt 2>&1
make -C examples -j16 -s > $R/res/make.log 2>&1; echo "make rc=$?" >> $R/res/rc
(
  ( CUDA_VISIBLE_DEVICES=0 python -m benchmarks.diagnose --out $R/res/diagnose_python.json --record $R/rec_py --repeats 1 \
      --only triton_atomic,triton_few_warps --rows-from benchmarks/results/diagnose_python.json > $R/res/py.log 2>&1
    echo "py rc=$? at $(( $(date +%s) - start ))" >> $R/res/rc ) &
  ( CUDA_VISIBLE_DEVICES=1 python -m benchmarks.diagnose --out $R/res/diagnose.json --record $R/rec_cuda --repeats 2 \
      --only small_grid,register_limited,spill_occupancy --rows-from benchmarks/results/diagnose.json > $R/res/cuda.log 2>&1
    echo "cuda rc=$? at $(( $(date +%s) - start ))" >> $R/res/rc
    CUDA_VISIBLE_DEVICES=1 python -m benchmarks.proton --only triton_few_warps --record $R/rec_proton \
      --rows-from benchmarks/results/proton.json --out $R/res/proton.json > $R/res/proton.log 2>&1
    echo "proton rc=$? at $(( $(date +%s) - start ))" >> $R/res/rc ) &
  wait
) &
work=$!
while kill -0 $work 2>/dev/null && [ $(( $(date +%s) - start )) -lt 560 ]; do sleep 2; done
kill -0 $work 2>/dev/null && echo "deadline: still running at $(( $(date +%s) - start ))" >> $R/res/rc
tar czf $OUT/call1.tgz -C $R res rec_py rec_cuda rec_proton
cat $R/res/rc; tail -5 $R/res/py.log $R/res/cuda.log $R/res/proton.log
