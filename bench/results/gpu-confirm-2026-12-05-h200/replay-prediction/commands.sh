set -e
cd "$(git rev-parse --show-toplevel)"

export HTAM_SCORING__REWARD_FROM=parent
R="--llm catalog --model catalog-space-v1 --evaluator replay --replay bench/results/table-2026-12-04-h200-suite/table.parquet --seeds 30 --workers 2 --no-compile-reference"
O=${O:-/tmp/cfp}
htam bench bench/tables/suite-train.txt --method htam $R --steps 6 --out $O/train
mkdir -p $O/mem && cp $O/train/memory/*.json $O/mem/
htam bench bench/tables/suite-test.txt --method htam --memory-from $O/mem $R --steps 3 --out $O/htam
htam bench bench/tables/suite-test.txt --method feedback $R --steps 3 --out $O/feedback
echo done
