"""Telemetry costs nothing while no OpenTelemetry SDK is installed: the span and stage helpers
hand out one shared do-nothing context manager, start no span through the API, build no
attributes and touch no instrument; an SDK installed later, after the runtime was made, gets
spans and metrics from its next turn on (turnframe_runtime/observe.py).

Each test runs in a fresh process: this suite's conftest installs an SDK in the test process."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import asyncio, json
from opentelemetry import metrics, trace
from turnframe_runtime import observe
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act

NAME = act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
seen = {"spans started": 0, "attributes built": 0}
tracer_class = type(observe._tracer)
start = tracer_class.start_as_current_span
safe = observe._safe

def counting_start(self, *args, **kwargs):
    seen["spans started"] += 1
    return start(self, *args, **kwargs)

def counting_safe(values):
    seen["attributes built"] += 1
    return safe(values)

tracer_class.start_as_current_span = counting_start
observe._safe = counting_safe

async def main():
    desk = DeskHarness()  # made before any SDK is installed
    desk.ready_trip()
    await desk.say("Grace Hopper", NAME)
    result = {
        "before": dict(seen),
        "shared": observe.span("x", turn_id="turn_1") is observe.stage("G", "understand"),
        "instruments": len(observe._counters) + len(observe._histograms),
    }
    if INSTALL:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        await desk.say("Grace Hopper", NAME)
        result["spans"] = sorted({s.name for s in spans.get_finished_spans()})
        data = reader.get_metrics_data()
        result["metrics"] = sorted(
            {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
        )
    print(json.dumps(result))

asyncio.run(main())
"""


def _run(install: bool) -> dict:
    code = f"INSTALL = {install}\n{SCRIPT}"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.splitlines()[-1])


def test_without_an_sdk_a_turn_starts_no_span_and_builds_no_attributes() -> None:
    result = _run(install=False)
    assert result["before"] == {"spans started": 0, "attributes built": 0}
    assert result["shared"] is True
    assert result["instruments"] == 0


def test_an_sdk_installed_after_the_runtime_was_made_gets_spans_and_metrics() -> None:
    result = _run(install=True)
    assert result["before"] == {"spans started": 0, "attributes built": 0}
    assert "turnframe.turn" in result["spans"]
    assert "turnframe.stage G understand" in result["spans"]
    assert "turnframe.stage N-P commit" in result["spans"]
    assert {"turnframe.turn.received", "turnframe.stage.duration_ms"} <= set(result["metrics"])
