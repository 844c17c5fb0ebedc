"""The OpenTelemetry SDK as an application configures it, recording into memory for a test.

The global tracer provider can be set once per process, so it is set once (or, when something
else set an SDK provider first, joined) and the recorder exports spans only while a test uses
the `spans` fixture of tests/contract/test_tracing.py or tests/unit/test_spans.py. The global
meter provider likewise: `measuring()` gives what was recorded inside its block.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    InMemoryMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _WhileRecording(SimpleSpanProcessor):
    recording = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.recording:
            super().on_end(span)


@functools.cache
def _recorder() -> tuple[_WhileRecording, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = _WhileRecording(exporter)
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(processor)
    return processor, exporter


@contextmanager
def recording() -> Iterator[InMemorySpanExporter]:
    """The spans that end inside the block, in an in-memory exporter."""
    processor, exporter = _recorder()
    exporter.clear()
    processor.recording = True
    try:
        yield exporter
    finally:
        processor.recording = False
        exporter.clear()


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    """The span's parent among `spans` (None: a root, or a parent from elsewhere)."""
    if span.parent is None:
        return None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def roots(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The spans whose parent is not among `spans`."""
    return [s for s in spans if parent_of(s, spans) is None]


def ancestors(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[str]:
    """The names of the span's parent, its parent, ... up to its root."""
    names = []
    current = parent_of(span, spans)
    while current is not None:
        names.append(current.name)
        current = parent_of(current, spans)
    return names


@functools.cache
def _metric_reader() -> InMemoryMetricReader:
    # Delta: each collection holds only what was recorded since the one before.
    reader = InMemoryMetricReader(preferred_temporality={Histogram: AggregationTemporality.DELTA})
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return reader


class Measured:
    """The histogram points of the metrics recorded inside a `measuring()` block."""

    def __init__(self) -> None:
        self.points: dict[str, list[tuple[dict[str, Any], float, int]]] = {}

    def of(self, name: str) -> list[tuple[dict[str, Any], float, int]]:
        """(attributes, sum, count) of each point of metric `name`."""
        return self.points.get(name, [])


@contextmanager
def measuring() -> Iterator[Measured]:
    """The metrics recorded inside the block (by this package's meter), once it is left."""
    reader = _metric_reader()
    reader.get_metrics_data()  # drop what came before
    measured = Measured()
    yield measured
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            if scope.scope.name != "sf_provider":
                continue
            for metric in scope.metrics:
                measured.points.setdefault(metric.name, []).extend(
                    (dict(p.attributes or {}), p.sum, p.count)
                    for p in metric.data.data_points
                    if isinstance(p, HistogramDataPoint) and p.count
                )
