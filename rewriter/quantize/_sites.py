"""Approximate layers: what each approximate rewrite replaced, and models that choose per layer.

A staged run (`rewriter.api`) brings the model to the exact rules' fixed point (the float
model F), then applies the approximate rules alone, once or more (variant 0 with every site;
variant k with the sites of the variants before it left out, so that milder rules show where
they would take a left-out site's place). This module reads those runs:

* `find_layers` groups each variant's rewrites into layers: rewrites that rewrote nodes
  another one created are one layer; a layer replaced a set of F's nodes and defines the
  values F's nodes computed there under new names (`NAME/RULE`, the builder's naming) or the
  same name (graph outputs). Layers of different variants that replaced the same F nodes are
  the options of one layer, in variant order.
* `materialize` builds a model from F in which each layer is float (F's nodes), one of its
  options (the variant's nodes copied in), or switchable: every option computed, the layer's
  values chosen by boolean graph inputs (`Where`), so that one onnxruntime session answers
  "what if these layers were float?" for any choice (the accuracy budget's measurements).

Node names identify nodes across the models: `name_every_node` gives F's nodes unique names
before the approximate runs, and the builder names what it creates uniquely. A rewrite this
module cannot place (a layer whose values do not correspond one to one, nodes with
subgraphs, non-tensor values) is reported by `find_layers`, and the caller keeps it float.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence

import ir
from rewriter.engine import Trace, TraceEntry

Site = tuple[str, str]
"""(rule name, anchor): one application of a rule, as `TraceEntry.site` names it."""

SWITCH_PREFIX = "approximate_layer_"


@dataclasses.dataclass(frozen=True, slots=True)
class Option:
    """One way to compute a layer: the nodes a variant put in place of the float nodes.

    `outputs` pairs each value the layer defines, by its name in F, with the variant's value
    that takes its place. `form` tells apart options of one rule that its variants wrote
    differently (`8-bit weights`); "" when the rule alone says what the option is.
    """

    variant: int
    entries: tuple[TraceEntry, ...]
    nodes: tuple[str, ...]
    outputs: tuple[tuple[str, str], ...]
    form: str = ""

    @property
    def sites(self) -> tuple[Site, ...]:
        """The rewrites that made this option."""
        return tuple(dict.fromkeys(entry.site for entry in self.entries))

    @property
    def rule(self) -> str:
        """The rule of the first rewrite (the one that named the layer)."""
        return self.entries[0].rule

    @property
    def title(self) -> str:
        """The rule, and the form when it has one (`quantize_conv_int8_static (8-bit weights)`)."""
        return f"{self.rule} ({self.form})" if self.form else self.rule


@dataclasses.dataclass(frozen=True, slots=True)
class Layer:
    """F's nodes that approximate rewrites replaced, and the ways to compute them."""

    index: int
    float_nodes: tuple[str, ...]
    outputs: tuple[str, ...]
    options: tuple[Option, ...]

    @property
    def sites(self) -> tuple[Site, ...]:
        """Every option's rewrites."""
        return tuple(site for option in self.options for site in option.sites)

    @property
    def anchor(self) -> str:
        """The first rewrite's anchor (how tables name the layer)."""
        return self.options[0].entries[0].anchor


@dataclasses.dataclass(frozen=True, slots=True)
class Layers:
    """The layers of a staged run, and the rewrites that could not be placed in one."""

    layers: tuple[Layer, ...]
    unplaced: tuple[Site, ...] = ()
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)


Choice = Mapping[int, int | None]
"""Layer index -> the option computed (an index into `Layer.options`), None for float."""


def name_every_node(model: ir.Model) -> int:
    """Give every node of the model a name no other node has; returns how many were renamed.

    Unnamed nodes get `<op>` stems; a name that repeats keeps its first holder.
    """
    names = ir.NameAllocator(model)
    seen: set[str] = set()
    renamed = 0
    for graph in model.graphs():
        for node in graph:
            if node.name and node.name not in seen:
                seen.add(node.name)
                continue
            node.name = names.fresh(node.name or node.op_type)
            seen.add(node.name)
            renamed += 1
    return renamed


def _nodes_by_name(model: ir.Model) -> dict[str, ir.Node]:
    return {node.name: node for graph in model.graphs() for node in graph if node.name}


def _leaving(nodes: Sequence[ir.Node]) -> list[ir.Value]:
    """Values the nodes produce that something outside them reads (or a graph returns)."""
    inside = set(nodes)
    found = []
    for node in nodes:
        for value in node.outputs:
            used_outside = any(user not in inside for user, _ in value.uses)
            if used_outside or value.is_graph_output():
                found.append(value)
    return found


def _components(entries: Sequence[TraceEntry]) -> list[list[TraceEntry]]:
    """Rewrites grouped: one that matched nodes another created joins its group."""
    creator: dict[str, int] = {}
    parent = list(range(len(entries)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for index, entry in enumerate(entries):
        for name in entry.matched:
            if name in creator:
                parent[root(index)] = root(creator[name])
        for name in entry.created:
            creator[name] = index
    groups: dict[int, list[TraceEntry]] = {}
    for index, entry in enumerate(entries):
        groups.setdefault(root(index), []).append(entry)
    return list(groups.values())


def _pair_outputs(
    float_values: Sequence[ir.Value], new_values: Sequence[ir.Value]
) -> tuple[tuple[str, str], ...] | None:
    """Each new value with the float value it stands for (`NAME` or `NAME/RULE...`)."""
    if len(float_values) != len(new_values):
        return None
    names = {value.name for value in float_values}
    pairs: dict[str, str] = {}
    for value in new_values:
        candidate = value.name
        while candidate not in names and "/" in candidate:
            candidate = candidate.rpartition("/")[0]
        if candidate not in names or candidate in pairs:
            return None
        pairs[candidate] = value.name
    return tuple((value.name, pairs[value.name]) for value in float_values)


def _is_tensor(value: ir.Value) -> bool:
    return isinstance(value.type, ir.TensorType) or value.type is None


def _option(
    variant: int,
    group: Sequence[TraceEntry],
    float_nodes: Mapping[str, ir.Node],
    new_nodes: Mapping[str, ir.Node],
) -> tuple[tuple[str, ...], tuple[str, ...], Option] | str:
    """(removed F nodes, F values leaving them, the option), or why the group cannot be placed."""
    matched = {name for entry in group for name in entry.matched}
    created = {name for entry in group for name in entry.created}
    removed = [
        name for name in dict.fromkeys(n for e in group for n in e.matched) if name not in created
    ]
    live = [
        name for name in dict.fromkeys(n for e in group for n in e.created) if name not in matched
    ]
    if any(name not in float_nodes or name in new_nodes for name in removed):
        return "it replaced nodes that are not the float model's"
    if any(name not in new_nodes for name in live):
        return "its nodes are not all in the rewritten model"
    old = [float_nodes[name] for name in removed]
    new = [new_nodes[name] for name in live]
    if any(any(True for _ in node.subgraphs()) for node in [*old, *new]):
        return "it rewrote nodes that hold subgraphs"
    if len({id(node.graph) for node in old}) > 1:
        return "it spans several graphs"
    leaving_old, leaving_new = _leaving(old), _leaving(new)
    if not all(_is_tensor(value) for value in [*leaving_old, *leaving_new]):
        return "it defines values that are not tensors"
    pairs = _pair_outputs(leaving_old, leaving_new)
    if pairs is None:
        return "its values do not correspond one to one with the ones it replaced"
    option = Option(variant, tuple(group), tuple(live), pairs)
    return tuple(removed), tuple(value.name for value in leaving_old), option


def find_layers(
    float_model: ir.Model,
    variants: Sequence[tuple[ir.Model, Trace]],
    forms: Sequence[Mapping[str, str]] = (),
) -> Layers:
    """The layers of the variants' approximate rewrites over `float_model` (see the module).

    `forms[k]` maps rules to the form of variant k's options they wrote (`Option.form`; ""
    for other rules and beyond its end).
    """
    float_nodes = _nodes_by_name(float_model)
    by_nodes: dict[frozenset[str], tuple[tuple[str, ...], tuple[str, ...], list[Option]]] = {}
    claimed: dict[str, frozenset[str]] = {}
    unplaced: list[Site] = []
    notes: list[str] = []
    for variant, (model, trace) in enumerate(variants):
        new_nodes = _nodes_by_name(model)
        entries = [entry for entry in trace.entries if entry.approximate]
        for group in _components(entries):
            found = _option(variant, group, float_nodes, new_nodes)
            sites = tuple(dict.fromkeys(entry.site for entry in group))
            if isinstance(found, str):
                unplaced.extend(sites)
                notes.append(f"`{group[0].rule}` at {group[0].anchor}: kept float ({found})")
                continue
            removed, outputs, option = found
            if variant < len(forms) and option.rule in forms[variant]:
                option = dataclasses.replace(option, form=forms[variant][option.rule])
            key = frozenset(removed)
            if key in by_nodes:
                by_nodes[key][2].append(option)
                continue
            if any(name in claimed for name in removed):
                unplaced.extend(sites)
                notes.append(
                    f"`{group[0].rule}` at {group[0].anchor}: not offered in place of a left-out "
                    "layer (it rewrites part of another layer's nodes)"
                )
                continue
            by_nodes[key] = (removed, outputs, [option])
            claimed.update(dict.fromkeys(removed, key))
    layers = tuple(
        Layer(index, removed, outputs, tuple(options))
        for index, (removed, outputs, options) in enumerate(by_nodes.values())
    )
    return Layers(layers, tuple(dict.fromkeys(unplaced)), tuple(notes))


# ---------------------------------------------------------------------------------------------
# Building a model that chooses per layer


def switch_name(layer: int, option: int) -> str:
    """The boolean graph input that selects `option` of `layer` in a switchable model."""
    return f"{SWITCH_PREFIX}{layer}_{option}"


class _Builder:
    """Copies variants' nodes into a copy of F and rewires the layers' values."""

    def __init__(self, float_model: ir.Model, variants: Sequence[ir.Model]) -> None:
        self.model = ir.from_onnx(ir.to_onnx(float_model), base_dir=float_model.base_dir)
        self.names = ir.NameAllocator(self.model)
        self.nodes = _nodes_by_name(self.model)
        self.variant_nodes = [_nodes_by_name(model) for model in variants]
        self.scopes = _Scopes()
        # (variant, name) -> the initializer copied in for a constant a variant created.
        self.constants: dict[tuple[int, str], ir.Value] = {}
        # F value name -> the value that carries it in the model being built.
        self.carriers: dict[str, ir.Value] = {}
        # (variant, variant value name) -> the F value name it stands for.
        self.stands_for: dict[tuple[int, str], str] = {}
        # (variant, the variant's node, its copy, the copy's graph, the copy's own values).
        self.copies: list[tuple[int, ir.Node, ir.Node, ir.Graph, dict[str, ir.Value]]] = []
        # Copied node name -> the layer it computes.
        self.origin: dict[str, int] = {}

    def graph_of(self, layer: Layer) -> ir.Graph:
        graph = self.nodes[layer.float_nodes[0]].graph
        assert graph is not None, f"layer {layer.index} is in no graph"
        return graph

    def float_value(self, layer: Layer, name: str) -> ir.Value:
        found = self.scopes.find(self.graph_of(layer), name)
        assert found is not None, f"value {name} of layer {layer.index} not found"
        return found

    def copy_option(self, layer: Layer, option: Option) -> dict[str, ir.Value]:
        """The option's nodes copied into the layer's graph; F value name -> its new value."""
        graph = self.graph_of(layer)
        own: dict[str, ir.Value] = {}
        for name in option.nodes:
            source = self.variant_nodes[option.variant][name]
            outputs = [
                ir.Value(self.names.fresh(value.name), type=value.type) for value in source.outputs
            ]
            for original, copied in zip(source.outputs, outputs, strict=True):
                own[original.name] = copied
            node = ir.Node(
                source.op_type,
                (),
                list(source.attributes.values()),
                domain=source.domain,
                overload=source.overload,
                name=self.names.fresh(source.name),
                outputs=outputs,
            )
            graph.append(node)
            self.copies.append((option.variant, source, node, graph, own))
            self.origin[node.name] = layer.index
        return {float_name: own[new_name] for float_name, new_name in option.outputs}

    def learn(self, layers: Layers) -> None:
        """Which F value each option's values stand for (whatever the choice copies)."""
        for layer in layers:
            for option in layer.options:
                for float_name, new_name in option.outputs:
                    self.stands_for[(option.variant, new_name)] = float_name

    def wire(self) -> None:
        """Connect every copied node's inputs (once every carrier is known)."""
        for variant, source, node, graph, own in self.copies:
            node.set_inputs([self.resolve(variant, value, own, graph) for value in source.inputs])

    def resolve(
        self,
        variant: int,
        value: ir.Value | None,
        own: Mapping[str, ir.Value],
        graph: ir.Graph,
    ) -> ir.Value | None:
        """The model's value that a copied node reads where the variant's node read `value`."""
        if value is None:
            return None
        if value.name in own:
            return own[value.name]
        stands_for = self.stands_for.get((variant, value.name))
        if stands_for is not None and stands_for in self.carriers:
            return self.carriers[stands_for]
        if stands_for is not None:  # a layer computed float: F's own value
            found = self.scopes.find(graph, stands_for)
            assert found is not None, f"value {stands_for} of a float layer not found"
            return found
        if value.name in self.carriers:
            return self.carriers[value.name]
        key = (variant, value.name)
        if key in self.constants:
            return self.constants[key]
        existing = self.scopes.find(graph, value.name)
        copied_names = {constant.name for constant in self.constants.values()}
        if existing is not None and existing.name not in copied_names:
            return existing  # F's own value (the variants started from F: same name, same data)
        tensor = value.const_value
        assert tensor is not None, f"value {value.name} read by a copied node has no source"
        name = self.names.fresh(value.name)
        constant = ir.Value(name, type=value.type, const_value=tensor)
        graph.add_initializer(constant)
        self.scopes.add(graph, constant)
        self.constants[key] = constant
        return constant


class _Scopes:
    """Values by name per graph, looked up through outer scopes (built on first use)."""

    def __init__(self) -> None:
        self._by_graph: dict[int, dict[str, ir.Value]] = {}

    def _index(self, graph: ir.Graph) -> dict[str, ir.Value]:
        key = id(graph)
        if key not in self._by_graph:
            self._by_graph[key] = {value.name: value for value in graph.values()}
        return self._by_graph[key]

    def add(self, graph: ir.Graph, value: ir.Value) -> None:
        self._index(graph)[value.name] = value

    def find(self, graph: ir.Graph, name: str) -> ir.Value | None:
        """The value called `name` visible in `graph` (its own, then its outer scopes')."""
        current: ir.Graph | None = graph
        while current is not None:
            found = self._index(current).get(name)
            if found is not None:
                return found
            owner = current.owner
            current = owner.graph if isinstance(owner, ir.Node) else None
        return None


@dataclasses.dataclass(frozen=True)
class Built:
    """A model `materialize` made, and which layer each copied node computes."""

    model: ir.Model
    node_layers: Mapping[str, int]


def materialize(
    float_model: ir.Model,
    variants: Sequence[ir.Model],
    layers: Layers,
    choice: Choice | None = None,
    *,
    switchable: bool = False,
) -> Built:
    """F with each layer computed as `choice` says (absent: float), or switchable.

    Switchable: every layer computes every option and a `Where` chain picks, by the boolean
    scalar graph inputs `switch_name(layer, option)`, the first option switched on (float
    when none is); the graph's other inputs and outputs are F's.
    """
    choice = choice or {}
    build = _Builder(float_model, variants)
    build.learn(layers)
    replaced: list[tuple[Layer, dict[str, ir.Value]]] = []
    switches: list[ir.Value] = []
    for layer in layers:
        picks = range(len(layer.options)) if switchable else [choice.get(layer.index)]
        carriers: dict[str, ir.Value] | None = None
        chain: list[tuple[ir.Value, dict[str, ir.Value]]] = []
        for pick in picks:
            if pick is None:
                continue
            copied = build.copy_option(layer, layer.options[pick])
            if switchable:
                switch = ir.Value(
                    switch_name(layer.index, pick), type=ir.TensorType(ir.DataType.BOOL, ())
                )
                switches.append(switch)
                chain.append((switch, copied))
            else:
                carriers = copied
        if switchable and chain:
            carriers = _where_chain(build, layer, chain)
        if carriers is not None:
            build.carriers.update(carriers)
            replaced.append((layer, carriers))
    build.wire()
    for layer, carriers in replaced:
        _reroute(build, layer, carriers, keep_float=switchable)
    for switch in switches:
        build.model.graph.add_input(switch)
    for graph in build.model.graphs():
        graph.sort()
    return Built(build.model, build.origin)


def _where_chain(
    build: _Builder, layer: Layer, chain: Sequence[tuple[ir.Value, dict[str, ir.Value]]]
) -> dict[str, ir.Value]:
    """Per F value of the layer: Where(s0, option 0, Where(s1, option 1, ... float))."""
    graph = build.graph_of(layer)
    carriers = {}
    for name in layer.outputs:
        current = build.float_value(layer, name)
        for switch, copied in reversed(chain):
            picked = ir.Value(build.names.fresh(f"{name}/choice"), type=current.type)
            graph.append(
                ir.Node(
                    "Where",
                    (switch, copied[name], current),
                    name=build.names.fresh(f"{name}/choose"),
                    outputs=[picked],
                )
            )
            current = picked
        carriers[name] = current
    return carriers


def _reroute(
    build: _Builder, layer: Layer, carriers: Mapping[str, ir.Value], *, keep_float: bool
) -> None:
    """Readers of the layer's F values read the carriers; F's nodes go unless kept."""
    float_nodes = {build.nodes[name] for name in layer.float_nodes}
    for name in layer.outputs:
        value = build.float_value(layer, name)
        carrier = carriers[name]
        for user, index in list(value.uses):
            if user in float_nodes or (user.op_type == "Where" and user.outputs[0] is carrier):
                continue
            if keep_float and _feeds_chain(user, carrier):
                continue
            user.replace_input_with(index, carrier)
        graph = value.graph
        if graph is not None and value.is_graph_output():
            for position, out in enumerate(graph.outputs):
                if out is value:
                    graph.set_output(position, carrier)
            original = value.name
            value.name = build.names.fresh(f"{original}/float")
            carrier.name = original
    if not keep_float:
        _remove_dead(float_nodes)


def _feeds_chain(user: ir.Node, carrier: ir.Value) -> bool:
    """Whether `user` is one of the Where nodes that end in `carrier`."""
    if user.op_type != "Where":
        return False
    frontier = [user]
    while frontier:
        node = frontier.pop()
        for out in node.outputs:
            if out is carrier:
                return True
            frontier.extend(u for u, _ in out.uses if u.op_type == "Where")
    return False


def _remove_dead(nodes: set[ir.Node]) -> None:
    """Remove the nodes nothing reads any more, then the initializers only they read."""
    read: list[ir.Value] = []
    changed = True
    while changed:
        changed = False
        for node in list(nodes):
            graph = node.graph
            if graph is None:
                nodes.discard(node)
                continue
            if any(value.uses or value.is_graph_output() for value in node.outputs):
                continue
            read.extend(value for value in node.inputs if value is not None)
            graph.remove(node)
            nodes.discard(node)
            changed = True
    for value in read:
        graph = value.graph
        unused = not value.uses and not value.is_graph_output() and not value.is_graph_input()
        if unused and graph is not None and graph.initializers.get(value.name) is value:
            graph.remove_initializer(value.name)
