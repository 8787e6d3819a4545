"""docs/: the generated pages are what the code generates now, and no page links outside the repository
or to a file that is not there. Regenerate with `make docs`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ladder.cli import docs

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "experiments" / "tiny_record.md"])


@pytest.mark.parametrize("name", sorted(docs.PAGES))
def test_generated_page_is_current(name):
    shipped = (REPO / "docs" / name).read_text()
    assert shipped == docs.PAGES[name](), f"docs/{name} is stale: run `make docs`"


def test_the_generated_pages_hold_every_spec_class_and_variable():
    from ladder.cli.options import ENVIRONMENT
    from ladder.spec.docs import spec_classes

    assert all(f"### {cls.__name__}\n" in docs.spec_page() for cls in spec_classes())
    assert all(f"`{name}`" in docs.environment_page() for name in ENVIRONMENT)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_inside_the_repository_and_resolve(page):
    text = page.read_text()
    # The design folder beside a development checkout is not in a user's clone: no page may point there.
    beside = os.path.relpath(REPO.parent / "shared", REPO)
    assert beside not in text
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.is_relative_to(REPO), f"{page.name} links outside the repository: {target}"
        assert path.exists(), f"{page.name} links to a missing file: {target}"


def test_the_readme_stays_short():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250
