"""``attnprops kv-bytes``: bytes, GiB, the formula, the MHA/GQA/MQA table and rejections."""

from __future__ import annotations

import pytest

from attnprops.ci import cli
from attnprops.ci import kv_bytes


def test_default_is_the_labs_mha_configuration(capsys):
    assert cli.main(["kv-bytes"]) == 0
    out = capsys.readouterr().out
    assert (
        "bytes = 2 * num_layers * batch * tokens * num_kv_heads * head_dim * bytes_per_element"
    ) in out
    assert "= 2 * 32 * 1 * 10000 * 32 * 128 * 2   (float16: 2 bytes per element)" in out
    assert "= 5,242,880,000 bytes" in out
    assert "= 4.8828 GiB" in out and "1 GiB = 2**30 bytes" in out


def test_comparison_table_with_num_heads(capsys):
    argv = [
        "kv-bytes",
        "--num-layers",
        "32",
        "--batch",
        "1",
        "--tokens",
        "10000",
        "--num-kv-heads",
        "8",
        "--head-dim",
        "128",
        "--dtype",
        "float16",
        "--num-heads",
        "32",
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "= 1,310,720,000 bytes" in out and "= 1.2207 GiB" in out
    table = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.strip().startswith(("MHA", "GQA", "MQA"))
    }
    assert table["MHA"][1:4] == ["32", "5,242,880,000", "4.8828"]
    assert table["GQA"][1:4] == ["8", "1,310,720,000", "1.2207"]
    assert table["MQA"][1:4] == ["1", "163,840,000", "0.1526"]
    assert table["GQA"][4] == "0.25" and table["MQA"][4] == "0.03125"


def test_small_pair_and_other_dtypes(capsys):
    assert (
        cli.main(
            [
                "kv-bytes",
                "--num-layers",
                "1",
                "--tokens",
                "3",
                "--num-kv-heads",
                "2",
                "--head-dim",
                "20",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "= 480 bytes" in out and "4.47e-07 GiB = 480 bytes" in out
    assert cli.main(["kv-bytes", "--dtype", "bf16", "--tokens", "1000"]) == 0
    assert "(bfloat16: 2 bytes per element)" in capsys.readouterr().out
    assert cli.main(["kv-bytes", "--dtype", "int8"]) == 0
    assert "= 2,621,440,000 bytes" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tokens", "0"], "argument --tokens: 0 must be >= 1"),
        (["--batch", "-3"], "argument --batch: -3 must be >= 1"),
        (["--head-dim", "12.5"], "argument --head-dim: '12.5' is not an integer"),
        (["--num-layers", "abc"], "argument --num-layers: 'abc' is not an integer"),
        (["--tokens", "\u0661\u0662"], "argument --tokens: '\u0661\u0662' is not an integer"),
        (["--dtype", "float12"], "argument --dtype: unknown dtype 'float12'; use one of bfloat16"),
        (
            ["--num-heads", "32", "--num-kv-heads", "5"],
            "--num-kv-heads 5 must divide --num-heads 32",
        ),
        (["--num-heads", "8", "--num-kv-heads", "16"], "--num-kv-heads 16 exceeds --num-heads 8"),
    ],
)
def test_rejections_exit_2_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["kv-bytes", *argv])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "attnprops kv-bytes: error:" in captured.err
    assert "bytes =" not in captured.out


def test_human_units():
    assert kv_bytes.human(5_242_880_000) == "4.8828 GiB"
    assert kv_bytes.human(3 * 2**20) == "0.0029 GiB = 3.00 MiB"
    assert kv_bytes.human(480) == "4.47e-07 GiB = 480 bytes"


def test_gib_is_exact_at_any_size():
    """No digits a float quotient would invent (past 2**53 bytes) and no overflow."""
    assert kv_bytes.gib(5 * 10**30 * 2**30 + 2**30 // 3) == "5" + "0" * 30 + ".3333"
    assert kv_bytes.gib(10**400 * 2**30) == "1" + "0" * 400 + ".0000"
    assert kv_bytes.gib(2**30 // 2 * 3) == "1.5000" and kv_bytes.gib(2**30 - 1) == "1.0000"


def test_one_byte_is_singular_and_sizes_near_a_unit_move_up(capsys):
    """int8 has 1 byte per element: "1 byte", never "1 bytes"; the human size never reads
    "1024.00 KiB" or "1024.00 MiB" (it moves to the next unit)."""
    assert (
        cli.main(
            [
                "kv-bytes",
                "--dtype",
                "int8",
                "--num-layers",
                "1",
                "--tokens",
                "1",
                "--num-kv-heads",
                "1",
                "--head-dim",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "= 2 * 1 * 1 * 1 * 1 * 1 * 1   (int8: 1 byte per element)" in out
    assert "        = 2 bytes\n" in out and "1.863e-09 GiB = 2 bytes" in out
    assert "1 bytes" not in out
    assert kv_bytes.human(1) == "9.313e-10 GiB = 1 byte"
    assert kv_bytes.human(1023) == "9.527e-07 GiB = 1,023 bytes"
    assert kv_bytes.human(1024) == "9.537e-07 GiB = 1.00 KiB"
    assert kv_bytes.human(2**20 - 1) == "0.0009766 GiB = 1.00 MiB"
    assert kv_bytes.human(2**20) == "0.0009766 GiB = 1.00 MiB"
    assert kv_bytes.human(2**30 - 2**20) == "0.9990 GiB = 1023.00 MiB"
    assert kv_bytes.human(2**30 - 1) == "1.0000 GiB"
    assert kv_bytes.plural(1) == "1 byte" and kv_bytes.plural(2) == "2 bytes"


def test_dtype_aliases_are_documented_in_help_and_accepted(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["kv-bytes", "--help"])
    assert exc.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert (
        "(aliases: fp16/half = float16; bf16 = bfloat16; fp32 = float32; fp64/double = float64)"
    ) in help_text
    accepted = (
        ("fp16", "float16", 2),
        ("FP16", "float16", 2),
        ("half", "float16", 2),
        ("bf16", "bfloat16", 2),
        ("fp32", "float32", 4),
        ("fp64", "float64", 8),
        ("double", "float64", 8),
    )
    assert set(kv_bytes.DTYPE_ALIASES) == {alias.lower() for alias, _, _ in accepted}
    for alias, name, itemsize in accepted:
        assert cli.main(["kv-bytes", "--dtype", alias]) == 0
        out = capsys.readouterr().out
        assert f"({name}: {itemsize} bytes per element)" in out
        assert f"= {2 * 32 * 10000 * 32 * 128 * itemsize:,} bytes" in out


@pytest.mark.parametrize("dtype", ["float", "fp8", "torch.float16"])
def test_undocumented_dtype_spellings_are_one_line_errors_naming_the_accepted(dtype, capsys):
    """``float`` is float32 in torch but float64 in NumPy: rejected, not guessed."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["kv-bytes", "--dtype", dtype])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    line = [ln for ln in err.splitlines() if "error:" in ln]
    assert line == [
        f"attnprops kv-bytes: error: argument --dtype: unknown dtype {dtype!r}; use "
        "one of bfloat16, float16, float32, float64, float8_e4m3fn, float8_e5m2, "
        "int8 (aliases: fp16/half = float16; bf16 = bfloat16; fp32 = float32; "
        "fp64/double = float64)"
    ]


def _rows(out: str) -> dict[str, list[str]]:
    return {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.strip().startswith(("MHA", "GQA", "MQA"))
    }


def test_page_size_prints_allocated_next_to_used(capsys):
    # 2 sequences of 5 positions in pages of 4: 8 positions allocated each
    argv = ["kv-bytes", "--num-layers", "1", "--batch", "2", "--tokens", "5"]
    argv += ["--num-kv-heads", "1", "--head-dim", "2", "--dtype", "float16", "--page-size", "4"]
    assert cli.main(argv + ["--num-heads", "2"]) == 0
    out = capsys.readouterr().out
    assert "        = 80 bytes" in out  # 2 * 1 * 2 * 5 * 1 * 2 * 2
    assert "allocated = the same with tokens rounded up to 8 positions" in out
    assert "= 128 bytes" in out and "unused    = 48 bytes in partly filled last pages" in out
    table = _rows(out)
    assert table["MHA"][1:4] == ["2", "160", "256"] and table["MQA"][1:4] == ["1", "80", "128"]


def test_seqlens_give_used_and_allocated_per_sequence(capsys):
    argv = ["kv-bytes", "--num-layers", "1", "--num-kv-heads", "1", "--head-dim", "2"]
    argv += ["--dtype", "float32", "--seqlens", "5,0,8", "--page-size", "4"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    per_position = 2 * 1 * 1 * 2 * 4  # K and V, one layer, one head, D = 2, float32
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.strip()[:1].isdigit() and len(line.split()) == 5
    }
    assert rows["0"] == ["0", "5", f"{5 * per_position}", "2", f"{8 * per_position}"]
    assert rows["1"] == ["1", "0", "0", "0", "0"]
    assert rows["2"] == ["2", "8", f"{8 * per_position}", "2", f"{8 * per_position}"]
    assert f"used total      = {13 * per_position} bytes" in out
    assert f"allocated total = {16 * per_position} bytes" in out
    assert "= 2 * 1 * (5+0+8) * 1 * 2 * 4" in out


def test_rolling_capacity_is_a_fixed_size(capsys):
    argv = ["kv-bytes", "--num-layers", "2", "--batch", "1", "--tokens", "100000"]
    argv += ["--num-kv-heads", "8", "--head-dim", "128", "--dtype", "bf16"]
    assert cli.main(argv + ["--rolling-capacity", "4096", "--num-heads", "32"]) == 0
    out = capsys.readouterr().out
    fixed = 2 * 2 * 4096 * 8 * 128 * 2
    assert "Rolling cache of 4096 positions (holds min(tokens, W) = 4096):" in out
    assert f"bytes     = {fixed:,} bytes" in out
    table = _rows(out)
    assert table["GQA"][3] == f"{fixed:,}" and table["MHA"][3] == f"{4 * fixed:,}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--page-size", "0"], "--page-size"),
        (["--seqlens", "3,-1"], "--seqlens"),
        (["--seqlens", "3,,4"], "--seqlens"),
        (["--rolling-capacity", "x"], "--rolling-capacity"),
    ],
)
def test_layout_options_reject_bad_sizes(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["kv-bytes", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()[-1]) < 200


def test_help_documents_the_layout_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["kv-bytes", "--help"])
    out = capsys.readouterr().out
    for flag in ("--page-size S", "--seqlens L1,L2,...", "--rolling-capacity W"):
        assert flag in out
