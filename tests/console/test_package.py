"""The wheel carries the console's frontend: `pip install` users need no Node (issue 15).

Builds a wheel from a copy of the repository's tracked files, without the built bundle
(src/tidelog/console/static is not committed), so the package build itself must run
scripts/build-console (setup.py's build_py). The copy borrows console/web/node_modules from
this checkout (scripts/setup installed it) instead of downloading it again.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_the_built_frontend(tmp_path: Path) -> None:
    node_modules = ROOT / "console" / "web" / "node_modules"
    assert node_modules.is_dir(), "run scripts/setup first (it installs the frontend's packages)"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout.decode().split("\0")
    source = tmp_path / "src-copy"
    for name in filter(None, tracked):
        if not (ROOT / name).is_file():
            continue  # deleted in this working tree
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    assert not (source / "src/tidelog/console/static/index.html").exists()
    (source / "console/web/node_modules").symlink_to(node_modules)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-4000:]
    (wheel,) = (tmp_path / "dist").glob("tidelog-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tidelog/console/static/index.html" in names, names
    scripts = [n for n in names if n.startswith("tidelog/console/static/assets/")
               and n.endswith(".js")]
    assert scripts, [n for n in names if "console" in n]
    index = zipfile.ZipFile(wheel).read("tidelog/console/static/index.html").decode()
    assert all(Path(script).name in index for script in scripts[:1]), index
