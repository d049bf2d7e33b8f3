#!/usr/bin/env bash
# The Python API tests (tests/python) against the installed package: `pip install .` (pyproject.toml,
# scikit-build-core) builds the extension and installs `minfer` into the project venv, then pytest runs there,
# outside the build tree. ctest runs this as the `python_api` test.
#   scripts/test-python-package.sh [pytest arguments...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MINFER_VENV:-$here/.venv}"
if [ ! -x "$venv/bin/pip" ]; then
  echo "test-python-package: no project venv at $venv (bash scripts/setup-venv.sh makes it)" >&2
  exit 1
fi
# The venv holds scikit-build-core (scripts/requirements.txt) and Debian's pybind11 is visible to CMake, so the
# build needs no download; the build folder (build/python-*) is kept, so a second install recompiles only changes.
# The compiler and flags of the release preset (scripts/test.sh), so that ccache (CMakeLists.txt) serves the objects
# the release build already compiled instead of compiling the engine a second time.
"$venv/bin/pip" install --no-build-isolation --no-deps --quiet --config-settings=cmake.define.MINFER_WERROR=ON \
  --config-settings=cmake.define.CMAKE_CXX_COMPILER="$(command -v c++)" "$here" >&2
unset PYTHONPATH
# From the repository root: `python -c` and `python -m` put the working directory first on sys.path, and ctest's
# (the build tree's python/ folder) holds an uninstalled minfer package.
cd "$here"
installed="$("$venv/bin/python" -c 'import minfer, os; print(os.path.dirname(minfer.__file__))')"
case "$installed" in
  "$venv"/*) echo "test-python-package: testing the package installed at $installed" >&2 ;;
  *) echo "test-python-package: 'import minfer' found $installed, not the venv's package" >&2; exit 1 ;;
esac
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/tests/python" "$@"
