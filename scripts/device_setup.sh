#!/usr/bin/env bash
# On a GPU machine with no network: installs the wheels of scripts/device_wheels.sh into /tmp/site and puts it and this
# checkout on the path, so that `python3 -m pytest` and `python3 -c "import cli; cli.main()" ...` run there.
# Usage (source it, so the exports stay): . scripts/device_setup.sh [DIR]   (default .whl)
dir=${1:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$dir"/*.whl \
  || { echo "error: installing the wheels of $dir failed" >&2; return 1 2>/dev/null || exit 1; }
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -c "import cli; cli.main()" "$@"\n' > /tmp/bin/hrm && chmod +x /tmp/bin/hrm
export PATH="/tmp/bin:$PATH"
python3 -c "import torch, pydantic, typer, transformers, hrm_reason; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)"
