"""attnprops' benchmarks: run them all with ``python -m attnprops.benchmarks`` (or ``attnprops bench``).

See :mod:`benchmarks.__main__` for the sections and options. Every figure is a time, a rate or
a ratio printed by this package; the tests never assert on time.
"""
