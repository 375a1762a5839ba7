"""How shape/dtype facts are kept current, and how two implementations' facts compare.

The pass manager runs `ir.infer_types` over the whole model once (onnx's inference, then the
symbolic walk over what it left unknown), then infers only the nodes each rewrite creates
(`ir.infer_node_types`). Without arguments this script measures both on the synthetic chain
models of `rewrite_speed.py` and on real exports, and compares the per-rewrite cost with
re-running full inference after every rewrite (what a naive implementation would do).

    python benchmarks/facts_inference.py

It is also a differential harness for the facts themselves. `--dump` writes, for every model
of tests/models, each value's shape fact (per graph scope) and the median time of
`infer_types`, using the `ir` package on the path; run it once per implementation (a tree
from before this engine, whose `infer_types` takes the engine list, is driven the old way),
then `--compare` counts, per model, the values whose facts are weaker, equal (up to a
consistent renaming of symbols) or stronger, and lists the weaker ones:

    PYTHONPATH=/path/to/old/tree python benchmarks/facts_inference.py --dump old.json
    PYTHONPATH=. python benchmarks/facts_inference.py --dump new.json
    python benchmarks/facts_inference.py --compare old.json new.json

A symbolic dim is compared by the set of (value, axis) positions that carry the same symbol:
a fact is weaker where a dim lost a number, a rank, or a position it was known to equal, and
stronger where it gained one and lost none.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from rewrite_speed import chain_model  # noqa: E402

import ir  # noqa: E402

Position = tuple[str, str, int]  # (scope, value, axis)
Facts = dict[tuple[str, str], list[object] | None]  # (scope, value) -> dims or None


def measure(label: str, model: ir.Model) -> str:
    t0 = time.perf_counter()
    ir.infer_types(model)
    full = time.perf_counter() - t0
    per_node = []
    for node in list(model.graph)[:2000]:
        t0 = time.perf_counter()
        ir.infer_node_types(node, model.opset_imports)
        per_node.append(time.perf_counter() - t0)
    one = statistics.median(per_node)
    nodes = len(model.graph)
    return f"| {label} | {nodes} | {full * 1e3:.1f} | {one * 1e6:.0f} | {full / one:.0f}x |"


def speed_table() -> None:
    rows = [
        "| model | nodes | full inference (ms) | one node (µs) | full / one node |",
        "|---|---:|---:|---:|---:|",
    ]
    for size in (1000, 10000, 100000):
        rows.append(measure(f"chain {size}", ir.from_onnx(chain_model(size))))
    for name in ("bert_ts14", "gpt2_ts14", "vit_ts14"):
        path = ROOT / "tests" / "models" / f"{name}.onnx"
        if path.exists():
            rows.append(measure(name, ir.load(path)))
    print("\n".join(rows))


# -- differential harness ----------------------------------------------------------------------


def _inference() -> Callable[[ir.Model], object]:
    """`ir.infer_types`, or for a tree from before this engine, with its engine list."""
    for module in ("rewriter.engine._manager", "rewriter._manager"):
        try:
            engines = __import__(module, fromlist=["INFERENCE_ENGINES"]).INFERENCE_ENGINES
        except (ImportError, AttributeError):
            continue
        return lambda model: ir.infer_types(model, engines)  # type: ignore[call-arg]
    return ir.infer_types


def _scopes(model: ir.Model) -> Iterator[tuple[str, ir.Graph]]:
    def walk(graph: ir.Graph, path: str) -> Iterator[tuple[str, ir.Graph]]:
        yield path, graph
        for index, node in enumerate(graph):
            for attr in node.attributes.values():
                for k, sub in enumerate(attr.graphs()):
                    yield from walk(sub, f"{path}/{node.name or index}.{attr.name}{k}")

    yield from walk(model.graph, "main")
    for fn in model.functions.values():
        yield from walk(fn.graph, f"function {fn.domain}.{fn.name}")


def dump(path: Path, repeats: int) -> None:
    infer = _inference()
    result: dict[str, object] = {}
    for model_path in sorted((ROOT / "tests" / "models").glob("*.onnx")):
        times = []
        model = ir.load(model_path)
        for _ in range(repeats):
            fresh = ir.load(model_path)
            t0 = time.perf_counter()
            infer(fresh)
            times.append(time.perf_counter() - t0)
        infer(model)
        facts: dict[str, dict[str, object]] = {}
        for scope, graph in _scopes(model):
            for value in graph.values():
                t = ir.fact_type(value)
                shape = (
                    list(t.shape) if isinstance(t, ir.TensorType) and t.shape is not None else None
                )
                producer = value.producer()
                facts.setdefault(scope, {})[value.name] = {
                    "shape": shape,
                    "op": producer.op_type if producer is not None else "",
                }
        result[model_path.stem] = {"seconds": statistics.median(times), "facts": facts}
        print(f"{model_path.stem}: {statistics.median(times) * 1e3:.1f} ms", file=sys.stderr)
    path.write_text(json.dumps(result))


def _flatten(entry: dict[str, object]) -> tuple[Facts, dict[tuple[str, str], str]]:
    facts: Facts = {}
    ops: dict[tuple[str, str], str] = {}
    scopes = entry["facts"]
    assert isinstance(scopes, dict), "a dump holds facts per scope"
    for scope, values in scopes.items():
        for name, fact in values.items():
            facts[(scope, name)] = fact["shape"]
            ops[(scope, name)] = fact["op"]
    return facts, ops


def _classes(facts: Facts) -> dict[str, set[Position]]:
    found: dict[str, set[Position]] = collections.defaultdict(set)
    for (scope, name), dims in facts.items():
        for axis, dim in enumerate(dims or ()):
            if isinstance(dim, str):
                found[dim].add((scope, name, axis))
    return found


def _verdict(
    old: list[object] | None,
    new: list[object] | None,
    old_classes: dict[str, set[Position]],
    new_classes: dict[str, set[Position]],
) -> str:
    if old is None:
        return "equal" if new is None else "stronger"
    if new is None:
        return "weaker"
    if len(old) != len(new):
        return "conflict"
    weaker = stronger = False
    for a, b in zip(old, new, strict=True):
        if isinstance(a, int):
            if isinstance(b, int) and a != b:
                return "conflict"
            weaker |= not isinstance(b, int)
        elif isinstance(a, str):
            if isinstance(b, int):
                stronger = True
            elif b is None:
                weaker = True
            else:
                same_old, same_new = old_classes[a], new_classes[str(b)]
                weaker |= not same_old <= same_new
                stronger |= same_new > same_old
        elif b is not None:
            stronger = True
    if weaker:
        return "weaker"
    return "stronger" if stronger else "equal"


def compare(old_path: Path, new_path: Path, limit: int) -> None:
    old_dump = json.loads(old_path.read_text())
    new_dump = json.loads(new_path.read_text())
    print("| model | values | weaker | equal | stronger | conflict | old ms | new ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    listed: list[str] = []
    totals: collections.Counter[str] = collections.Counter()
    for model in sorted(old_dump):
        if model not in new_dump:
            continue
        old, ops = _flatten(old_dump[model])
        new, new_ops = _flatten(new_dump[model])
        ops.update(new_ops)
        old_classes, new_classes = _classes(old), _classes(new)
        counts: collections.Counter[str] = collections.Counter()
        for key in sorted(set(old) | set(new)):
            verdict = _verdict(old.get(key), new.get(key), old_classes, new_classes)
            counts[verdict] += 1
            if verdict in ("weaker", "conflict") and len(listed) < limit:
                listed.append(
                    f"  {model} {key[0]} {ops[key]} {key[1]}: {old.get(key)} -> {new.get(key)}"
                )
        totals += counts
        old_ms = old_dump[model]["seconds"] * 1e3
        new_ms = new_dump[model]["seconds"] * 1e3
        print(
            f"| {model} | {sum(counts.values())} | {counts['weaker']} | {counts['equal']} | "
            f"{counts['stronger']} | {counts['conflict']} | {old_ms:.1f} | {new_ms:.1f} |"
        )
    print(f"\ntotal: {dict(totals)}")
    if listed:
        print("\nweaker or conflicting values:")
        print("\n".join(listed))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dump", type=Path, help="write this implementation's facts here")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("OLD", "NEW"))
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per model (--dump)")
    parser.add_argument("--limit", type=int, default=50, help="weaker values listed (--compare)")
    args = parser.parse_args()
    if args.dump:
        dump(args.dump, args.repeats)
    elif args.compare:
        compare(*args.compare, args.limit)
    else:
        speed_table()


if __name__ == "__main__":
    main()
