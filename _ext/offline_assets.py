"""Sphinx extension: the built book serves its own MathJax, RequireJS and widget manager.

The browser libraries come from the npm registry at build time (``package.json`` and
``package-lock.json`` at the repository root, installed by ``python3 tasks.py setup`` with
``npm ci``) and are copied from ``node_modules/`` into ``_static/vendor/`` of the built book.
``_config.yml`` points ``mathjax_path`` and myst-nb's ``nb_ipywidgets_js`` at those copies; this
extension refuses a build whose configuration still loads any of them from the network, or whose
files are missing. It also:

- serves ``static/figures.css``: a figure is shown at its natural width (its text stays at
  least 9 px high), in its own sideways-scrolling box where the column is narrower;
- serves ``static/widgets-setup.js``, which tells RequireJS where the widget manager's files are
  and gives MathJax 3 the one MathJax 2 call the widget manager makes (``MathJax.Hub.Queue``);
- serves ``static/course.css``, the book's own stylesheet (loaded on every page after the
  theme's): formulas, code and tables that scroll instead of being clipped, no sideways scroll
  on a phone, the dark theme for widgets, readable captions (issue 18; see its comments);
- drops the second copy of inline scripts that Sphinx 7.4 writes twice when an extension adds
  them after the builder started (sphinx-thebe's ``const THEBE_JS_URL`` then fails to load with
  "Identifier 'THEBE_JS_URL' has already been declared").
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
VENDOR = "vendor"  # the folder under _static/ of the built book


@dataclass(frozen=True)
class Package:
    """An npm package and the parts of it the book serves, under ``_static/vendor/<folder>``."""

    name: str
    folder: str
    parts: tuple[str, ...]  # paths inside the package; folders are copied whole
    patterns: tuple[str, ...] = ()  # glob patterns inside the package (font files, ...)


PACKAGES = (
    # MathJax 3: the combined TeX component, plus what it loads on demand (fonts, TeX
    # extensions such as boldsymbol, the menu, the accessibility and speech modules).
    Package(
        "mathjax",
        "mathjax",
        (
            "LICENSE",
            "es5/tex-mml-chtml.js",
            "es5/input",
            "es5/output",
            "es5/ui",
            "es5/a11y",
            "es5/adaptors",
            "es5/sre",
        ),
    ),
    Package("requirejs", "requirejs", ("require.js",)),
    # The widget manager's bundle loads its fonts from its own folder.
    Package(
        "@jupyter-widgets/html-manager",
        "html-manager",
        ("dist/embed-amd.js",),
        ("dist/*.woff2", "dist/*.woff", "dist/*.ttf", "dist/*.eot", "dist/*.svg"),
    ),
)


def node_modules(app: Sphinx) -> Path:
    return Path(app.confdir) / "node_modules"


def served_path(package: Package, part: str) -> str:
    """Where a part of a package lands, relative to _static/."""
    inner = part.removeprefix("es5/").removeprefix("dist/")
    return f"{VENDOR}/{package.folder}/{inner}"


def files_to_copy(modules: Path) -> dict[str, Path]:
    """Every file the book serves from node_modules: {path under _static/: source file}."""
    missing = []
    files: dict[str, Path] = {}
    for package in PACKAGES:
        root = modules / package.name
        if not (root / "package.json").is_file():
            missing.append(package.name)
            continue
        files[f"{VENDOR}/{package.folder}/package.json"] = root / "package.json"
        for part in package.parts:
            source = root / part
            if source.is_dir():
                for path in sorted(source.rglob("*")):
                    if path.is_file():
                        inner = path.relative_to(root).as_posix()
                        files[served_path(package, inner)] = path
            elif source.is_file():
                files[served_path(package, part)] = source
            else:
                missing.append(f"{package.name}/{part}")
        for pattern in package.patterns:
            for path in sorted(root.glob(pattern)):
                files[served_path(package, path.relative_to(root).as_posix())] = path
    if missing:
        raise ExtensionError(
            f"the book serves MathJax and the widget manager itself, but {modules} lacks "
            f"{', '.join(missing)}: run `python3 tasks.py setup` (it runs `npm ci`)"
        )
    return files


def configured_assets(app: Sphinx) -> list[str]:
    """The script paths the configuration puts on pages: MathJax and the widget scripts."""
    return [app.config.mathjax_path, *app.config.nb_ipywidgets_js]


def check_configuration(app: Sphinx) -> None:
    """Fail the build if a configured script comes from the network or is not served."""
    if app.builder.format != "html":
        return
    files = files_to_copy(node_modules(app))
    own = {path.name for path in STATIC.iterdir()}
    for asset in configured_assets(app):
        if "://" in asset or asset.startswith("//"):
            raise ExtensionError(
                f"{asset} is loaded from the network: the book serves its own copy "
                f"(set the path under _static/, e.g. {VENDOR}/..., in _config.yml)"
            )
        if asset not in files and asset not in own:
            raise ExtensionError(
                f"{asset} is configured in _config.yml but the book does not serve it "
                f"(served: {', '.join(sorted(own))} and {VENDOR}/... from {node_modules(app)})"
            )
    app.config.html_static_path.append(str(STATIC))


def copy_vendored_files(app: Sphinx) -> None:
    """Copy the npm packages' files into _static/vendor/ of the built book.

    Done when the builder starts, so that the pages' script tags carry the files' checksums
    (``?v=...``, which makes browsers reload a library after an upgrade).
    """
    if app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    copied = 0
    for target, source in files_to_copy(node_modules(app)).items():
        destination = static / target
        stat = source.stat()
        if destination.exists():
            existing = destination.stat()
            if (existing.st_size, existing.st_mtime) == (stat.st_size, stat.st_mtime):
                continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
        copied += 1
    logger.info(f"offline_assets: {copied} files copied into {static / VENDOR}")


def drop_duplicate_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Keep one copy of each script tag (Sphinx 7.4 repeats late-added inline scripts)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    unique = []
    for script in scripts:
        attributes = getattr(script, "attributes", {})
        key = (
            getattr(script, "filename", str(script)) or "",
            getattr(script, "priority", None),
            json.dumps(attributes, sort_keys=True, default=str),
        )
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app: Sphinx) -> dict:
    app.add_css_file("course.css")
    app.connect("builder-inited", check_configuration)
    app.connect("builder-inited", copy_vendored_files)
    # After sphinx.ext.mathjax and myst-nb have added their page scripts.
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.add_css_file("figures.css")  # figures are never shrunk; on a phone they scroll sideways
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
