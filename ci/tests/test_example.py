"""``attnprops example``: the inputs Q, K, V (with shapes) come before the results, and the
source lab is explained in the output, ``--help`` and the module doc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from attnprops.ci import cli
from attnprops.ci import example
from attnprops.oracle import lab

Q_TEXT = (
    "Q (query), shape (3, 4):\n"
    " [[ 1.0  0.5 -0.2  0.1]\n"
    " [-0.5  1.2  0.8 -0.4]\n"
    " [ 0.2 -0.1  1.5  0.9]]\n"
)
K_TEXT = (
    "K (key), shape (3, 4):\n"
    " [[ 0.8  0.4 -0.3  0.0]\n"
    " [-0.2  1.0  0.5 -0.1]\n"
    " [ 0.1 -0.2  1.1  0.7]]\n"
)
V_TEXT = "V (value), shape (3, 2):\n [[ 1.0  0.0]\n [ 0.0  1.0]\n [-1.0 -1.0]]\n"
WEIGHTS_TEXT = (
    "Attention weights:\n"
    " [[1.       0.       0.      ]\n"
    " [0.278885 0.721115 0.      ]\n"
    " [0.158938 0.243109 0.597953]]\n"
)
CONTEXT_TEXT = (
    "Context:\n [[ 1.        0.      ]\n [ 0.278885  0.721115]\n [-0.439015 -0.354843]]\n"
)
LAB_WORDS = (
    "The source lab is the Chinese-language teaching lab on transformer attention this "
    "project grew from"
)


def test_example_prints_the_inputs_with_shapes_before_the_results(capsys):
    assert cli.main(["example"]) == 0
    out = capsys.readouterr().out
    positions = [
        out.index(text)
        for text in (
            Q_TEXT,
            K_TEXT,
            V_TEXT,
            "Scaled scores:\n",
            "Masked scores:\n",
            WEIGHTS_TEXT,
            CONTEXT_TEXT,
        )
    ]
    assert positions == sorted(positions)
    assert "sqrt(4)" in out
    assert " [[ 0.53    -inf   -inf]\n" in out


def test_example_explains_the_source_lab_in_output_help_and_docstring(capsys):
    assert cli.main(["example"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the paragraph is wrapped
    assert LAB_WORDS in out and "regression values" in out
    assert out.index(LAB_WORDS) < out.index("Q (query)")
    with pytest.raises(SystemExit) as exc:
        cli.main(["example", "--help"])
    assert exc.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "print the source lab's 3-token causal example: its inputs Q, K, V" in help_text
    assert LAB_WORDS in help_text and "regression values" in help_text
    doc = " ".join(example.__doc__.split())
    assert "The *source lab* is the teaching lab this project grew from" in doc
    assert "Chinese-language" in doc and "regression values" in doc


def test_input_decimals():
    assert example.decimals(example.QUERY) == 1
    assert example.decimals(example.VALUE) == 1
    assert example.decimals(example.QUERY / 3) == 6


def test_example_arrays_are_the_labs_figures():
    """`attnprops example` computes the lab's scaled scores, masked scores, weights and
    context (seed 000 §3; :mod:`oracle.lab`)."""
    arrays = example.example_arrays()
    for name, printed in (
        ("Scaled scores", lab.SCALED_SCORES),
        ("Masked scores", lab.MASKED_SCORES),
        ("Attention weights", lab.WEIGHTS),
        ("Context", lab.CONTEXT),
    ):
        printed.assert_matches(arrays[name], what=name)
    # the printed 3-decimal scores are exact (one-decimal inputs, dot products halved)
    np.testing.assert_allclose(
        arrays["Scaled scores"], lab.SCALED_SCORES.array(), rtol=0, atol=1e-15
    )


def test_an_interrupted_command_says_so_and_exits_130(capsys, monkeypatch):
    """Ctrl-C during a command: one line on stderr and 130 (128 + SIGINT), no traceback."""
    import importlib

    module = importlib.import_module(cli.SUBCOMMANDS["example"][0])

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run", interrupted)
    assert cli.main(["example"]) == 130
    assert capsys.readouterr().err == "attnprops example: interrupted\n"


def test_an_interrupt_while_the_command_imports_says_so_and_exits_130(tmp_path):
    """Ctrl-C in the first second, while the subcommand's modules import: the same line and
    status, no traceback. (Measured before: a traceback, or NumPy's ``ImportError: numpy._core.
    umath failed to import`` and exit status 1, by when the signal came.) The subcommand's
    module here sends the signal as it imports, and then imports on (a second); a fresh
    interpreter, as the signal and handler are the process's."""
    (tmp_path / "slow_subcommand.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(5)\n"
        "def add_arguments(parser): pass\n"
        "def run(args): return 0\n",
        encoding="utf-8",
    )
    script = (
        "import sys; from attnprops.ci import cli\n"
        "cli.SUBCOMMANDS['slow'] = ('slow_subcommand', 'imports slowly')\n"
        "sys.exit(cli.main(['slow']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr, done.stdout) == (130, "attnprops slow: interrupted\n", "")
    assert time.monotonic() - start < 5  # ended at the signal, not after the import
