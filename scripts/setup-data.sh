#!/usr/bin/env bash
# Puts the demo's data set in build/data: the 1797 8x8 handwritten digits that scikit-learn's
# wheel bundles (sklearn/datasets/data/digits.csv.gz), taken from the wheel that pip downloads
# from PyPI (no install: the file is read out of the wheel, a zip archive). Runs once; later
# calls find the file and return.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/data/digits.csv.gz
[ -s "$out" ] && exit 0
mkdir -p build/data/wheel
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "setup-data: installing python3-pip"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pip >/dev/null
fi
echo "setup-data: downloading scikit-learn's wheel for its digits data set"
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest build/data/wheel scikit-learn
python3 - "$out" build/data/wheel/scikit_learn-*.whl <<'EOF'
import sys, zipfile
out, wheel = sys.argv[1], sys.argv[-1]
with zipfile.ZipFile(wheel) as z, open(out + ".tmp", "wb") as f:
    f.write(z.read("sklearn/datasets/data/digits.csv.gz"))
EOF
mv "$out.tmp" "$out"
rm -rf build/data/wheel
echo "setup-data: $out"
