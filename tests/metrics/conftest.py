"""Helpers of the metrics tests: scrape an endpoint and read samples."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""Sample values by (sample name, labels)."""


def scrape(url: str, timeout: float = 10.0) -> Samples:
    """Every sample ``url`` exposes, parsed with prometheus_client's own parser."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def registry_samples() -> Samples:
    """Every sample of this interpreter's registry (for hooks driven in-process)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in REGISTRY.collect()
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when absent: a labelled counter appears on its first inc)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """How much a sample moved between two scrapes."""
    return value(after, name, **labels) - value(before, name, **labels)


def wait_for(
    url: str, check: Callable[[Samples], bool], timeout: float = 30.0, interval: float = 0.2
) -> Samples:
    """Scrape until ``check`` holds (background work: observers, secondaries, connections
    closing); the last scrape is returned either way so the assertion shows it."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url)
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(interval)
