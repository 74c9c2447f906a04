"""README's main-job command (scripts/dev demo runs scripts/demo.py) must keep working on the bundled data."""

from __future__ import annotations

import subprocess
import sys
from toolkit.places import ROOT


def test_demo_runs_every_step_on_the_bundled_data():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert out.count("looks good!") == 2  # the sample file and the exported archive both validate
    assert "ocean salinity\t" in out  # the prefix lookup found records
    assert "deleted_tag  doomed-tag" in out  # refs of the real icechunk fixture
    assert '"kind": "inline"' in out  # a chunk ref as of an instant, as JSON
    assert "new_array" in out  # the diff between a tag and main is not empty
