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
    "matplotlib.sphinxext.plot_directive",
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
# the scikit-learn family's theme; every asset ships in the wheel, so the
# build is offline (no intersphinx either)
html_theme = "pydata_sphinx_theme"
html_title = f"skcal {release}"
html_static_path = ["_static"]
html_css_files = ["skcal.css"]
html_theme_options = {
    "navbar_align": "left",
    "header_links_before_dropdown": 4,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# no left column on the one-page sections (it would be empty)
html_sidebars = {
    page: []
    for page in (
        "index",
        "user_guide",
        "choosing",
        "large_data",
        "guarantees",
        "performance",
        "papers",
        "whats_new",
    )
}
html_show_sourcelink = False

# figures drawn at build time by ``.. plot::`` (the landing page's diagram)
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
}


def _skip_metadata_routing(app, what, name, obj, skip, options):
    """Hide sklearn's generated metadata-routing and set_output methods.

    skcal's own ``set_output`` (calibrators' DataFrame output) is shown.
    """
    module = getattr(obj, "__module__", None) or ""
    ours = module.startswith("skcal")
    if name == "score" and module.startswith("sklearn."):
        return True  # sklearn's mixin docstring links sklearn's own labels
    if (
        name == "get_metadata_routing"
        or (name == "set_output" and not ours)
        or (name.startswith("set_") and name.endswith("_request"))
    ):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_routing)
