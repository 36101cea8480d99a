# Shared helpers for the maint/ scripts (sourced, not run).
# Every step prints one line: what it does and how long it took; a failure names the step and
# its log, and stops the script.

AMLAPI_TOP=${AMLAPI_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
AMLAPI_BUILD=${AMLAPI_BUILD:-$AMLAPI_TOP/build}
AMLAPI_CACHE=${AMLAPI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/amlapi}
AMLAPI_LOGS=$AMLAPI_BUILD/logs
MPICH_VERSION=4.0.2
MPICH_DEB_VERSION=4.0.2-3
MPICH_TARBALL=mpich_${MPICH_VERSION}.orig.tar.xz
MPICH_SHA256=$(awk '{print $1}' "$AMLAPI_TOP/maint/mpich.sha256")

# ccache keyed on content, not on where the clone lives, so a fresh clone reuses the cache.
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ccache}
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-12G}

mkdir -p "$AMLAPI_LOGS"

# step NAME LOGNAME CMD...: run CMD with output in $AMLAPI_LOGS/LOGNAME.log
step() {
    local name=$1 log=$AMLAPI_LOGS/$2.log; shift 2
    local t0=$SECONDS
    if "$@" > "$log" 2>&1; then
        printf '[%s] %-10s ok   (%ds)\n' "${STEP_PREFIX:-amlapi}" "$name" $((SECONDS - t0))
    else
        local rc=$?
        printf '[%s] %-10s FAILED (exit %d after %ds); log: %s\n' "${STEP_PREFIX:-amlapi}" \
            "$name" "$rc" $((SECONDS - t0)) "$log" >&2
        tail -n 25 "$log" | sed 's/^/    | /' >&2
        exit 1
    fi
}

skip() {
    printf '[%s] %-10s skip (%s)\n' "${STEP_PREFIX:-amlapi}" "$1" "$2"
}

die() {
    echo "[${STEP_PREFIX:-amlapi}] error: $*" >&2
    exit 1
}

hash_of() { sha256sum | awk '{print $1}'; }
