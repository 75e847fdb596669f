#!/usr/bin/env bash
# The test suite on a GPU machine (after `. scripts/device_setup.sh`), spread over CPU workers, every result printed
# as it comes (so a run cut by the device's time limit still names what failed), then the failures' tracebacks.
# Usage: bash scripts/device_test.sh LOGDIR [pytest args...]   e.g. bash scripts/device_test.sh $OUT tests/test_cuda.py
set -uo pipefail
log=${1:?usage: device_test.sh LOGDIR [pytest args]}/pytest.log
shift
python3 -m pytest -v -n "${HRM_TEST_WORKERS:-12}" -p no:cacheprovider -p no:randomly --timeout 300 --tb=short \
  -W ignore::pytest.PytestWarning "$@" > "$log" 2>&1
rc=$?
grep -E "(PASSED|FAILED|ERROR|SKIPPED)" "$log" | grep -c PASSED | sed 's/^/passed: /'
grep -E "^\[gw[0-9]+\].*(FAILED|ERROR)" "$log" | sed 's/^\[gw[0-9]*\] *\[ *[0-9]*%\] *//'
grep -E "^E  " "$log" | sort | uniq -c | sort -rn | head -20
exit $rc
