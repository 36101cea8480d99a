# Sourced by every test/check/*.test: each script is one area of the suite and prints TAP
# (one "ok" / "not ok" / "ok ... # SKIP reason" line per check, the plan at the end), which
# automake's TAP driver reads (`make check`, Makefile.am's TESTS). A script may also run
# alone: `test/check/aml.test` prints its TAP on the terminal.
#
# Each check's own output goes to build/test-results/logs/, named by the failing line; the
# fixtures around the whole suite (the test cluster, what /dev/shm held before) are set up by
# maint/test, which `make check` runs around the harness and which exports AMLAPI_FIXTURE.
set -uo pipefail
STEP_PREFIX=test
. "$(dirname "${BASH_SOURCE[0]}")/../../maint/lib.sh"

prefix=${AMLAPI_PREFIX:-$AMLAPI_BUILD/install}
res=${AMLAPI_RESULTS:-$AMLAPI_BUILD/test-results}
tests=$AMLAPI_BUILD/tests
full=${AMLAPI_CHECK_FULL:-no}
mkdir -p "$res/logs" "$tests"
export PATH=$prefix/bin:$PATH

# the test cluster (maint/testcluster) is up when maint/test brought it up; otherwise the
# multi-host checks are skipped with the reason it gave
if [ -n "${AMLAPI_FIXTURE:-}" ]; then
    cluster_why=${AMLAPI_CLUSTER_WHY:-}
else
    cluster_why="the test cluster is not up: run the suite through make check (maint/test)"
fi

tap_n=0 pass=0 fail=0 skipped=0
# a die ends the script as TAP says a broken one must: the driver counts it as an error
die() {
    echo "Bail out! $*"
    exit 1
}
# TAP reads "#" as the start of a directive: names carry none
tap_name() { local s="$1: $2"; echo "${s//#/no.}"; }

# record SUITE NAME RC SECONDS LOG: one check's result (LOG: where its output is, or -)
record() {
    local suite=$1 name=$2 rc=$3 secs=$4 log=$5
    tap_n=$((tap_n + 1))
    shm_attribute "$suite $name"
    [ "$secs" = - ] || printf '%s\t%s\n' "$secs" "$(tap_name "$suite" "$name")" >> "$res/times.txt"
    if [ "$rc" = 0 ]; then
        pass=$((pass + 1))
        echo "ok $tap_n - $(tap_name "$suite" "$name")"
    else
        fail=$((fail + 1))
        echo "not ok $tap_n - $(tap_name "$suite" "$name")"
        echo "# log: $log"
    fi
}

# record_skip SUITE NAME REASON: a check that did not run is counted as skipped, never passed
record_skip() {
    tap_n=$((tap_n + 1)) skipped=$((skipped + 1))
    echo "ok $tap_n - $(tap_name "$1" "$2") # SKIP ${3//#/no.}"
}

# run_timed LOG TIMEOUT CMD... : sets RC and SECS
run_timed() {
    local log=$1 to=$2; shift 2
    local t0=$SECONDS
    timeout -k 10 "$to" "$@" > "$log" 2>&1 < /dev/null
    RC=$?
    SECS=$((SECONDS - t0))
}

# which check left something in /dev/shm or System V shared memory: what appeared since the
# check before is written down with its name (test/check/leftovers.test fails on it)
shm_list() {
    ls /dev/shm 2>/dev/null | sed 's/^/\/dev\/shm\//'
    ipcs -m 2>/dev/null | awk '$2 ~ /^[0-9]+$/ { print "sysv shmid " $2 }'
}
shm_seen=$(shm_list | sort)
shm_attribute() {
    local now new
    now=$(shm_list | sort)
    new=$(comm -13 <(echo "$shm_seen") <(echo "$now") | tr '\n' ' ')
    [ -z "$new" ] || echo "after $1: $new" >> "$res/logs/shm-attribution.log"
    shm_seen=$now
}

# the plan comes last, once the script knows how many checks it made
trap 'echo "1..$tap_n"' EXIT

[ -x "$prefix/bin/mpiexec" ] || die "no MPICH install in $prefix: run maint/quickstart (or make) first"
