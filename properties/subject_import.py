"""How a subject's module is found and imported (a module name, a ``.py`` file or a package
folder, :func:`import_subject_module`), how to install the optional library an adapter needs
(:func:`install_hint`), and the error of a subject that cannot be loaded
(:class:`SubjectError`). :func:`properties.subject.load_subject` reads the declaration."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["EXTRAS", "SubjectError", "import_subject_module", "install_hint", "is_file_name"]


class SubjectError(Exception):
    """The subject cannot be loaded or declares something invalid."""


# Optional libraries of the ready adapters and the pyproject extra that installs each.
EXTRAS = {
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jax",
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "transformers": "hf",
}
# What ``pip install`` takes for a missing library, where it is not the library's name (a
# vendored copy has no extras): jax brings its jaxlib; the Hugging Face subjects need
# transformers and torch.
_PACKAGES = {"jaxlib": "jax", "transformers": "transformers torch"}


def install_hint(library: str) -> str:
    """How to install an optional ``library`` (torch, jax, jaxlib, onnx, onnxruntime,
    transformers) wherever the suite is: a vendored copy has no extras, a clone and an
    installed attnprops have one."""
    extra = EXTRAS[library]
    packages = _PACKAGES.get(library, library)
    return (
        f"{library} is an optional dependency: install {packages} (pip install {packages}; "
        f"from an attnprops clone: pip install -e .[{extra}]; for an installed "
        f"attnprops: pip install 'attnprops[{extra}]')"
    )


def is_file_name(name: str) -> bool:
    """Whether a subject name is a file path (``./my_attention.py``), not a module name."""
    return name.endswith(".py") or "/" in name or os.sep in name


def import_subject_module(name: str) -> ModuleType:
    """The module ``name``: a dotted module name, a ``.py`` file (relative to the current
    folder), imported under its file's stem with its folder on ``sys.path`` (so it can import
    its neighbours), or a package's folder (``./my_pkg``, with an ``__init__.py``), imported
    as the package ``my_pkg`` from the folder above it."""
    if not is_file_name(name):
        return importlib.import_module(name)
    path = Path(name).expanduser().resolve()
    if path.is_dir():
        if not (path / "__init__.py").is_file():
            raise SubjectError(
                f"cannot import the attention subject {name!r}: {path} is a "
                f"folder without __init__.py; name a .py file or a package"
            )
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        return importlib.import_module(path.name)
    if not path.is_file():
        raise SubjectError(f"cannot import the attention subject {name!r}: no such file {path}")
    if path.suffix != ".py":
        raise SubjectError(
            f"cannot import the attention subject {name!r}: {path.name} is not a .py file; "
            f"name a Python file, a package folder or a module"
        )
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    existing = sys.modules.get(path.stem)
    if existing is not None and Path(getattr(existing, "__file__", "") or "").resolve() == path:
        return existing
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[path.stem]
        raise
    return module
