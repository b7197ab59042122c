#!/bin/sh
# Installs spe_emu as it was at commit 7ff7996 -- the tree issue 26 measured "today's sampled
# mode" on (its default then: model_feed=sampled) -- into a virtual environment, for
#   python scripts/bench.py --sampled-anchor DIR/venv/bin/python
# Usage: scripts/make-bench-anchor.sh [DIR] (default .bench-anchor, which git ignores).
# Needs this checkout's git history (a clone, not an archive) and pip's index for the
# commit's dependencies (unicorn 2.1.x and the rest of its pyproject.toml). Takes about a
# minute: the commit's C extension is compiled by its own setup.py.
set -eu
commit=7ff79968562b66157d6d29ad3d0d7e2dd390626e
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.bench-anchor}
mkdir -p "$dir" && dir=$(cd "$dir" && pwd)   # (absolute: the check below runs from /)
rm -rf "$dir/src" "$dir/venv"
mkdir -p "$dir/src"
git -C "$root" archive "$commit" | tar -x -C "$dir/src"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q "$dir/src"
(cd / && "$dir/venv/bin/python" -c "import spe_emu; print('anchor:', spe_emu.__file__)")
echo "then: python scripts/bench.py --sampled-anchor $dir/venv/bin/python"
