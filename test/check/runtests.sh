# Sourced by mpi.test and mpi-hosts.test: our MPI programs through MPICH's own runtests (the
# one MPICH's test/mpi suite uses, from the MPICH tree the build grafted into). A testlist
# line is runtests': "PROGRAM NPROCS [env=VAR=VALUE ...] [timeLimit=S]"; a program passes when
# mpiexec exits 0 and all it printed is " No Errors" (MPICH's MTest convention; our programs
# print more with MPITEST_VERBOSE=1).
#   run_testlist LIST MPIEXEC SUFFIX: each line of LIST as one check, named
#   "PROGRAM -n NPROCS [VAR=VALUE ...]SUFFIX"
run_testlist() {
    local list=$1 mpx=$2 suffix=$3 src suite tag raw log want line i=0 n
    src=$(cat "$AMLAPI_BUILD/mpich-src" 2>/dev/null) || die "no MPICH tree recorded; run make first"
    suite=$src/test/mpi
    [ -x "$suite/runtests" ] || die "no $suite/runtests: MPICH's test suite is not configured"
    tag=$(basename "$list")
    raw=$res/logs/runtests-$tag.tap
    log=$res/logs/runtests-$tag.log
    want=$res/logs/runtests-$tag.want
    # the names of the checks, in the list's order; runtests reports in that order
    awk '!/^#/ && NF { s = $1 " -n " $2
                      for (i = 3; i <= NF; i++) { v = $i; sub(/^env=/, "", v); s = s " " v }
                      print s }' "$list" > "$want"
    n=$(wc -l < "$want")
    rm -f "$raw"
    # runtests runs "make PROGRAM" in its directory before each run: the programs are built
    # (mpi-build.test) and make finds them up to date; its default limit is 180 s a test
    ( cd "$tests" && MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-300} "$suite/runtests" -srcdir=. \
          -tests="$list" -mpiexec="$mpx" -maxnp=64 -tapfile="$raw" ) > "$log" 2>&1 < /dev/null
    while IFS= read -r line; do
        i=$((i + 1))
        name=$(sed -n "${i}p" "$want")
        [ -n "$name" ] || { record mpi "runtests reported more results than $tag has lines" 1 - "$raw"; break; }
        secs=$(echo "$line" | sed -nE 's/.*# time=([0-9.]+).*/\1/p')
        secs=$(printf '%.0f' "${secs:-0}")
        case $line in
            "not ok "*) record mpi "$name$suffix" 1 "$secs" "$raw" ;;
            *" # SKIP "*) record_skip mpi "$name$suffix" "runtests: ${line##*# SKIP }" ;;
            *) record mpi "$name$suffix" 0 "$secs" "$raw" ;;
        esac
    done < <(grep -E '^(not )?ok ' "$raw" 2>/dev/null)
    # a line handed to runtests without a result (runtests crashed or wrote no TAP) failed
    while [ "$i" -lt "$n" ]; do
        i=$((i + 1))
        record mpi "$(sed -n "${i}p" "$want")$suffix: no result from runtests" 1 - "$log"
    done
}
