"""Output of the Spark load benchmark: the JSON results file, the PNG plots and the one-screen
summary.

Results file (bench/results/spark_load-<stamp>.json):

    run          stamp, command, Spark master and version, git revision, cores, broker
    config       the kafkalite LoadSpec (spark_tasks.LoadSpec)
    systems      {"kafkalite": S, "redis": S}   (redis absent with --no-peer), where S is
                 transport, mode, wall_s,
                 produce / consume: records, bytes, seconds, records_per_s, mb_per_s,
                 latency_ms: end_to_end / produce_ack: p50 p95 p99 p99.9 max mean count,
                 tasks: per-task figures, verification: spark_verify.Verification + ok,
                 timeline: bucket_s, produce / consume: [[t_s, records/s, MB/s], ...],
                 histogram: end_to_end: lower_ms, upper_ms, counts
    ratio_kafkalite_to_redis   throughput and latency ratios (absent with --no-peer)
    ok           every system verified
    plots        paths of the PNG files
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

SYSTEM_LABELS = {"kafkalite": "kafkalite", "redis": "redis streams"}


def write_results(results: dict[str, Any], directory: Path, stamp: str) -> Path:
    path = directory / f"spark_load-{stamp}.json"
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return path


def write_plots(results: dict[str, Any], directory: Path, stamp: str) -> list[Path]:
    """throughput over time (records/s per phase and system) and the end-to-end latency histogram."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = results["systems"]
    paths = []

    fig, ax = plt.subplots(figsize=(9, 4.5))
    styles = {"produce": "-", "consume": "--"}
    for name, system in systems.items():
        for phase in ("produce", "consume"):
            points = system["timeline"][phase]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], styles[phase],
                        label=f"{SYSTEM_LABELS.get(name, name)} {phase}")  # fmt: skip
    ax.set_xlabel("seconds since the first send")
    ax.set_ylabel("records/s")
    ax.set_title("Throughput over time")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = directory / f"spark_load-{stamp}-throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name, system in systems.items():
        hist = system["histogram"]["end_to_end"]
        if not hist["counts"]:
            continue
        # Bins are contiguous (spark_load.latency_histogram fills empty ones).
        edges = [*hist["lower_ms"], hist["upper_ms"][-1]]
        artist = ax.stairs(hist["counts"], edges, label=SYSTEM_LABELS.get(name, name),
                           fill=False, linewidth=1.5)  # fmt: skip
        latency = system["latency_ms"]["end_to_end"]
        for q in ("p50", "p99"):
            if q in latency:
                ax.axvline(latency[q], linestyle=":", linewidth=1, color=artist.get_edgecolor())
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_xlabel("end-to-end latency (ms), dotted: p50 and p99")
    ax.set_ylabel("records")
    ax.set_title(f"End-to-end latency ({next(iter(systems.values()))['mode']} mode)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = directory / f"spark_load-{stamp}-latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    return paths


def print_summary(results: dict[str, Any], console: Console, path: Path | None = None) -> None:
    systems = results["systems"]
    config = results["config"]

    def say(text: str) -> None:
        console.print(text, highlight=False)

    console.rule("[bold]Spark load benchmark")
    say(
        f"{config['records']} records x {config['value_size']} B, {config['keys']} keys, "
        f"{config['partitions']} partitions, {config['producers']} producer + "
        f"{config['consumers']} consumer tasks, acks={config['acks']}, "
        f"compression={config['compression']}, linger={config['linger_ms']} ms, "
        f"idempotence={'on' if config['idempotence'] else 'off'}, "
        f"rate={config['rate'] or 'unthrottled'}, "
        f"{'sequential' if config['sequential'] else 'live'} consume, "
        f"master {results['run']['master']}"
    )
    say(f"[dim]{results['run']['broker']}[/dim]")

    table = Table(title="Throughput", title_justify="left")
    for column in ("system", "phase", "records", "MB", "seconds", "records/s", "MB/s"):
        table.add_column(column, justify="left" if column in ("system", "phase") else "right")
    for name, system in systems.items():
        for phase in ("produce", "consume"):
            f = system[phase]
            table.add_row(SYSTEM_LABELS.get(name, name), phase, f"{f['records']:,}",
                          f"{f['bytes'] / 1e6:.1f}", f"{f['seconds']:.2f}",
                          f"{f['records_per_s']:,.0f}", f"{f['mb_per_s']:.2f}")  # fmt: skip
    console.print(table)

    table = Table(title="Latency (ms)", title_justify="left")
    for column in ("system", "measure", "p50", "p95", "p99", "p99.9", "max"):
        table.add_column(column, justify="left" if column in ("system", "measure") else "right")
    for name, system in systems.items():
        # Sequential runs read a finished log: receive - send is then mostly the wait.
        e2e = "end to end" if system["mode"] == "live" else "send to read (sequential)"
        for measure, label in (("end_to_end", e2e), ("produce_ack", "produce ack")):
            lat = system["latency_ms"][measure]
            if not lat.get("count"):
                continue
            table.add_row(SYSTEM_LABELS.get(name, name), label,
                          *(f"{lat[q]:.1f}" for q in ("p50", "p95", "p99", "p99.9", "max")))  # fmt: skip
    console.print(table)

    table = Table(title="Tasks", title_justify="left")
    for column in ("system", "task", "records", "records/s", "MB/s", "notes"):
        table.add_column(
            column, justify="left" if column in ("system", "task", "notes") else "right"
        )
    for name, system in systems.items():
        for t in system["tasks"]:
            notes = []
            if t.get("failed"):
                notes.append(f"{t['failed']} failed")
            if t.get("timed_out"):
                notes.append("timed out")
            if t["errors"]:
                notes.append(t["errors"][0][:60])
            if "partitions" in t:
                notes.append(f"partitions {t['partitions'][0]}-{t['partitions'][-1]}")
            table.add_row(SYSTEM_LABELS.get(name, name), f"{t['role']} {t['task']}",
                          f"{t['records']:,}", f"{t['records_per_s']:,.0f}",
                          f"{t['mb_per_s']:.2f}", "; ".join(notes))  # fmt: skip
    console.print(table)

    ratio = results.get("ratio_kafkalite_to_redis")
    if ratio:
        say(
            "kafkalite / redis: throughput produce "
            + _ratio(ratio["produce_records_per_s"]) + ", consume "
            + _ratio(ratio["consume_records_per_s"]) + " (above 1: kafkalite faster); "
            + "end-to-end latency p50 " + _ratio(ratio["end_to_end_p50"]) + ", p99 "
            + _ratio(ratio["end_to_end_p99"]) + " (below 1: kafkalite faster)"
        )  # fmt: skip
    for name, system in systems.items():
        v = system["verification"]
        label = SYSTEM_LABELS.get(name, name)
        if v["ok"]:
            say(
                f"[green]verified[/green] {label}: {v['acknowledged']:,} acknowledged, "
                f"{v['received']:,} received; none missing, duplicated or reordered"
            )
        else:
            say(f"[red bold]VERIFICATION FAILED[/red bold] {label}: "
                          + ", ".join(v["failures"]))  # fmt: skip
        again = system.get("verification_data_source")
        if again is not None:
            verdict = ("[green]verified[/green]" if again["ok"] else
                       "[red bold]VERIFICATION FAILED[/red bold]")  # fmt: skip
            say(f"{verdict} {label} read back through format(\"kafkalite\"): "
                f"{again['received']:,} records" + ("" if again["ok"] else ": "
                + ", ".join(again["failures"])))  # fmt: skip
    timings = results["run"].get("timings_s")
    if timings:
        say(
            "[dim]seconds: "
            + ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in timings.items())
            + "[/dim]"
        )
    if path is not None:
        say(f"[dim]results: {path}[/dim]")


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"
