#!/usr/bin/env bash
# A real engine nobody here wrote, for tests and the CPU sweep example: llama.cpp's Python server
# (llama-cpp-python[server]==0.3.36) in a venv, and a tiny random-weight GGUF with the
# DeepSeek-V4 tokenizer.
#
# PyPI has only the source of llama-cpp-python: its wheel is built once (about 8 CPU-minutes) into
# the cache and reused. Everything lives under $SWEEP_CACHE (default ~/.cache/sweep).
#
#   scripts/llama/setup.sh wheel   build the wheel only (CI starts this early, in the background)
#   scripts/llama/setup.sh         venv, wheel, server extras, GGUF; prints the variables to export
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.3.36
cache="${SWEEP_CACHE:-$HOME/.cache/sweep}"
venv="$cache/llama-venv"
wheels="$cache/wheels"
gguf="$cache/tiny-dsv4.gguf"
shared="${SWEEP_SHARED_DATA:-../shared/data}"
tokenizer="$shared/tokenizers/deepseek-v4/tokenizer.json"
mkdir -p "$cache" "$wheels"

have_wheel() { compgen -G "$wheels/llama_cpp_python-$VERSION-*.whl" >/dev/null; }

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip
fi

if ! have_wheel; then
  echo "building llama-cpp-python $VERSION (once; cached in $wheels)" >&2
  # The multimodal library is not needed to serve a text model; leaving it out saves a third of
  # the build.
  CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps -w "$wheels" "llama-cpp-python==$VERSION"
fi
[ "${1:-}" = wheel ] && exit 0

"$venv/bin/pip" install --quiet --disable-pip-version-check --find-links "$wheels" \
  "llama-cpp-python[server]==$VERSION" gguf numpy
if [ ! -f "$gguf" ] || [ "$gguf" -ot scripts/llama/make_tiny_gguf.py ]; then
  if [ ! -f "$tokenizer" ]; then
    echo "setup.sh: $tokenizer not found (set SWEEP_SHARED_DATA to the shared data folder)" >&2
    exit 1
  fi
  "$venv/bin/python" scripts/llama/make_tiny_gguf.py "$tokenizer" "$gguf" >&2
fi
echo "export SWEEP_LLAMA_PYTHON=$venv/bin/python"
echo "export SWEEP_LLAMA_GGUF=$gguf"
