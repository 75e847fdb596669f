# Sourced by the study scripts. run_parallel N FUNCTION JOB...: `FUNCTION JOB` for every job, in the background, at
# most N at a time; returns when all are done (under `set -e`, the first failure stops the script).
run_parallel() {
  local parallel=$1 fn=$2 running=0 job
  shift 2
  for job in "$@"; do
    "$fn" "$job" &
    running=$((running + 1))
    if [ "$running" -ge "$parallel" ]; then
      wait -n
      running=$((running - 1))
    fi
  done
  wait
}
