"""A deterministic synthetic crawl: pages with clusters of identical contents, a skewed link
graph with anchor texts, and re-crawls that change contents and links, delete pages and add
new ones.

Everything is drawn from one ``random.Random(seed)``, so a seed and the same sequence of calls
give the same pages. URLs come from a fixed universe larger than the crawl: the URLs not (yet)
crawled are still link targets, and a re-crawl may crawl them (a target becomes a page, possibly
a duplicate whose canonical URL is another page).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field, replace

ANCHOR_WORDS: tuple[str, ...] = (
    "home", "news", "about", "contact", "blog", "archive", "search", "help", "docs", "faq",
    "products", "pricing", "login", "download", "community", "events", "careers", "press",
    "privacy", "terms", "support", "guide", "tutorial", "reference", "more", "here", "next",
    "previous", "index", "main",
)  # fmt: skip

ANCHOR_PHRASES = 300

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "di", "fe", "go")


@dataclass(frozen=True)
class CrawlConfig:
    """The shape of a synthetic crawl."""

    pages: int = 1000
    """Pages in the initial crawl."""
    seed: int = 0
    duplicate_fraction: float = 0.1
    """Fraction of pages whose content is a copy of another page's (the clusters' members)."""
    links_per_page: tuple[int, int] = (4, 12)
    """Inclusive range of the number of links of a page."""
    link_skew: float = 0.6
    """Zipf exponent of link-target popularity: 0 is uniform; at 1 the most popular URL gets
    about a tenth of all links."""
    uncrawled_fraction: float = 0.2
    """URLs that are link targets but not crawled, relative to the number of pages."""
    repeated_link_fraction: float = 0.05
    """Chance that a page links twice to one target (with another anchor)."""
    words_per_page: tuple[int, int] = (20, 60)
    vocabulary: int = 2000


@dataclass(frozen=True)
class Page:
    """One crawled page."""

    url: str
    content: str
    links: tuple[tuple[str, str], ...]
    """(target URL, anchor text) in page order; one target may appear more than once."""

    def links_json(self) -> list[dict[str, str]]:
        """The ``links`` column: a jsonb list of ``{"url", "anchor"}`` objects."""
        return [{"url": u, "anchor": a} for u, a in self.links]


@dataclass(frozen=True)
class Recrawl:
    """What one re-crawl changed: pages to write (changed or new) and URLs to delete."""

    upserts: tuple[Page, ...]
    deletes: tuple[str, ...]
    added: int
    """How many of ``upserts`` are new pages."""


@dataclass
class Crawl:
    """The evolving crawl: :attr:`pages` is the current state after each :meth:`recrawl`."""

    config: CrawlConfig
    pages: dict[str, Page] = field(init=False)
    _rng: random.Random = field(init=False, repr=False)
    _universe: list[str] = field(init=False, repr=False)
    _by_rank: list[str] = field(init=False, repr=False)
    _cum_weights: list[float] = field(init=False, repr=False)
    _vocabulary: list[str] = field(init=False, repr=False)
    _phrases: list[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        c = self.config
        rng = self._rng = random.Random(c.seed)
        size = max(1, math.ceil(c.pages * (1 + c.uncrawled_fraction)))
        # Sparse ids so that URLs added later sort between existing ones.
        ids = rng.sample(range(size * 10), size)
        self._universe = [_url(i) for i in ids]
        self._by_rank = self._universe[:]
        rng.shuffle(self._by_rank)  # popularity independent of URL order
        weights = [1 / (rank**c.link_skew) for rank in range(1, size + 1)]
        self._cum_weights = list(itertools.accumulate(weights))
        self._vocabulary = _make_vocabulary(rng, c.vocabulary)
        # Anchor texts: a few hundred phrases of one to three words of a small vocabulary.
        self._phrases = sorted(
            {" ".join(rng.sample(ANCHOR_WORDS, rng.randint(1, 3))) for _ in range(ANCHOR_PHRASES)}
        )
        self.pages = {}
        crawled = self._universe[: c.pages]
        n_dups = round(c.pages * c.duplicate_fraction)
        originals = crawled[: len(crawled) - n_dups]
        for url in originals:
            self.pages[url] = Page(url, self._content(), self._links())
        # Clusters of about three pages on average: each copy picks one of a few sources.
        sources = originals[: max(1, n_dups // 2)] if originals else []
        for url in crawled[len(originals) :]:
            content = self.pages[rng.choice(sources)].content if sources else self._content()
            self.pages[url] = Page(url, content, self._links())

    # -- re-crawls -------------------------------------------------------------------------

    def recrawl(self, fraction: float) -> Recrawl:
        """Re-crawl ``fraction`` of the pages (changing contents and links, deleting some) and
        crawl new pages (about half as many), updating :attr:`pages`."""
        rng = self._rng
        current = sorted(self.pages)
        n = min(len(current), round(len(current) * fraction))
        upserts: dict[str, Page] = {}
        deletes: list[str] = []
        for url in rng.sample(current, n):
            page = self.pages[url]
            roll = rng.random()
            if roll < 0.15:
                deletes.append(url)
                continue
            if roll < 0.35:
                page = replace(page, content=self.pages[rng.choice(current)].content)
            elif roll < 0.55:
                page = replace(page, content=self._content())
            elif roll < 0.85:
                page = replace(page, links=self._edit_links(page.links))
            else:
                page = replace(page, content=self._content(), links=self._links())
            upserts[url] = page
        added = self._new_pages(max(1, n // 2) if n else 0, current, set(deletes))
        for url in deletes:
            del self.pages[url]
        for page in (*upserts.values(), *added):
            self.pages[page.url] = page
        return Recrawl(tuple(upserts.values()) + tuple(added), tuple(deletes), len(added))

    def _new_pages(self, n: int, current: list[str], deleted: set[str]) -> list[Page]:
        rng = self._rng
        candidates = [u for u in self._universe if u not in self.pages and u not in deleted]
        added = []
        for url in rng.sample(candidates, min(n, len(candidates))):
            if current and rng.random() < 0.3:
                content = self.pages[rng.choice(current)].content  # a new duplicate
            else:
                content = self._content()
            added.append(Page(url, content, self._links()))
        return added

    def _edit_links(self, links: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """Drop some links, change one anchor, add a few."""
        rng = self._rng
        kept = [link for link in links if rng.random() >= 0.3]
        if kept and rng.random() < 0.5:
            i = rng.randrange(len(kept))
            kept[i] = (kept[i][0], self._anchor())
        kept.extend(self._links(rng.randint(0, 3)))
        return tuple(kept)

    # -- drawing ---------------------------------------------------------------------------

    def _content(self) -> str:
        lo, hi = self.config.words_per_page
        return " ".join(self._rng.choices(self._vocabulary, k=self._rng.randint(lo, hi)))

    def _links(self, k: int | None = None) -> tuple[tuple[str, str], ...]:
        rng = self._rng
        if k is None:
            k = rng.randint(*self.config.links_per_page)
        targets = rng.choices(self._by_rank, cum_weights=self._cum_weights, k=k)
        links = [(t, self._anchor()) for t in targets]
        if links and rng.random() < self.config.repeated_link_fraction:
            links.append((rng.choice(links)[0], self._anchor()))
        return tuple(links)

    def _anchor(self) -> str:
        return self._phrases[int(self._rng.random() * len(self._phrases))]


def _url(i: int) -> str:
    return f"http://site{i % 37:02d}.example.com/page/{i}"


def _make_vocabulary(rng: random.Random, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4))))
    return sorted(words)
