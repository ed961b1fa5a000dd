#!/bin/sh
# Permute-and-flip (McKenna & Sheldon 2020) in POSIX sh and awk, under dplab's external
# protocol 1: the same mechanism as python/examples/permute_and_flip.py, giving the same
# distribution (not the same draws). Input: one frame with `candidate` and `score` columns
# (plain text, no commas); parameters `epsilon`, `sensitivity` (default 1), `samples`.
set -eu

json=${DPLAB_JSON:?run me from dplab}
# dplab.json is pretty-printed with one key per line: the first line holding a key gives
# its value (`params` come before `axes`). A program with jq at hand would use it instead.
value() {
    sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" "$json" | head -n 1
}
epsilon=$(value epsilon)
sensitivity=$(value sensitivity)
samples=$(value samples)
seed_lo=$(value lo)
input=$(value csv)

awk -F, -v eps="$epsilon" -v sens="${sensitivity:-1}" -v n="$samples" -v seed="$seed_lo" '
    BEGIN { srand(substr(seed, length(seed) > 9 ? length(seed) - 8 : 1) + 0) }
    NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "candidate") cc = i; if ($i == "score") sc = i }
              if (!cc || !sc) { print "the input needs columns candidate and score" > "/dev/stderr"; exit 2 }
              next }
    { k++; name[k] = $cc; score[k] = $sc + 0; if (k == 1 || score[k] > best) best = score[k] }
    END {
        for (r = 1; r <= k; r++) { heads[r] = exp(eps * (score[r] - best) / (2 * sens)); order[r] = r; count[r] = 0 }
        for (s = 0; s < n; s++) {
            for (i = k; i > 1; i--) { j = int(rand() * i) + 1; t = order[i]; order[i] = order[j]; order[j] = t }
            for (i = 1; i <= k; i++) { r = order[i]; if (rand() < heads[r]) { count[r]++; break } }
        }
        print "candidate,score,count,frequency"
        for (r = 1; r <= k; r++) printf "%s,%.17g,%d,%.17g\n", name[r], score[r], count[r], count[r] / n
    }
' "$input" > output/out.csv
