#!/usr/bin/env bash
# `make test-slurm`: `dplab slurm` against a real Slurm cluster on this machine (slurmctld,
# slurmd and munged from Debian's packages; recipe in ../shared/SLURM.md), as root.
#
# 1. Installs the packages if they are missing; fails loudly if they cannot be installed.
# 2. Starts munged, slurmctld and slurmd with a configuration, key and state of their own under
#    a temporary directory (nothing in /etc is changed) and stops them by PID whatever happens.
# 3. Runs the pipelines below with `dplab slurm --shards 4 --wait` and checks that the frames
#    are identical to a local `dplab run --jobs 2`.
# 4. Submits again into a fresh store, cancels one pending shard with scancel, checks that
#    --wait says a shard failed (exit 3) and that the merge did not run; submits the same
#    command once more and checks, from the shards' logs and the merge's manifests, that only
#    the missing instances ran and that the frames are again identical to the local run.
#
# The temporary directory stands for the file system every node sees (one machine here).
# KEEP=1 keeps it for inspection.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
DPLAB=$ROOT/target/release/dplab
T0=$(date +%s)

PASSED=0
fail() {
  echo "test-slurm: FAILED: $*" >&2
  exit 1
}
ok() { PASSED=$((PASSED + 1)); } # one more check passed
step() { echo "test-slurm [$(($(date +%s) - T0)) s]: $*"; }

[ -x "$DPLAB" ] || fail "$DPLAB is missing: run \`make build\` first"

# --- 1. Slurm and munge ---------------------------------------------------------------------
missing=()
for tool in munged mungekey slurmctld slurmd sbatch squeue scancel scontrol sinfo; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})"
  [ "$(id -u)" = 0 ] || fail "Slurm is not installed and this is not root: cannot apt-get install slurmctld slurmd slurm-client munge"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    slurmctld slurmd slurm-client munge >/tmp/dplab-test-slurm-apt.log 2>&1; }; then
    tail -n 20 /tmp/dplab-test-slurm-apt.log >&2 || true
    fail "could not install slurmctld slurmd slurm-client munge from Debian's packages (see above): the Slurm test cannot run"
  fi
  for tool in munged mungekey slurmctld slurmd sbatch squeue scancel scontrol sinfo; do
    command -v "$tool" >/dev/null || fail "$tool is still missing after installing the packages"
  done
fi
[ "$(id -u)" = 0 ] || fail "the daemons run as root here (SlurmUser=root): run as root"

# --- 2. A cluster of one machine --------------------------------------------------------------
T=$(mktemp -d /tmp/dplab-test-slurm.XXXXXX)
chmod 755 "$T" # munged runs as the munge user and must reach its directory
PIDS=()
cleanup() {
  local rc=$?
  set +e
  if [ -n "${SLURM_CONF:-}" ] && [ ${#PIDS[@]} -gt 0 ]; then
    scancel --quiet --user=root >/dev/null 2>&1 # our cluster: only our jobs
  fi
  # Newest first: slurmd, slurmctld, then munged, each by the PID it was started with.
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill "${PIDS[i]}" 2>/dev/null
  done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  if [ $rc -ne 0 ] && [ -d "$T/log" ]; then
    echo "--- daemon logs (last lines) ---" >&2
    tail -n 15 "$T"/log/*.log >&2
  fi
  if [ -n "${KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
  echo "test-slurm: $([ $rc -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - T0)) s"
  echo "test-slurm: $PASSED passed, $([ $rc -eq 0 ] && echo 0 || echo 1) failed"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/run" "$T/log" "$T/work"
chown munge:munge "$T/munge"
chmod 755 "$T/munge" # munged wants its socket's directory reachable by every user
# A key of our own: the machine's /etc/munge stays as it is.
setpriv --reuid=munge --regid=munge --init-groups mungekey --create --keyfile="$T/munge/munge.key"
setpriv --reuid=munge --regid=munge --init-groups munged --foreground \
  --socket="$T/munge/munge.socket" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
  --seed-file="$T/munge/munged.seed" >"$T/log/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$T/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$T/munge/munge.socket" ] || fail "munged did not start: $(cat "$T/munge/munged.log" 2>/dev/null)"

HOST=$(hostname -s)
CPUS=$(nproc)
export SLURM_CONF=$T/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=dplabtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -c -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -f "$SLURM_CONF" >"$T/log/slurmd.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 60); do
  state=$(sinfo --noheader --format=%t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail "the node did not become idle in 30 s (sinfo: '${state:-no answer}')"
step "cluster up: $(sbatch --version), $(munged --version 2>&1 | head -n 1), node $HOST, $CPUS CPUs"

# --- 3. Sharded run vs local run --------------------------------------------------------------
# dr-two-diseases: many small instances; h14-rates: repetitions gathered over `rep`;
# dr-privacy-loss; with the dataset mirror, h14-table3.2 reads six datasets (and gathers over rep).
# ex-permute-and-flip: external programs (Python and awk), run with --allow-exec.
PIPELINES=(pipelines/dwork-roth/dr-two-diseases.yaml pipelines/huang2014/h14-rates.yaml
  pipelines/dwork-roth/dr-privacy-loss.yaml pipelines/examples/ex-permute-and-flip.yaml)
if [ -n "${DPLAB_DATA_MIRROR:-}" ]; then
  PIPELINES+=(pipelines/huang2014/h14-table3.2.yaml)
else
  echo "test-slurm: DPLAB_DATA_MIRROR is not set: no pipeline that reads datasets is run"
fi
W=$T/work
step "local reference: dplab run --jobs 2 (${#PIPELINES[@]} pipelines)"
"$DPLAB" run -q "${PIPELINES[@]}" --profile ci --jobs 2 --store "$W/local-store" --out "$W/local" --allow-exec

slurm() { # store out extra...: dplab slurm of the pipelines into store and out
  local store=$1 out=$2
  shift 2
  "$DPLAB" slurm "${PIPELINES[@]}" --profile ci --shards 4 --store "$store" --out "$out" \
    --wait --poll 0.5 --allow-exec "$@"
}
identical() { # results: the frames equal the local run's, value for value
  "$DPLAB" compare "$1" "$W/local" --rtol 0 --atol 0 >"$W/compare.txt" ||
    fail "$1 differs from the local run: $(head -n 20 "$W/compare.txt")"
  ok
  step "$(tail -n 1 "$W/compare.txt")"
}

step "dplab slurm --shards 4 --wait"
slurm "$W/store1" "$W/sharded" || fail "dplab slurm --wait exited with $? (0 expected)"
identical "$W/sharded"
logs1=$(ls -d "$W"/store1/slurm/*/logs)
[ "$(ls "$logs1" | grep -c '^shard-')" = 4 ] || fail "expected 4 shard logs in $logs1: $(ls "$logs1")"
grep -q 'shard 3/4: owns' "$logs1"/shard-*_3.out || fail "shard 3 did not run its share: $(cat "$logs1"/shard-*_3.out)"
ok

# --- 4. A cancelled shard, and the same command again ----------------------------------------
# One task at a time (--cpus-per-task = every CPU of the node), so that while the first runs the
# others are pending and one of them can be cancelled before it starts.
step "dplab slurm with shard 3 cancelled"
slurm "$W/store2" "$W/resumed" --cpus-per-task "$CPUS" >"$W/first.out" 2>&1 &
waiter=$!
cancelled=""
for _ in $(seq 600); do
  array=$(sed -n 's/^array //p' "$W"/store2/slurm/*/jobs 2>/dev/null || true)
  if [ -n "$array" ]; then
    if squeue --noheader --array --jobs="$array" --format='%i %T' | grep -q "^${array}_3 PENDING"; then
      scancel "${array}_3"
      cancelled=${array}_3
      break
    fi
  fi
  sleep 0.1
done
[ -n "$cancelled" ] || { kill "$waiter" 2>/dev/null; fail "never saw shard 3 pending to cancel it"; }
rc=0
wait "$waiter" || rc=$?
cat "$W/first.out"
[ $rc = 3 ] || fail "after cancelling $cancelled, dplab slurm --wait exited with $rc (3: a shard failed)"
ok
# A pending task that is cancelled leaves the queue without a record of its own.
grep -q "shard 3: left the queue without running" "$W/first.out" ||
  fail "the report does not name shard 3 as cancelled"
ok
[ ! -e "$W/resumed" ] || fail "the merge ran although a shard was cancelled"
ok
logs2=$(ls -d "$W"/store2/slurm/*/logs)
# A shard logs per pipeline: "shard I/N: owns X instances (Y already stored); computed C
# (S of them shared with other shards), loaded L from the store". Summed over its pipelines:
counts() { # log → "X Y C S"
  sed -n 's/.*owns \([0-9]*\) instances (\([0-9]*\) already stored); computed \([0-9]*\) (\([0-9]*\) of them shared.*/\1 \2 \3 \4/p' "$1" |
    awk '{x += $1; y += $2; c += $3; s += $4} END {print x + 0, y + 0, c + 0, s + 0}'
}
ran_before=0
shared_before=0
for log in "$logs2"/shard-*.out; do
  read -r _ _ c s <<<"$(counts "$log")"
  ran_before=$((ran_before + c))
  shared_before=$((shared_before + s))
done
step "cancelled $cancelled; shards 0-2 computed and stored $ran_before instances"

step "the same command again"
sleep 1 # a new STORE/slurm/<second>/ directory
slurm "$W/store2" "$W/resumed" --cpus-per-task "$CPUS" || fail "the resubmission exited with $? (0 expected)"
identical "$W/resumed"
logs3=$(ls -d "$W"/store2/slurm/* | tail -n 1)/logs
[ "$logs3" != "$logs2" ] || fail "the resubmission wrote no new directory"
for i in 0 1 2; do
  read -r owns stored computed _ <<<"$(counts "$(ls "$logs3"/shard-*_$i.out)")"
  [ "$owns" -gt 0 ] && [ "$owns" = "$stored" ] && [ "$computed" = 0 ] ||
    fail "shard $i, whose share was stored, ran again: owns $owns, $stored of them stored, computed $computed"
  ok
done
read -r owns stored again shared <<<"$(counts "$(ls "$logs3"/shard-*_3.out)")"
# Shard 3 never ran, so what of its share is stored was computed by the others, and only as
# instances their own units read too ("shared"): at most the shared ones they computed.
[ "$stored" -le "$shared_before" ] ||
  fail "shard 3 was cancelled before it started, yet $stored of its instances were stored (the others computed only $shared_before shared ones)"
[ "$owns" -gt 0 ] && [ "$again" = $((owns - stored + shared)) ] ||
  fail "shard 3 should compute the $((owns - stored)) of its $owns instances not stored and the $shared shared ones it lacked, computed $again"
ok
# The merges computed only what gathers: the same per stage as in the uninterrupted run.
for m in "$W"/sharded/*/manifest.json; do
  p=$(basename "$(dirname "$m")")
  a=$(grep -o '"instances_run": *[0-9]*' "$m" | tr -dc '0-9\n' | paste -sd,)
  b=$(grep -o '"instances_run": *[0-9]*' "$W/resumed/$p/manifest.json" | tr -dc '0-9\n' | paste -sd,)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$p: the merges ran different instances per stage ($a vs $b)"
  ok
done
step "resubmitted: shards 0-2 computed nothing, shard 3 computed its $owns instances (+$shared shared); the merges ran the same gathers"
