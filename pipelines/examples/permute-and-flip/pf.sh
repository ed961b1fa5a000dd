#!/bin/sh
# Permute-and-flip in POSIX shell and awk: the same mechanism as pf.py, with awk's own
# generator (the same distribution, not the same draws). dplab's hand-off is files and
# nothing here is Python: the description is dplab.json, the input a CSV file.
set -eu
json=${DPLAB_JSON:?run me from dplab}
# dplab.json is pretty-printed, one key per line; the first line holding a key gives its value.
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
    NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "candidate") cc = i; if ($i == "utility") uc = i }; next }
    { k++; cand[k] = $cc; u[k] = $uc + 0; if (k == 1 || u[k] > best) best = u[k] }
    END {
        for (r = 1; r <= k; r++) { p[r] = exp(eps * (u[r] - best) / (2 * sens)); cnt[r] = 0; ord[r] = r }
        for (s = 0; s < n; s++) {
            for (i = k; i > 1; i--) { j = int(rand() * i) + 1; t = ord[i]; ord[i] = ord[j]; ord[j] = t }
            for (i = 1; i <= k; i++) { r = ord[i]; if (rand() < p[r]) { cnt[r]++; break } }
        }
        print "method,candidate,utility,count,frequency"
        for (r = 1; r <= k; r++) printf "permute_and_flip_awk,%s,%.17g,%d,%.17g\n", cand[r], u[r], cnt[r], cnt[r] / n
    }
' "$input" > output/out.csv
