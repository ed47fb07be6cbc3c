"""Sphinx configuration for skcal's documentation (builds offline)."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import skcal

project = "skcal"
author = "The skcal developers"
copyright = "2026, The skcal developers"
version = release = skcal.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
autodoc_default_options = {
    "members": True,
    # show fit / predict_proba inherited from BaseCalibrator, not sklearn internals
    "inherited-members": "BaseEstimator,ClassifierMixin,_MetadataRequester",
}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]
html_theme = "alabaster"
# no intersphinx: the build must not touch the network

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
}


def _skip_metadata_routing(app, what, name, obj, skip, options):
    """Hide sklearn's generated metadata-routing and set_output methods."""
    if name in ("get_metadata_routing", "set_output") or (
        name.startswith("set_") and name.endswith("_request")
    ):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_routing)
