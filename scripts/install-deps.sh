#!/usr/bin/env bash
# Installs what RLX needs to build and test, from Debian's packages (as root).
set -euo pipefail
# compiler and build; oneDNN and OpenBLAS (f32/f64 GEMM and channels-last convs, opened at
# run time; oneDNN's header for the conv primitives); cmocka (unit
# tests); protobuf-c and onnx.proto (ONNX import); the ONNX backend test
# suite; NumPy and onnx for independent references; clang for libFuzzer;
# cJSON (safetensors headers, config.json, tokenizer.json); PCRE2 and
# utf8proc for the LLM tokenizers (pre-tokenizer regexes, NFC).
# Python headers, setuptools, venv and pytest for the Python package;
# PyTorch (CPU) for the training runs compared against it;
# clang-format for the style check (scripts/check_format.sh).
packages=(
  build-essential cmake pkg-config
  libopenblas0-pthread libopenblas-dev libdnnl2 libdnnl-dev
  libcmocka-dev
  protobuf-c-compiler libprotobuf-c-dev
  libonnx-dev
  libcjson-dev
  libonnx-testdata
  python3-numpy python3-onnx python3-torch
  python3-dev python3-setuptools python3-venv python3-pytest python3-pip
  clang clang-format
  libpcre2-dev libutf8proc-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
