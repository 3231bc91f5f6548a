"""``attnprops plot``: heatmaps of the source lab's 3-token example, right beside wrong.

One PNG (``--out DIR``, default ``results/``; file ``attention_heatmaps.png``) with six panels,
every cell annotated with its value, axes "query position" / "key position", one colorbar per
panel::

    scaled scores Q K^T / sqrt(4)          | causal mask (True = key <= query may be read)
    causal weights (right)                 | reversed-mask weights, key >= query (WRONG)
    decode of query 2, query_start=2       | same decode with query_start=0 (WRONG)
      (right; context in the title)        |   (context [1, 0] in the title)

The numbers come from :mod:`impl` (``attention_weights`` / ``attention`` with the stated
``is_causal``, ``attn_mask`` and ``query_start``) and the scores from
:func:`oracle.attention_scores` rounded to float64. The reversed mask is computed with impl and
an explicit bool mask ``key >= query`` (what ``mutants.reversed_mask`` does), so the figure does
not depend on the mutants package.

Needs matplotlib (the ``plot`` extra: ``pip install -e .[plot]``); it is imported only when the
command runs, with the headless Agg backend. Without it the command prints which extra to
install and exits with status 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

DEFAULT_OUT = "results"
FILENAME = "attention_heatmaps.png"
INSTALL_HINT = (
    "attnprops plot needs matplotlib, which comes with the 'plot' extra: "
    "pip install -e .[plot]   (or: pip install 'attnprops[plot]')"
)


def add_arguments(parser) -> None:
    """``--out DIR`` (default ``results``) and ``--dpi``."""
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"folder for {FILENAME} (default: results)",
    )
    parser.add_argument("--dpi", type=int, default=120, help="resolution (default 120)")


class Panel(NamedTuple):
    """One heatmap: ``title``, ``data`` (2-D float array, NaN = hidden), ``kind``
    (``"scores"``, ``"mask"`` or ``"weights"``), ``note`` (text under the panel), ``wrong``
    (bool: the panel shows a bug) and ``queries`` (absolute query positions of the rows;
    default every query of the lab's prefill)."""

    title: str
    data: np.ndarray
    kind: str
    note: str
    wrong: bool = False
    queries: tuple[int, ...] = (0, 1, 2)


def panels() -> list[Panel]:
    """The six panels (:class:`Panel`), in reading order."""
    from attnprops import impl
    from attnprops import oracle
    from attnprops.oracle.lab import KEY
    from attnprops.oracle.lab import QUERY
    from attnprops.oracle.lab import VALUE

    T = QUERY.shape[0]
    query_pos, key_pos = np.arange(T)[:, None], np.arange(T)[None, :]
    causal = key_pos <= query_pos  # (Tq, Tk)
    reversed_mask = key_pos >= query_pos
    scores = oracle.attention_scores(QUERY, KEY).value
    weights = impl.attention_weights(QUERY, KEY, is_causal=True)
    wrong_weights = impl.attention_weights(QUERY, KEY, attn_mask=reversed_mask)
    forbidden = float(wrong_weights[~causal].sum())
    q = QUERY[2:3]
    right = impl.attention_weights(q, KEY, is_causal=True, query_start=2)  # (1, 3)
    wrong = impl.attention_weights(q, KEY, is_causal=True, query_start=0)  # (1, 3)
    keys = np.arange(T)
    right = np.where(keys <= 2, right, np.nan)  # visible: key <= query_start + 0
    wrong = np.where(keys <= 0, wrong, np.nan)
    ctx_right = impl.attention(q, KEY, VALUE, is_causal=True, query_start=2)[0]
    ctx_wrong = impl.attention(q, KEY, VALUE, is_causal=True, query_start=0)[0]
    err = float(np.max(np.abs(ctx_wrong - ctx_right)))

    def fmt(v):
        """A vector with 6 decimals, as the lab prints it."""
        return "[" + ", ".join(f"{x:.6f}" for x in v) + "]"

    return [
        Panel("Scaled scores  Q·Kᵀ / √4", scores, "scores", "before masking: every key scored"),
        Panel(
            "Causal mask  (key ≤ query)",
            causal.astype(float),
            "mask",
            "1 = may be read, 0 = future key (hidden)",
        ),
        Panel(
            "RIGHT: causal weights",
            np.where(causal, weights, np.nan),
            "weights",
            "rows sum to 1; future keys get 0",
        ),
        Panel(
            "WRONG: reversed mask (key ≥ query)",
            np.where(reversed_mask, wrong_weights, np.nan),
            "weights",
            f"weight on forbidden future keys: {forbidden:.6f}",
            wrong=True,
        ),
        Panel(
            "RIGHT: decode query 2, query_start=2",
            right,
            "weights",
            f"sees keys 0..2; context {fmt(ctx_right)}",
            queries=(2,),
        ),
        Panel(
            "WRONG: decode query 2, query_start=0",
            wrong,
            "weights",
            f"sees key 0 only; context {fmt(ctx_wrong)}, max error {err:.6f}",
            wrong=True,
            queries=(2,),
        ),
    ]


def draw(path: Path, dpi: int = 120) -> Path:
    """Render :func:`panels` to ``path`` (PNG) with matplotlib's Agg backend; return ``path``.

    Raises ImportError when matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    items = panels()
    fig = plt.figure(figsize=(12.5, 13.5), dpi=dpi)
    grid = fig.add_gridspec(
        3,
        2,
        height_ratios=[3, 3, 1.25],
        hspace=0.62,
        wspace=0.36,
        left=0.07,
        right=0.93,
        top=0.90,
        bottom=0.08,
    )
    hidden_grey = "#d9d9d9"
    cmaps = {
        "scores": matplotlib.colormaps["coolwarm"],
        "mask": matplotlib.colors.ListedColormap([hidden_grey, "#2b8cbe"]),
        "weights": matplotlib.colormaps["viridis"],
    }
    score_lim = float(np.max(np.abs(items[0].data)))
    for n, item in enumerate(items):
        ax = fig.add_subplot(grid[n // 2, n % 2])
        data = np.ma.masked_invalid(item.data)
        cmap = cmaps[item.kind].with_extremes(bad=hidden_grey)
        if item.kind == "scores":
            vmin, vmax = -score_lim, score_lim
        else:
            vmin, vmax = 0.0, 1.0
        image = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        rows, cols = item.data.shape
        for i in range(rows):
            for j in range(cols):
                value = item.data[i, j]
                if np.isnan(value):
                    text, color = "hidden", "#555555"
                elif item.kind == "mask":
                    text = "1" if value else "0"
                    color = "white" if value > 0.5 else "#555555"
                else:
                    text = f"{value:.6f}" if item.kind == "weights" else f"{value:.3f}"
                    normed = (value - vmin) / (vmax - vmin)
                    if item.kind == "weights":
                        color = "black" if normed > 0.6 else "white"
                    else:
                        color = "white" if abs(normed - 0.5) > 0.3 else "black"
                ax.text(j, i, text, ha="center", va="center", color=color, fontsize=11)
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows), labels=[str(p) for p in item.queries])
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.set_title(
            item.title,
            fontsize=12,
            fontweight="bold",
            color="#b2182b" if item.wrong else "#1a5e20",
        )
        ax.annotate(
            item.note,
            xy=(0.5, 0),
            xycoords="axes fraction",
            xytext=(0, -36),
            textcoords="offset points",
            ha="center",
            va="top",
            fontsize=10,
            color="#b2182b" if item.wrong else "black",
        )
        bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03)
        if item.kind == "mask":
            bar.set_ticks([0.25, 0.75], labels=["0", "1"])
            bar.set_label("visible")
        else:
            bar.set_label("score" if item.kind == "scores" else "weight")
            if item.kind == "weights":
                bar.set_ticks(np.linspace(0, 1, 6) if rows > 1 else [0, 0.5, 1])
    fig.suptitle(
        "Causal attention on the source lab's 3-token example (Q, K: 3×4, V: 3×2)\n"
        "green titles: correct; red titles: a wrong variant beside its correct "
        "counterpart; grey cells: hidden keys",
        fontsize=14,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def run(args) -> int:
    """Write ``DIR/attention_heatmaps.png``; 1 with an install hint when matplotlib is
    missing, 2 when ``--out`` is the committed reference folder."""
    from attnprops.ci.audit.compare import REFERENCE_DIR
    from attnprops.ci.audit.compare import inside

    out = Path(args.out)
    if inside(out, REFERENCE_DIR):
        print(
            f"attnprops plot: refusing to write into {out}: it is the committed reference "
            "folder; use --out results (or another folder)",
            file=sys.stderr,
        )
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 1
    path = draw(out / FILENAME, dpi=args.dpi)
    print(f"wrote {path}")
    return 0
