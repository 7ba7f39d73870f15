"""The book builds with warnings as errors, from the stored outputs, and has what a reader needs.

The build goes to a temporary folder, so running the tests never touches _build/.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from conftest import ROOT, book_config, chapter_notebooks, toc_files

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def html(book_html) -> Path:
    return book_html


# The tests of a page run one after another (conftest.py at the root groups them by page):
# each page is parsed once for all of them, and they only read it.
@functools.lru_cache(maxsize=4)
def page(html: Path, name: str) -> BeautifulSoup:
    return BeautifulSoup((html / f"{name}.html").read_text(encoding="utf-8"), "html.parser")


def chapter_pages() -> list[str]:
    return [f"chapters/{path.stem}" for path in chapter_notebooks()]


def chapter_numbers() -> dict[str, int]:
    """The number Sphinx gives each chapter of a numbered part of _toc.yml, in reading order.

    With ``use_multitoc_numbering`` (sphinx-multitoc-numbering) the numbers run on from one
    numbered part to the next; without it every numbered part starts again at 1.
    """
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    running = book_config().get("html", {}).get("use_multitoc_numbering", False)
    numbers: dict[str, int] = {}
    count = 0
    for part in toc.get("parts", []):
        if not part.get("numbered"):
            continue
        if not running:
            count = 0
        for chapter in part.get("chapters", []):
            count += 1
            numbers[chapter["file"]] = count
    return numbers


def test_every_table_of_contents_entry_has_a_page(html):
    for entry in toc_files():
        assert (html / f"{entry}.html").exists(), entry


def test_title_page_says_what_the_course_is_and_how_to_use_it(html):
    text = page(html, "intro").get_text(" ")
    assert "Transformer" in text
    for step in ("Read", "Colab", "exercises"):
        assert step in text, f"the title page should mention {step!r}"


@pytest.mark.parametrize("name", chapter_pages())
def test_chapter_has_a_colab_button_for_its_own_notebook(html, name):
    repository = book_config()["repository"]
    owner_repo = repository["url"].removeprefix("https://github.com/")
    expected = (
        f"https://colab.research.google.com/github/{owner_repo}/blob/"
        f"{repository['branch']}/{name}.ipynb"
    )
    links = [a["href"] for a in page(html, name).find_all("a", href=True)]
    assert expected in links


@pytest.mark.parametrize("name", chapter_pages())
def test_chapter_offers_its_ipynb_for_download(html, name):
    links = [a["href"] for a in page(html, name).find_all("a", href=True)]
    download = f"../_sources/{name}.ipynb"
    assert download in links
    assert (html / "_sources" / f"{name}.ipynb").exists()


@pytest.mark.parametrize("name", chapter_pages())
def test_chapter_figures_are_numbered_and_described(html, name):
    figures = page(html, name).find_all("figure")
    assert figures, "a chapter draws at least one figure"
    for figure in figures:
        assert re.match(r"Figure \d+\.\d+", figure.find(class_="caption-number").get_text())
        assert figure.find("img")["alt"].strip()


def test_chapters_of_numbered_parts_are_numbered_in_reading_order():
    numbers = chapter_numbers()
    assert numbers, "_toc.yml has no numbered part"
    assert sorted(numbers.values()) == list(range(1, len(numbers) + 1))
    assert all(f"chapters/{path.stem}" in numbers for path in chapter_notebooks())


@pytest.mark.parametrize("name", chapter_pages())
def test_figures_carry_their_chapters_number_and_count_from_one(html, name):
    chapter = chapter_numbers()[name]
    soup = page(html, name)
    captions = [f.find(class_="caption-number").get_text().strip() for f in soup.find_all("figure")]
    expected = [f"Figure {chapter}.{index}" for index in range(1, len(captions) + 1)]
    assert [caption.rstrip(" .") for caption in captions] == expected
    references = [  # references to this page's own figures
        span.get_text()
        for span in soup.select("a.reference span.std-numref")
        if span.find_parent("a")["href"].startswith("#")
    ]
    assert references, "the text refers to its figures with {numref}"
    for text in references:
        assert re.fullmatch(rf"Figure {chapter}\.\d+", text), text


@pytest.mark.parametrize("name", chapter_pages())
def test_chapter_math_is_rendered_as_math_not_dollars(html, name):
    soup = page(html, name)
    assert soup.find_all(class_="math")
    for paragraph in soup.select("article p"):
        assert "$" not in paragraph.get_text(), paragraph.get_text()[:200]


@pytest.mark.parametrize("name", chapter_pages())
def test_chapter_embeds_the_stored_widget_state(html, name):
    scripts = page(html, name).find_all("script", type="application/vnd.jupyter.widget-state+json")
    assert len(scripts) == 1


def test_bibliography_holds_every_entry_of_references_bib(html):
    text = page(html, "references").get_text(" ")
    bib = (ROOT / "references.bib").read_text(encoding="utf-8")
    titles = re.findall(r"^\s*title\s*=\s*\{(.+)\},?\s*$", bib, flags=re.MULTILINE)
    assert len(titles) >= 10
    for title in titles:
        plain = re.sub(r"[{}]", "", title)
        assert plain.lower() in text.lower(), plain
    assert "Attention is all you need".lower() in text.lower()


@pytest.mark.parametrize("name", chapter_pages())
def test_chapter_citations_link_to_the_bibliography(html, name):
    links = [a["href"] for a in page(html, name).find_all("a", href=True)]
    assert any(link.startswith("../references.html#") for link in links)


def test_title_page_links_the_exercises_page(html):
    assert (html / "exercises.html").exists()
    prose = page(html, "intro").select("article p")
    links = [a["href"] for paragraph in prose for a in paragraph.find_all("a", href=True)]
    assert "exercises.html" in links, "the title page text should link the exercises page"


def test_exercises_page_documents_every_field_of_the_submission_schema(html):
    schema_path = ROOT / "course_lib" / "exercises" / "schemas" / "submission-1.schema.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    soup = page(html, "exercises")
    text = soup.get_text(" ")
    literals = {code.get_text() for code in soup.find_all("code")}
    assert "schema_version" in literals
    for name in schema["properties"]:
        assert name in literals, f"the exercises page does not document {name!r}"
        assert name in text
    for definition in ("exercise", "result"):
        for name in schema["$defs"][definition]["properties"]:
            assert name in literals, f"the exercises page does not document {name!r}"


def test_instructors_page_follows_the_exercises_page_and_documents_every_option(html):
    from course_lib.grading.cli import build_parsers

    files = toc_files()
    assert files.index("instructors") == files.index("exercises") + 1
    literals = [c.get_text() for c in page(html, "instructors").find_all(["code", "pre"])]
    for command, parser in build_parsers().items():
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert any(option in text for text in literals), (command, option)


@pytest.mark.parametrize("name", toc_files())
def test_page_loads_no_script_stylesheet_or_font_from_the_network(html, name):
    soup = page(html, name)
    sources = [tag.get("src") for tag in soup.find_all("script", src=True)]
    sources += [link.get("href") for link in soup.find_all("link", href=True)
                if {"stylesheet", "preload"} & set(link.get("rel", []))]  # fmt: skip
    remote = [source for source in sources if "://" in source or source.startswith("//")]
    assert not remote, f"{name} loads {remote}: the book must work offline"


@pytest.mark.parametrize(
    "path",
    ["vendor/mathjax/tex-mml-chtml.js", "vendor/mathjax/output/chtml/fonts/woff-v2",
     "vendor/requirejs/require.js", "vendor/html-manager/embed-amd.js", "widgets-setup.js"],
)  # fmt: skip
def test_book_serves_mathjax_and_the_widget_manager_itself(html, path):
    assert (html / "_static" / path).exists(), path


@pytest.mark.parametrize("name", toc_files())
def test_page_writes_each_inline_script_once(html, name):
    scripts = page(html, name).find_all("script", src=False, type=False)  # JavaScript only
    bodies = [script.string for script in scripts if script.string]
    assert len(bodies) == len(set(bodies)), "an inline script is repeated"
