#!/bin/sh
# What quantization does to the demo model, measured with logitscope's own
# CLI: q8, q6 and q4 variants, a teacher-forced panel of the held-out
# chapters (written by train.py) on f32 and on each, and the reports.
#
#   demo/train/measure.sh [HELDOUT] [OUT]     # from the repository root
#
# The model is copied out first, so that the variants land beside the
# copy and never in demo/model. The report summaries go to
# OUT/summary.txt (default demo/train/measure.txt).
set -eu
held=${1:-/tmp/logitscope-demo-train/heldout.txt}
out=${2:-demo/train}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cli="$work/logitscope"
go build -o "$cli" ./cmd/logitscope
cp -r demo/model "$work/model"
m="$work/model"
# Windows of 128 tokens after the BOS, as train.py's held-out loss.
"$cli" capture --model "$m" --device cpu --variant f32 --panel "$held" --window 129 --dump-logits "$work/f32.dump" >/dev/null
{
	for s in q8 q6 q4; do
		"$cli" quantize --model "$m" --scheme $s >/dev/null
		"$cli" capture --model "$m" --device cpu --variant $s --panel "$held" --window 129 --dump-logits "$work/$s.dump" >/dev/null
		echo "## $s against f32"
		"$cli" report --ref "$work/f32.dump" --test "$work/$s.dump" --tokenizer "$m/tokenizer.json"
		echo
	done
} >"$out/measure.txt"
echo "wrote $out/measure.txt"
