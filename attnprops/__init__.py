"""attnprops: an executable specification of transformer attention.

The one import name of everything this project installs. The repository keeps its folders at
the top (``oracle/``, ``impl/``, ``properties/``, ``mutants/``, ``ci/``, ``benchmarks/``,
``reference/``); ``pyproject.toml`` installs them as ``attnprops.oracle``, ``attnprops.impl``,
... (``[tool.setuptools.package-dir]``), so a user's own ``ci`` or ``impl`` package never meets
ours. Every module of the project imports the others by these names.

A vendored copy (``docs/use-in-your-codebase.md``, section 2) is this file with ``oracle/`` and
``properties/`` beside it, in a folder named ``attnprops``.
"""
