#!/bin/sh
# An external dplab stage in POSIX shell and awk (protocol 1): adds Laplace noise of scale
# sensitivity/epsilon to the `count` column of its one input, and writes a summary artifact.
# Nothing here is Python: dplab's hand-off is files (see src/program/protocol.rs).
#
#   kind: external
#   with:
#     command: [sh, laplace.sh]
#     params: {epsilon: $eps, sensitivity: 1}
set -eu

json=${DPLAB_JSON:?run me from dplab}
# dplab.json is pretty-printed with one key per line: the first line holding a key gives
# its value (`params` come before `axes`). A program with jq at hand would use it instead.
value() {
    sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" "$json" | head -n 1
}
epsilon=$(value epsilon)
sensitivity=$(value sensitivity)
seed_lo=$(value lo)
input=$(value csv)       # the first input's CSV (inputs come before output)
out=output/out.csv

# awk's generator takes a number: the last 9 digits of the seed's low half fit exactly.
awk -F, -v eps="$epsilon" -v sens="${sensitivity:-1}" -v seed="$seed_lo" '
    BEGIN { srand(substr(seed, length(seed) > 9 ? length(seed) - 8 : 1) + 0); b = sens / eps }
    NR == 1 {
        for (i = 1; i <= NF; i++) if ($i == "count") c = i
        if (!c) { print "no column count in the input" > "/dev/stderr"; exit 2 }
        print "row,count,noisy"; next
    }
    {
        u = rand() - 0.5
        s = u < 0 ? -1 : 1
        x = -b * s * log(1 - 2 * s * u)
        printf "%d,%s,%.17g\n", NR - 2, $c, $c + x
        sum += (x < 0 ? -x : x); n++
    }
    END { if (n) printf "rows %d, mean |noise| %.6g, scale %.6g\n", n, sum / n, b > "artifacts/summary.txt" }
' "$input" > "$out"
