"""Under the derandomized profiles a property draws the same examples whatever its body says:
the plugin seeds it from its file and function name (properties.plugin._pin_seeds), where
Hypothesis would seed it from a digest of its source. Random profiles stay random."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from attnprops.properties.plugin import FAST_START

PROPERTY = """
from hypothesis import given, strategies as st

DRAWN = []


@given(st.integers(0, 10**9))
def test_draws(n):
    DRAWN.append(n){extra}


def test_zz_record():
    import json, os
    with open(os.environ["DRAWN_FILE"], "w") as f:
        json.dump(DRAWN, f)
"""


def _drawn(tmp_path, extra: str, profile: str) -> list[int]:
    folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "test_drawn.py").write_text(PROPERTY.format(extra=extra), encoding="utf-8")
    out = folder / "drawn.json"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
    env["DRAWN_FILE"] = str(out)
    argv = [sys.executable, "-m", "pytest", str(folder / "test_drawn.py"), "-q"]
    argv += ["-p", "no:cacheprovider", *FAST_START, "-o", "addopts="]
    argv += ["--attn-impl", "attnprops.impl", "--hypothesis-profile", profile]
    subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.read_text())


def test_a_derandomized_property_draws_the_same_whatever_its_body(tmp_path):
    plain = _drawn(tmp_path, "", "ci")
    edited = _drawn(tmp_path, "\n    assert n >= 0  # an edit of the body", "ci")
    assert len(plain) == 100 and plain == edited


def test_a_random_profile_stays_random(tmp_path):
    assert _drawn(tmp_path, "", "dev") != _drawn(tmp_path, "", "dev")
