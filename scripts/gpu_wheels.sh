#!/usr/bin/env bash
# The wheels a lent GPU machine lacks, downloaded here into .whl/ (.gitignore) for `make bench-gpu` there.
#
# That machine's image has Python 3.12, torch 2.11, transformers 5.17, jaxtyping, pytest, numpy, pandas, pyarrow,
# safetensors, matplotlib, ... but not transformer-lens, nnsight or circuitsvis (and its transformers predates the
# module layout the adapters read, 5.18; 5.23 needs nothing newer than that image has), and it reaches no package
# registry: what it lacks travels as wheels (carry: [".whl"]) and is installed there with
#     python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
#     export PYTHONPATH=/tmp/site:$PWD
# The list below is what `import binding_lens.hooks`, the sweep, `import nnsight`, `import circuitsvis` and the
# test suite's jaxtyping hook (beartype) import beyond that image, at the versions of constraints.txt; one
# version of each (two would stop the install). Pure-Python wheels are the same for every Python; the others
# are fetched for CPython 3.12 on x86_64 manylinux.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.whl
WHEELS=(
    transformers==5.23.0
    transformer-lens==4.3.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 fancy-einsum==0.0.3 typeguard==4.6.1
    beartype==0.23.1
    circuitsvis==1.43.3 importlib-metadata==10.2.0 lazy-importer==0.1.0
    nnsight==0.8.1 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
    greenlet==3.5.6 websocket-client==1.9.2 zstandard==0.25.0
)
mkdir -p "$DEST"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_34_x86_64 \
    -d "$DEST" "${WHEELS[@]}"
echo "gpu_wheels: $(ls "$DEST"/*.whl | wc -l) wheels, $(du -sh "$DEST" | cut -f1) in $DEST (carry: [\"$DEST\"])"
