"""``attnprops plot``: the install hint without matplotlib, and the PNG with it."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from attnprops.ci import cli
from attnprops.ci import plot
from attnprops.ci.audit.compare import REFERENCE_DIR


def test_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # "import matplotlib" raises
    assert cli.main(["plot", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "needs matplotlib" in err and "'plot' extra" in err
    assert "pip install -e .[plot]" in err
    assert not (tmp_path / plot.FILENAME).exists()


def test_refuses_the_reference_folder(capsys):
    assert cli.main(["plot", "--out", str(REFERENCE_DIR)]) == 2
    assert "refusing to write into" in capsys.readouterr().err
    assert not (REFERENCE_DIR / plot.FILENAME).exists()


def test_panels_show_the_right_and_the_wrong_variants():
    items = plot.panels()
    titles = [p.title for p in items]
    assert len(items) == 6
    assert [p.wrong for p in items] == [False, False, False, True, False, True]
    assert "reversed mask" in titles[3] and "query_start=0" in titles[5]
    assert "0.872569" in items[3].note and "1.439015" in items[5].note
    assert "[-0.439015, -0.354843]" in items[4].note
    weights = items[2].data
    assert np.isnan(weights[0, 1]) and weights[2, 2] == pytest.approx(0.597953, abs=5e-7)
    assert np.isnan(items[5].data[0, 1:]).all() and items[5].data[0, 0] == 1.0


def test_writes_the_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert cli.main(["plot", "--out", str(tmp_path), "--dpi", "60"]) == 0
    path = tmp_path / plot.FILENAME
    assert f"wrote {path}" in capsys.readouterr().out
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
