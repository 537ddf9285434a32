#!/bin/sh
# The README's install: a venv over Debian's Python (--system-site-packages
# for NumPy) and an offline pip install of python/, then an import and a run
# outside the source tree.
# usage: venv_install.sh SOURCE_DIR WORK_DIR
set -eu
src=$1
work=$2
py=${RLX_PYTHON:-/usr/bin/python3}
rm -rf "$work"
mkdir -p "$work"
cp -r "$src/python" "$work/pkg"
rm -rf "$work/pkg/build" "$work/pkg"/*.egg-info "$work/pkg"/rlx/*.so "$work/pkg"/rlx/*.so.* "$work/pkg"/rlx/__pycache__
"$py" -m venv --system-site-packages "$work/venv"
RLX_INCLUDE_DIR="$src/include" "$work/venv/bin/pip" install -q --no-build-isolation --no-index "$work/pkg"
cd "$work"
"$work/venv/bin/python" -c "
import numpy as np, rlx
g = rlx.Graph(); x = g.input('x', 'float32', (2, 2)); g.output('y', g.relu(x))
(y,) = g.compile().run({'x': np.array([[-1, 2], [3, -4]], np.float32)})
assert y.tolist() == [[0, 2], [3, 0]], y
print('rlx', rlx.__version__, 'from', rlx.__file__)
"
