"""A small, lossless IR for ONNX models.

`ir.load` / `ir.save` read and write files; `ir.from_onnx` / `ir.to_onnx` convert protobuf
messages. Graphs are made of `Node`s and `Value`s with use-def links kept consistent by the
mutation methods; lifting builds them through their constructors like any other code, and
lowering emits every untouched part of a model exactly as it was read.
"""

from __future__ import annotations

from ir import _schemas as schemas
from ir._convert import (
    ConversionError,
    check_model,
    check_proto,
    convert_version,
    runtime_ops_lost,
)
from ir._core import (
    Attr,
    AttrValue,
    DeferredAttributes,
    Dim,
    ExternalDataError,
    Function,
    Graph,
    GraphStructureError,
    IRError,
    MapType,
    Model,
    ModelLoadError,
    Node,
    NumpyTensor,
    OpaqueType,
    OptionalType,
    SequenceType,
    SparseTensorType,
    Tensor,
    TensorType,
    Type,
    UnsetType,
    Use,
    Value,
    attr_float,
    attr_floats,
    attr_graph,
    attr_int,
    attr_ints,
    attr_str,
    attr_strs,
    attr_tensor,
    format_graph,
    format_node,
    infer_attr,
    topological_order,
)
from ir._enums import AttrType, DataType
from ir._evaluate import EvaluationError, evaluate_node, evaluation_model
from ir._extract import ExtractError, extract
from ir._graft import Adapter, Connection, GraftError, graft
from ir._infer import (
    NodeInferenceError,
    NodeTypeInference,
    fact_type,
    infer_node_types,
    inferred_type,
    merge_types,
    record_inferred_type,
    take_declared_type,
)
from ir._journal import InputChange, Journal, OutputChange, scope_of
from ir._names import NameAllocator
from ir._serde import from_onnx, to_onnx
from ir._serde_io import cannot_write, load, save
from ir._serde_tensors import ExternalTensor, TensorDataError, numpy_dtype
from ir._shape_elements import ShapeElements, shape_elements
from ir._shape_inference import infer_types
from ir._validate import validate_model
from ir._verify import verify

__all__ = [
    "Adapter",
    "Attr",
    "AttrType",
    "AttrValue",
    "Connection",
    "ConversionError",
    "DataType",
    "DeferredAttributes",
    "Dim",
    "EvaluationError",
    "ExternalDataError",
    "ExternalTensor",
    "ExtractError",
    "Function",
    "GraftError",
    "Graph",
    "GraphStructureError",
    "IRError",
    "InputChange",
    "Journal",
    "MapType",
    "Model",
    "ModelLoadError",
    "NameAllocator",
    "Node",
    "NodeInferenceError",
    "NodeTypeInference",
    "NumpyTensor",
    "OpaqueType",
    "OptionalType",
    "OutputChange",
    "SequenceType",
    "ShapeElements",
    "SparseTensorType",
    "Tensor",
    "TensorDataError",
    "TensorType",
    "Type",
    "UnsetType",
    "Use",
    "Value",
    "attr_float",
    "attr_floats",
    "attr_graph",
    "attr_int",
    "attr_ints",
    "attr_str",
    "attr_strs",
    "attr_tensor",
    "cannot_write",
    "check_model",
    "check_proto",
    "convert_version",
    "evaluate_node",
    "evaluation_model",
    "extract",
    "fact_type",
    "format_graph",
    "format_node",
    "from_onnx",
    "graft",
    "infer_attr",
    "infer_node_types",
    "infer_types",
    "inferred_type",
    "load",
    "merge_types",
    "numpy_dtype",
    "record_inferred_type",
    "runtime_ops_lost",
    "save",
    "schemas",
    "scope_of",
    "shape_elements",
    "take_declared_type",
    "to_onnx",
    "topological_order",
    "validate_model",
    "verify",
]
