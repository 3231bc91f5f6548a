"""``python -m attnprops.properties.meta_tests.coverage_rates [RUNS]``: the per-run rates
behind test_strategy_coverage's margins.

Draws RUNS (default 100) independent Hypothesis runs of DRAWS_PER_RUN draws of
``attention_cases()`` (seeds 1000, 1001, ...: not the tests' seeds) and prints, for every
REQUIRED feature, the fraction of runs that never drew it (``p_f``), ``sum_f p_f ** RUNS``
for the tests' pooled run count, and the key-padding hits per run of the (Tq, Tk) layout.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter

from attnprops.properties.meta_tests.test_strategy_coverage import DRAWS_PER_RUN
from attnprops.properties.meta_tests.test_strategy_coverage import KEY_PADDING_SHAPED
from attnprops.properties.meta_tests.test_strategy_coverage import REQUIRED
from attnprops.properties.meta_tests.test_strategy_coverage import RUNS
from attnprops.properties.meta_tests.test_strategy_coverage import features
from attnprops.properties.meta_tests.test_strategy_coverage import pooled_draws
from attnprops.properties.strategies import attention_cases


def main(runs: int) -> None:
    missed: Counter = Counter()
    hits = []
    four_d = REQUIRED - {"2-D inputs"}  # drawn by attention_cases(two_d=True) only
    for k in range(runs):
        seen = set().union(
            *(features(c) for c in pooled_draws(attention_cases(), 1, first_seed=1000 + k))
        )
        missed.update(four_d - seen)
        cases = pooled_draws(
            attention_cases(two_d=False, mask_layouts=("(Tq, Tk)",)), 1, first_seed=1000 + k
        )
        hits.append(sum(KEY_PADDING_SHAPED in features(c) for c in cases))
    rates = {f: missed[f] / runs for f in four_d}
    for feature, rate in sorted(rates.items(), key=lambda kv: -kv[1]):
        if rate:
            print(f"{rate:5.2f}  {feature}")
    print(
        f"P(some feature missed by all {RUNS} pooled runs) <= "
        f"{sum(r**RUNS for r in rates.values()):.2g}"
    )
    print(
        f"key padding hits per run of {DRAWS_PER_RUN}: mean {statistics.mean(hits):.2f}, "
        f"sd {statistics.pstdev(hits):.2f}, runs with none {hits.count(0)} of {runs}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
