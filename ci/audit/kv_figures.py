"""The audit's section on the source lab's KV-cache sizes: its bytes per configuration and its
small float16 pair (:mod:`ci.audit.figures`)."""

from __future__ import annotations

import numpy as np

from attnprops.ci.audit.record import Audit
from attnprops.ci.kv_bytes import GIB
from attnprops.oracle import lab


def kv_bytes(audit: Audit) -> None:
    """§6: the KV-byte table, the 7e9-parameter weights, a real 480-byte fp16 pair."""
    from attnprops import impl
    from attnprops import oracle

    config = lab.KV_TABLE_CONFIG
    src = (
        "seed 000 §6: bytes = 2 * layers * batch * tokens * kv_heads * head_dim * bytes_per_element"
    )
    note = "the seed's table itself is not in the text; the expected bytes are its formula by hand"
    rows = []
    for label, heads, expected in lab.KV_TABLE:
        measured = oracle.kv_cache_bytes(num_kv_heads=heads, **config)
        audit.equal(
            f"kv_bytes.{label.lower()}.bytes",
            "kv_bytes",
            f"{label} ({heads} KV heads): KV cache bytes (oracle.kv_cache_bytes)",
            measured,
            expected,
            src,
            note,
        )
        audit.equal(
            f"kv_bytes.{label.lower()}.gib",
            "kv_bytes",
            f"{label}: the same in GiB (bytes / 2**30)",
            measured / GIB,
            expected / GIB,
            src,
        )
        rows.append((label, heads, measured))
    weights_bytes = lab.WEIGHTS_PARAMS * lab.WEIGHTS_BYTES_PER_PARAM
    audit.printed(
        "kv_bytes.weights_7e9_fp16_gib",
        "kv_bytes",
        "raw weights of exactly 7e9 two-byte parameters, GiB",
        weights_bytes / GIB,
        lab.WEIGHTS_GIB,
    )
    audit.equal(
        "kv_bytes.mha_below_weights",
        "kv_bytes",
        "the 10K-token MHA cache is smaller than those weights",
        bool(rows[0][2] < weights_bytes),
        True,
        "seed 000 §6 (并没有超过这些权重)",
    )
    cfg = lab.SMALL_PAIR
    cache = impl.KVCache(cfg["batch"], cfg["num_kv_heads"], cfg["head_dim"], dtype=np.float16)
    shape = (cfg["batch"], cfg["num_kv_heads"], cfg["tokens"], cfg["head_dim"])
    rng = np.random.default_rng(0)
    cache.append(
        rng.standard_normal(shape).astype(np.float16), rng.standard_normal(shape).astype(np.float16)
    )
    real = int(cache.keys.nbytes + cache.values.nbytes)
    audit.equal(
        "kv_bytes.small_fp16_pair.nbytes",
        "kv_bytes",
        f"a real float16 impl.KVCache holding keys and values of shape {shape}: "
        "keys.nbytes + values.nbytes",
        real,
        lab.SMALL_PAIR_BYTES,
        "seed 000 §6 (一对实际 NumPy fp16 小数组, 总计 480 字节)",
        "shapes chosen here (the seed gives only the total): 1 layer, batch 1, "
        "2 KV heads, 3 tokens, head_dim 20",
    )
    audit.equal(
        "kv_bytes.small_fp16_pair.formula",
        "kv_bytes",
        "kv_cache_bytes for the same configuration equals the arrays' nbytes",
        oracle.kv_cache_bytes(**cfg),
        real,
        src,
    )
    audit.array(
        "kv_bytes.csv",
        np.array([[heads, b, b / GIB] for _, heads, b in rows]),
        columns=None,
        header=["attention", "num_kv_heads", "bytes", "gib"],
        labels=[label for label, _, _ in rows],
    )
