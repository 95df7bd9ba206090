"""The original package's public module layout (issue #34, item 2): every public name of the
original's modules where the original has it, the same object wherever it is re-exported,
and the Python-written values (Shape, Stride, Node, Tree, the index maps, TileSet,
TileSelection, AwaitResult) behaving as the original's.

The expected names are the original's `__all__` lists (patrickk1998/strideweave,
`src/strideweave/`), written out below. Names the original has and this package cannot
provide without native support are listed in NEEDS_NATIVE_SUPPORT, and a test asserts they
are still absent: the list can only shrink as features land.
"""

import copy
import importlib
import pickle
from dataclasses import FrozenInstanceError
from types import ModuleType
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import strideweave as sw
import strideweave._native as native
from strideweave import layout as layout_module
from strideweave.carriers import move as move_module
from strideweave.carriers import operation_policy
from strideweave.carriers import tiled_evictable as tiled

# --- the original's names, module by module ---------------------------------------------------

# The original's `strideweave.operation.__all__`, without the profiler (`Profiler`,
# `ProfilerAggregate`, `ProfilerEvent`, `profile`: another subsystem).
ORIGINAL_OPERATION = [
    "BlockDeviceToCpuMoveOperation", "BroadcastOperation", "CpuToBlockDeviceMoveOperation",
    "CpuToFileBackedMoveOperation", "CpuToMetalMoveOperation", "ElementwiseMoveOperation",
    "EvictableOperation", "FileBackedToCpuMoveOperation", "GenericAbsOperation",
    "GenericAddOperation", "GenericArgMaxOperation", "GenericArgMinOperation",
    "GenericAsStridedOperation", "GenericCeilOperation", "GenericClampOperation",
    "GenericConvGeneralOperation", "GenericCosOperation", "GenericCumsumOperation",
    "GenericDivOperation", "GenericELUOperation", "GenericElementwiseMulOperation",
    "GenericEqOperation", "GenericErfOperation", "GenericExpOperation", "GenericExp2Operation",
    "GenericFloorOperation", "GenericGELUOperation", "GenericGatherOperation",
    "GenericLeakyReLUOperation", "GenericLeOperation", "GenericLogicalNotOperation",
    "GenericLogOperation", "GenericLog2Operation", "GenericLtOperation",
    "GenericMatmulOperation", "GenericMaximumOperation", "GenericMinimumOperation",
    "GenericNegOperation", "GenericNeOperation", "GenericPowOperation", "GenericReLUOperation",
    "GenericRecipOperation", "GenericReduceMaxOperation", "GenericReduceMinOperation",
    "GenericReduceProdOperation", "GenericReduceSumOperation", "GenericRemOperation",
    "GenericRoundOperation", "GenericRsqrtOperation", "GenericScalarMulOperation",
    "GenericScatterAddOperation", "GenericScatterOperation", "GenericSelectOperation",
    "GenericSignOperation", "GenericSinOperation", "GenericSiLUOperation",
    "GenericSigmoidOperation", "GenericSoftplusOperation", "GenericSortIndicesOperation",
    "GenericSortValuesOperation", "GenericSqrtOperation", "GenericSubOperation",
    "GenericTanhOperation", "GenericTopKIndicesOperation", "GenericTopKValuesOperation",
    "GenericViewOperation", "MetalToCpuMoveOperation", "MetalToMetalMoveOperation",
    "MoveOperation", "Operation", "PermuteOperation", "RearrangeOperation", "ReshapeOperation",
    "SqueezeOperation", "UnsqueezeOperation",
    # the operation-definition API
    "BoundOperationCall", "NON_DIFFERENTIABLE", "OperandKind", "OperandSpec", "OperationCall",
    "OperationDefinition", "OperationPlan", "OperationSchema", "OptionSpec",
    "ProviderContractError", "REQUIRED", "ResolvedInvocation", "ResultSpec", "VJPContext",
    "define_operation",
    # strideweave.functional
    "SortResult", "TopKResult", "abs", "add", "argmax", "argmin", "as_strided",
    "broadcast_in_dim", "broadcast_to", "ceil", "clamp", "conv_general", "cos", "cumsum", "div",
    "einsum", "elementwise_mul", "elu", "eq", "erf", "exp", "exp2", "floor", "gather", "ge",
    "gelu", "gt", "is_grad_enabled", "le", "leaky_relu", "log", "log2", "logical_not", "lt",
    "matmul", "maximum", "minimum", "move", "move_async", "mul", "ne", "neg", "no_grad",
    "permute", "pow", "rearrange", "recip", "reduce_max", "reduce_min", "reduce_prod",
    "reduce_sum", "relu", "rem", "reshape", "round", "rsqrt", "scatter", "scatter_add",
    "select", "set_grad_enabled", "sigmoid", "sign", "silu", "sin", "softplus", "sort", "sqrt",
    "squeeze", "sub", "tanh", "topk", "unsqueeze",
]

# The original keeps these in `strideweave.operation` only, out of the top level.
OPERATION_MODULE_ONLY = [
    "BoundOperationCall", "OperationCall", "OperationPlan", "ResolvedInvocation", "VJPContext",
]

# The original's top-level `_CORE_EXPORTS`, without `Module`, `Parameter` and
# `verify_backend` (other subsystems); the top level also has every operation name but
# OPERATION_MODULE_ONLY.
ORIGINAL_CORE = [
    "AwaitMove", "AwaitProjection", "AwaitResidency", "AwaitResult", "BlockScaledDType",
    "BlockDevice", "BlockDeviceCarrier", "CPU", "Carrier", "CarrierDefinition", "CarrierFacet",
    "CompoundDType", "CompositeProvider", "DType", "DTypeCategory", "DependentCarrier",
    "Evictable", "FileBacked", "Generic", "grad", "IndexMap", "Layout", "Level", "LevelExtent",
    "KernelExecutionInterface", "KernelPack", "KernelPattern", "KernelProvider", "Metal", "Node",
    "OperandCapability", "OperationCapability", "Permutation", "Product", "RepresentationRule",
    "RepresentationValidationContext", "ResidencyPlan", "ResidencyPolicy", "Shape",
    "SimpleDType", "StorageProvider", "Stride", "SymbolicBits", "Swizzle", "SwizzleStage",
    "Tensor", "TileSelection", "TileSet", "TiledEvictable", "TiledResidencyFacet",
    "TransferRoute", "Tiler", "Tree", "UnsupportedOperationPlan", "Unsupported", "Whole",
    "WholeExtent", "register_carrier_definition", "register_kernel_pack",
]

ORIGINAL_TOP_LEVEL = ORIGINAL_CORE + [
    name for name in ORIGINAL_OPERATION if name not in OPERATION_MODULE_ONLY
]

ORIGINAL: Dict[str, List[str]] = {
    "strideweave": ORIGINAL_TOP_LEVEL,
    "strideweave.layout": [
        "IndexMap", "Layout", "Node", "Permutation", "Product", "Shape", "Stride", "Swizzle",
        "SwizzleStage", "Tiler", "Tree",
    ],
    "strideweave.tensor": ["Tensor"],
    "strideweave.operation": ORIGINAL_OPERATION,
    "strideweave.carriers": [
        "CPU", "AwaitProjection", "AwaitResidency", "BlockDevice", "BlockDeviceCarrier",
        "BlockScaledDType", "Carrier", "CarrierDefinition", "CarrierFacet", "CompositeProvider",
        "CompoundDType", "DType", "DTypeCategory", "DependentCarrier", "Evictable",
        "EvictableOperation", "FileBacked", "Generic", "KernelExecutionInterface", "KernelPack",
        "KernelPattern", "KernelProvider", "Level", "LevelExtent", "Metal", "OperandCapability",
        "OperationCapability", "RepresentationRule", "RepresentationValidationContext",
        "ResidencyPlan", "ResidencyPolicy", "SimpleDType", "StorageProvider", "SymbolicBits",
        "TileSelection", "TileSet", "TiledEvictable", "TiledResidencyFacet", "TransferRoute",
        "Unsupported", "UnsupportedOperationPlan", "Whole", "WholeExtent",
        "register_carrier_definition", "register_kernel_pack",
    ],
    "strideweave.carriers.extension": [
        "CarrierDefinition", "CarrierFacet", "CompositeProvider", "KernelExecutionInterface",
        "KernelPack", "KernelPattern", "KernelProvider", "PreparedComposite", "PreparedKernel",
        "PreparedTransfer", "ProviderCompletion", "ProviderResult", "StorageProvider",
        "TransferProvider", "TransferRequest", "TransferRoute", "Unsupported",
        "register_carrier_definition", "register_kernel_pack",
    ],
    "strideweave.carriers.move": [
        "AwaitMove", "AwaitResult", "BlockDeviceToCpuMoveOperation",
        "CpuToBlockDeviceMoveOperation", "CpuToFileBackedMoveOperation",
        "CpuToMetalMoveOperation", "ElementwiseMoveOperation", "FileBackedToCpuMoveOperation",
        "MetalToCpuMoveOperation", "MetalToMetalMoveOperation", "MoveOperation",
        "dispatch_move", "move_async", "register_move_operation", "registered_move_operation",
        "unregister_move_operation",
    ],
    "strideweave.carriers.operation_capability": [
        "DependentCarrier", "OperandCapability", "OperationCapability",
        "UnsupportedOperationPlan", "capabilities_for_carrier_class", "matching_capability",
        "register_operation_capabilities", "require_capability", "supports_operation_plan",
        "unsupported_plan_reason",
    ],
    "strideweave.carriers.operation_policy": [
        "ACCUMULATOR_CONFIGURABLE_OPERATIONS", "INT32_MAX", "INT32_MIN",
        "POW_INTEGER_EXPONENT_MAX", "SUPPORTED_ACCUMULATOR_DTYPES", "SUPPORTED_TENSOR_DTYPES",
        "WEAK_SCALAR_PROBES", "Accumulation", "Arithmetic", "OperandPlan", "OperandRole",
        "OperationExecutionOptions", "OperationOverload", "OperationPlan", "OperationSpec",
        "WeakScalarKind", "operation_execution_options", "plan_accumulator_variants",
        "registered_operations", "resolvable_plans", "resolve_operation_plan",
    ],
    # The original checks this list exactly, in this order.
    "strideweave.carriers.tiled_evictable": [
        "AwaitProjection", "AwaitResidency", "ResidencyPlan", "ResidencyPolicy",
        "TileSelection", "TileSet", "TiledEvictable", "TiledResidencyFacet",
    ],
    "strideweave.carriers.file_backed": ["FileBacked"],
    "strideweave.carriers.cpu": ["CPU"],
    "strideweave.carriers.generic": ["Generic"],
    "strideweave.carriers.evictable": ["Evictable", "EvictableOperation"],
    "strideweave.carriers.block_device": ["BlockDevice", "BlockDeviceCarrier"],
    "strideweave.carriers.metal": ["Metal"],
}

# What the original has and this package cannot give without native support (docs/python.md,
# "Module layout", lists each with the original's signature). Each is asserted absent below.
_NEEDS_NATIVE_TOP_LEVEL = [
    # the dtype model's classes
    "BlockScaledDType", "CompoundDType", "DTypeCategory", "Level",
    "LevelExtent", "RepresentationRule",
    "RepresentationValidationContext", "SimpleDType", "SymbolicBits", "Whole", "WholeExtent",
    # the legacy operation classes the native module does not export
    "BroadcastOperation",
    "CpuToMetalMoveOperation", "EvictableOperation",
    "GenericAbsOperation", "GenericAddOperation",
    "GenericArgMaxOperation", "GenericArgMinOperation", "GenericAsStridedOperation",
    "GenericCeilOperation", "GenericClampOperation", "GenericConvGeneralOperation",
    "GenericCosOperation", "GenericCumsumOperation", "GenericDivOperation",
    "GenericELUOperation", "GenericElementwiseMulOperation", "GenericEqOperation",
    "GenericErfOperation", "GenericExpOperation", "GenericExp2Operation",
    "GenericFloorOperation", "GenericGELUOperation", "GenericGatherOperation",
    "GenericLeakyReLUOperation", "GenericLeOperation", "GenericLogicalNotOperation",
    "GenericLogOperation", "GenericLog2Operation", "GenericLtOperation",
    "GenericMatmulOperation", "GenericMaximumOperation", "GenericMinimumOperation",
    "GenericNegOperation", "GenericNeOperation", "GenericPowOperation", "GenericReLUOperation",
    "GenericRecipOperation", "GenericReduceMaxOperation", "GenericReduceMinOperation",
    "GenericReduceProdOperation", "GenericReduceSumOperation", "GenericRemOperation",
    "GenericRoundOperation", "GenericRsqrtOperation", "GenericScalarMulOperation",
    "GenericScatterAddOperation", "GenericScatterOperation", "GenericSelectOperation",
    "GenericSignOperation", "GenericSinOperation", "GenericSiLUOperation",
    "GenericSigmoidOperation", "GenericSoftplusOperation", "GenericSortIndicesOperation",
    "GenericSortValuesOperation", "GenericSqrtOperation", "GenericSubOperation",
    "GenericTanhOperation", "GenericTopKIndicesOperation", "GenericTopKValuesOperation",
    "GenericViewOperation", "MetalToCpuMoveOperation", "MetalToMetalMoveOperation",
    "PermuteOperation", "RearrangeOperation", "ReshapeOperation", "SqueezeOperation",
    "UnsqueezeOperation",
    # functions this runtime has no operation for
    "SortResult", "TopKResult", "argmax", "argmin", "as_strided", "broadcast_in_dim", "ceil",
    "clamp", "conv_general", "cos", "cumsum", "einsum", "elu", "erf", "exp2", "floor", "gather",
    "ge", "gelu", "gt", "leaky_relu", "log2", "logical_not", "ne", "pow", "rearrange", "recip",
    "reduce_min", "reduce_prod", "rem", "round", "rsqrt", "scatter", "scatter_add", "sign",
    "silu", "sin", "softplus", "sort", "squeeze", "topk", "unsqueeze",
]

NEEDS_NATIVE_SUPPORT: Dict[str, List[str]] = {
    "strideweave": _NEEDS_NATIVE_TOP_LEVEL,
    "strideweave.operation": [
        name for name in _NEEDS_NATIVE_TOP_LEVEL if name in ORIGINAL_OPERATION
    ] + ["OperationCall"],
    "strideweave.carriers": [
        "BlockScaledDType", "CompoundDType", "DTypeCategory",
        "EvictableOperation", "Level", "LevelExtent",
        "RepresentationRule", "RepresentationValidationContext", "SimpleDType", "SymbolicBits",
        "Whole", "WholeExtent",
    ],
    "strideweave.carriers.move": [
        "CpuToMetalMoveOperation", "MetalToCpuMoveOperation", "MetalToMetalMoveOperation",
    ],
    "strideweave.carriers.operation_policy": [
        "OperationExecutionOptions", "POW_INTEGER_EXPONENT_MAX", "WEAK_SCALAR_PROBES",
        "WeakScalarKind", "operation_execution_options", "plan_accumulator_variants",
        "resolvable_plans",
    ],
    "strideweave.carriers.evictable": ["EvictableOperation"],
}

# The original's modules this package does not have (none since `strideweave.carriers.metal`
# came with Metal; the check stays for any module a later change drops).
MODULES_NEEDING_NATIVE_SUPPORT: List[str] = []

# Names written in Python in this package (no native object exists for them).
PYTHON_WRITTEN: Dict[str, List[str]] = {
    "strideweave.layout": [
        "IndexMap", "Node", "Permutation", "Product", "Shape", "Stride", "Swizzle",
        "SwizzleStage", "Tiler", "Tree",
    ],
    "strideweave.carriers.tiled_evictable": ["TileSelection", "TileSet"],
    "strideweave.carriers.move": ["AwaitResult", "registered_move_operation"],
    "strideweave.operation": ["broadcast_to", "permute", "reshape"],
    "strideweave.carriers.operation_policy": [
        "ACCUMULATOR_CONFIGURABLE_OPERATIONS", "INT32_MAX", "INT32_MIN",
        "SUPPORTED_ACCUMULATOR_DTYPES", "SUPPORTED_TENSOR_DTYPES", "OperationOverload",
        "OperationSpec", "registered_operations",
    ],
}

# Present in the original and here, for modules where both have the name.
PRESENT: List[Tuple[str, str]] = [
    (module, name)
    for module, names in ORIGINAL.items()
    for name in names
    if name not in NEEDS_NATIVE_SUPPORT.get(module, [])
]


def imported(module: str) -> ModuleType:
    return importlib.import_module(module)


# --- the layout -------------------------------------------------------------------------------


def test_the_lists_partition_the_original_names() -> None:
    for module, missing in NEEDS_NATIVE_SUPPORT.items():
        assert len(set(missing)) == len(missing), module
        public = set(ORIGINAL[module])
        extra = set(missing) - public
        if module == "strideweave.carriers.operation_capability":
            extra -= {
                "carrier_operation_capabilities", "carrier_supports_operation_plan",
                "carrier_unsupported_plan_reason", "require_carrier_capability",
            }
        if module == "strideweave.operation":
            extra -= {"OperationCall"}
        assert extra == set(), module
    for module, names in PYTHON_WRITTEN.items():
        assert set(names) <= {name for m, name in PRESENT if m == module}, module
    assert len(PRESENT) > 200


@pytest.mark.parametrize(("module", "name"), PRESENT)
def test_every_original_name_is_importable_where_the_original_has_it(
    module: str, name: str
) -> None:
    namespace = imported(module)
    assert hasattr(namespace, name), f"{module}.{name}"
    exec(f"from {module} import {name}", {})


@pytest.mark.parametrize(("module", "name"), PRESENT)
def test_every_name_is_the_same_object_everywhere_it_is_exported(module: str, name: str) -> None:
    value = getattr(imported(module), name)
    if name == "KernelExecutionInterface":
        # Written in Python over its native base (docs/python.md, "Module layout").
        assert issubclass(value, native.KernelExecutionInterface) and value is not native.KernelExecutionInterface
    elif hasattr(native, name):
        assert value is getattr(native, name), f"{module}.{name} is not the native object"
    if hasattr(sw, name):
        assert value is getattr(sw, name), f"{module}.{name} is not strideweave.{name}"
    for other, names in ORIGINAL.items():
        if name in names and hasattr(imported(other), name):
            assert getattr(imported(other), name) is value, f"{other}.{name} vs {module}.{name}"


def test_module_all_lists_name_the_original_names_and_resolve() -> None:
    for module, names in ORIGINAL.items():
        namespace = imported(module)
        exported = list(namespace.__all__)
        for name in exported:
            assert hasattr(namespace, name), f"{module}.__all__ names a missing {name}"
        wanted = [n for n in names if (module, n) in PRESENT]
        assert set(wanted) <= set(exported), (module, sorted(set(wanted) - set(exported)))


def test_tiled_evictable_all_is_the_originals_in_order() -> None:
    assert tiled.__all__ == ORIGINAL["strideweave.carriers.tiled_evictable"]


def test_layout_all_is_exactly_the_originals() -> None:
    assert sorted(layout_module.__all__) == sorted(ORIGINAL["strideweave.layout"])


@pytest.mark.parametrize(
    ("module", "name"),
    [(module, name) for module, names in NEEDS_NATIVE_SUPPORT.items() for name in names],
)
def test_names_needing_native_support_are_still_absent(module: str, name: str) -> None:
    namespace = imported(module)
    assert not hasattr(namespace, name), (
        f"{module}.{name} now exists: take it off NEEDS_NATIVE_SUPPORT and test it"
    )
    assert name not in getattr(namespace, "__all__", [])


def test_modules_needing_native_support_are_still_absent() -> None:
    for module in MODULES_NEEDING_NATIVE_SUPPORT:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(module)
    for module in ORIGINAL:
        assert module not in MODULES_NEEDING_NATIVE_SUPPORT
        imported(module)


def test_python_written_names_have_no_native_counterpart() -> None:
    # When the native module gains one of these, the package must re-export it instead.
    for module, names in PYTHON_WRITTEN.items():
        for name in names:
            assert not hasattr(native, name), f"native now has {name}: re-export it in {module}"


def test_the_submodules_load_with_the_package() -> None:
    assert sw.layout is layout_module
    assert sw.tensor is imported("strideweave.tensor")
    assert sw.operation is imported("strideweave.operation")
    for name in [
        "block_device", "cpu", "evictable", "extension", "file_backed", "generic", "gpu", "metal",
        "move", "operation_capability", "operation_policy", "tiled_evictable",
    ]:
        assert getattr(sw.carriers, name) is imported(f"strideweave.carriers.{name}"), name


def test_reexports_name_the_same_objects_across_modules() -> None:
    assert move_module.move_async is sw.move_async is native.move_async
    assert move_module.AwaitMove is sw.AwaitMove
    assert move_module.AwaitResult is sw.AwaitResult
    assert tiled.TileSet is sw.TileSet is sw.carriers.TileSet
    assert tiled.TileSelection is sw.TileSelection is sw.carriers.TileSelection
    assert sw.layout.Shape is sw.Shape and sw.layout.Layout is sw.Layout is native.Layout
    assert sw.tensor.Tensor is sw.Tensor is native.Tensor
    assert sw.operation.permute is sw.permute and sw.operation.reshape is sw.reshape
    assert sw.carriers.operation_capability.OperationCapability is sw.OperationCapability
    assert operation_policy.OperationPlan is sw.OperationPlan is sw.operation.OperationPlan
    assert sw.carriers.cpu.CPU is sw.CPU and sw.carriers.generic.Generic is sw.Generic
    assert sw.carriers.file_backed.FileBacked is sw.FileBacked
    assert sw.carriers.evictable.Evictable is sw.Evictable
    assert sw.carriers.block_device.BlockDeviceCarrier is sw.BlockDeviceCarrier
    assert sw.carriers.metal.Metal is sw.Metal is sw.carriers.Metal


# --- Shape and Stride -------------------------------------------------------------------------


def test_shape_construction_forms_and_values() -> None:
    assert sw.Shape(1, 2, [3, 4]) == sw.Shape([1, 2, [3, 4]])
    assert sw.Shape(3) == sw.Shape([3]) and len(sw.Shape(3)) == 1
    assert sw.Shape() == sw.Shape([]) and sw.Shape().size == 1
    shape = sw.Shape(2, (3, 4))
    assert (shape.depth, shape.size, shape.logical_size, len(shape)) == (2, 24, 24, 2)
    assert shape.top_level.logical_size == 24 and shape.top_level[1].logical_size == 12
    assert shape.top_level == (2, (3, 4))
    assert sw.Shape(2, 3).depth == 1
    assert sw.Shape(sw.Shape(2, (3, 4))) == shape
    assert sw.Shape([sw.Shape(2), sw.Shape(3, 4)]) == sw.Shape(2, (3, 4))
    assert repr(shape) == str(shape) == "Shape<(2, (3, 4))>"
    assert repr(sw.Shape(3)) == "Shape<(3,)>"
    assert shape != sw.Shape(2, 3, 4) and shape != (2, (3, 4))
    assert hash(shape) == hash(sw.Shape([2, [3, 4]]))


def test_shape_indexing_and_integer_form() -> None:
    shape = sw.Shape(2, (3, 4))
    assert shape[0] == sw.Shape(2) and shape[1] == sw.Shape(3, 4)
    assert shape[1:] == sw.Shape([[3, 4]]) and shape[-1] == sw.Shape(3, 4)
    assert int(sw.Shape(5)) == 5 and sw.Shape(5).is_int
    assert not shape.is_int and not sw.Shape([[5]]).is_int
    with pytest.raises(ValueError, match="can not be represented as a integer"):
        int(shape)
    assert [s for s in sw.Shape(2, 3)] == [sw.Shape(2), sw.Shape(3)]


def test_shape_rejects_bad_extents_and_elements() -> None:
    with pytest.raises(ValueError, match="Dimension shape must not be less than 1"):
        sw.Shape(2, 0)
    with pytest.raises(ValueError, match="Dimension shape must not be less than 1"):
        sw.Shape([2, [3, -1]])
    with pytest.raises(ValueError, match="not an integer or a iterable"):
        sw.Shape([2, 1.5])
    with pytest.raises(ValueError, match="not an integer or a iterable"):
        sw.Shape([2, "ab"])
    with pytest.raises(TypeError, match="Shape takes ints"):
        sw.Shape(2.5)


def test_shape_decode_and_encode_first_mode_fastest() -> None:
    shape = sw.Shape(5, [20, 4])
    assert shape.decode(214) == (4, (2, 2))
    assert shape.encode((4, (2, 2))) == 214 == shape.encode((4, 42)) == shape.encode(214)
    assert [sw.Shape(2, 3).decode(i) for i in range(6)] == [
        (0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)
    ]
    for i in range(shape.size):
        assert shape.encode(shape.decode(i)) == i
    with pytest.raises(ValueError, match="Index is not in domain of shape"):
        shape.decode(400)
    with pytest.raises(TypeError, match="Shape index must be an integer"):
        shape.decode(1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Coordinate is not in domain of shape"):
        shape.encode((5, 0))
    with pytest.raises(ValueError, match="does not match shape hierarchy"):
        shape.encode((1, 2, 3))
    with pytest.raises(ValueError, match="does not match shape hierarchy"):
        sw.Shape(2, 3).encode(((0, 0), 1))
    with pytest.raises(TypeError, match="Coordinate must be an integer, tuple, or list"):
        shape.encode("0")


def test_shape_concat_append_and_immutability() -> None:
    assert sw.Shape.concat(sw.Shape(2), sw.Shape(3, 4)) == sw.Shape(2, 3, 4)
    assert sw.Shape.append(sw.Shape(2), sw.Shape(3, 4)) == sw.Shape(2, [3, 4])
    assert sw.Shape.append(sw.Shape(2), sw.Shape(3)) == sw.Shape(2, 3)
    assert sw.Shape.is_iterable([1]) and not sw.Shape.is_iterable(3)
    assert not sw.Shape.is_iterable(iter([1]))  # unsized
    shape = sw.Shape(2, 3)
    with pytest.raises(AttributeError, match="Shape is immutable"):
        shape.depth = 4
    with pytest.raises(AttributeError, match="Shape is immutable"):
        del shape.depth
    assert pickle.loads(pickle.dumps(shape)) == shape
    assert copy.deepcopy(shape) == shape and copy.copy(shape) == shape


def test_stride_construction_values_and_errors() -> None:
    stride = sw.Stride(1, [2, 6])
    assert stride == sw.Stride([1, [2, 6]]) and stride.top_level == (1, (2, 6))
    assert (stride.depth, len(stride)) == (2, 2)
    assert sw.Stride(0).is_int and int(sw.Stride(0)) == 0
    assert stride[1] == sw.Stride(2, 6) and stride[0] == sw.Stride(1)
    assert repr(stride) == "Stride<(1, (2, 6))>" and repr(sw.Stride(1, 2)) == "Stride<(1, 2)>"
    assert hash(stride) == hash(sw.Stride([1, (2, 6)]))
    assert sw.Stride(1, 2) != sw.Shape(1, 2)
    assert sw.Stride.concat(sw.Stride(1), sw.Stride(2, 6)) == sw.Stride(1, 2, 6)
    assert sw.Stride.append(sw.Stride(1), sw.Stride(2, 6)) == sw.Stride(1, [2, 6])
    with pytest.raises(ValueError, match="Stride value must not be negative"):
        sw.Stride(1, -2)
    with pytest.raises(ValueError, match="can not be represented as a integer"):
        int(stride)
    with pytest.raises(AttributeError, match="Stride is immutable"):
        stride.depth = 1
    assert pickle.loads(pickle.dumps(stride)) == stride


def test_shape_and_stride_trees_build_the_native_layout() -> None:
    shape, stride = sw.Shape(2, (3, 4)), sw.Stride(1, (2, 6))
    built = sw.Layout(shape.top_level, stride.top_level)
    assert built == sw.Layout("(2,(3,4)):(1,(2,6))")
    assert built.size == shape.size
    assert sw.Shape(built.shape) == shape and sw.Stride(built.stride) == stride


# --- Node and Tree ----------------------------------------------------------------------------


def test_node_markers_and_ids() -> None:
    assert [node.value for node in (sw.Node.Leaf, sw.Node.Push, sw.Node.Pop)] == [1, 2, 3]
    leaf = sw.Node.id(3)
    assert repr(leaf) == "Node.id(3)" and leaf.id == 3
    assert leaf == sw.Node.id(3) and hash(leaf) == hash(sw.Node.id(3)) and leaf != sw.Node.id(4)
    with pytest.raises(TypeError, match="Node leaf id must be an integer"):
        sw.Node.id("3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Node leaf id must be non-negative"):
        sw.Node.id(-1)
    with pytest.raises(AttributeError):
        leaf.id = 4
    assert pickle.loads(pickle.dumps(leaf)) == leaf


def test_tree_normalizes_leaves_and_measures_itself() -> None:
    tree = sw.Tree(1, sw.Tree(1, 1))
    assert (tree.size, tree.depth) == (3, 2)
    assert tree == (sw.Node.Leaf, (sw.Node.Leaf, sw.Node.Leaf))
    assert isinstance(tree, tuple) and isinstance(tree[1], sw.Tree)
    assert (sw.Tree().size, sw.Tree().depth) == (0, 1)
    assert sw.Tree(sw.Node.id(1), sw.Node.id(0))[0] == sw.Node.id(1)
    with pytest.raises(ValueError, match="Tree can only accept integers or Node.Leaf"):
        sw.Tree(1, (1, 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Tree can only accept integers or Node.Leaf"):
        sw.Tree(sw.Node.Push)
    assert pickle.loads(pickle.dumps(tree)) == tree
    assert copy.deepcopy(tree) == tree


def test_tree_recipes_bake_and_reshape() -> None:
    tree = sw.Tree(1, sw.Tree(1, 1))
    recipe = [sw.Node.Leaf, sw.Node.Push, sw.Node.Leaf, sw.Node.Leaf, sw.Node.Pop]
    assert tree.recipe == recipe == sw.Tree.get_recipe(tree)
    assert tree.reshape(["A", "B", "C"]) == ["A", ["B", "C"]]
    assert sw.Tree.bake(range(5), recipe) == [0, [1, 2]]
    assert sw.Tree.bake_tree(recipe) == tree
    assert sw.Tree(sw.Node.id(2), 1).recipe == [sw.Node.Leaf, sw.Node.Leaf]
    with pytest.raises(ValueError, match="Iterable object to bake does not match recipe length"):
        tree.reshape(["A", "B"])
    assert sw.Tree.norm([1, sw.Tree(1)]) == ([sw.Node.Leaf, sw.Tree(1)], 2, 2)


def test_tiler_is_a_sequence_of_layouts() -> None:
    from typing import Sequence

    assert sw.Tiler == Sequence[sw.Layout]
    assert layout_module.Tiler is sw.Tiler


# --- the index maps ---------------------------------------------------------------------------


def test_index_map_is_abstract_and_checks_its_contract() -> None:
    with pytest.raises(TypeError):
        sw.IndexMap(sw.Shape(2), 2, True)  # type: ignore[abstract]

    class Bad(sw.IndexMap):
        def _index_ordinal(self, index: int) -> int:
            return index + 5

        def _compose(self, inner: sw.IndexMap) -> sw.IndexMap:
            return inner

    with pytest.raises(TypeError, match="shape must be a Shape"):
        Bad((2,), 2, True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="codomain_size must be an integer"):
        Bad(sw.Shape(2), 2.0, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="codomain_size must be positive"):
        Bad(sw.Shape(2), 0, True)
    with pytest.raises(TypeError, match="is_injective must be True, False, or None"):
        Bad(sw.Shape(2), 2, 1)  # type: ignore[arg-type]
    bad = Bad(sw.Shape(2), 8, None)
    assert (bad.size, bad.codomain_size, bad.is_injective, bad.shape) == (2, 8, None, sw.Shape(2))
    assert bad(1) == 6 == bad.index((1,))
    with pytest.raises(ValueError, match="outside its declared codomain"):
        Bad(sw.Shape(2), 6, None)(1)
    with pytest.raises(AttributeError, match="IndexMap is immutable"):
        bad.x = 1
    with pytest.raises(TypeError, match="inner must be an IndexMap"):
        bad.compose(sw.Layout("2:1"))  # type: ignore[arg-type]
    assert not isinstance(sw.Layout("2:1"), sw.IndexMap)  # needs native support


def test_permutation_is_an_injective_table() -> None:
    perm = sw.Permutation([2, 0, 1], 4)
    assert (perm.values, perm.shape, perm.codomain_size, perm.is_injective) == (
        (2, 0, 1), sw.Shape(3), 4, True
    )
    assert [perm(i) for i in range(3)] == [2, 0, 1] and perm.index((2,)) == 1
    with pytest.raises(ValueError, match="Coordinate is not in domain of shape"):
        perm(3)
    with pytest.raises(TypeError, match="values must be a sequence of integers"):
        sw.Permutation(iter([0]), 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one entry"):
        sw.Permutation([], 1)
    with pytest.raises(TypeError, match="values must contain only integers"):
        sw.Permutation([0, True], 2)
    with pytest.raises(TypeError, match="codomain_size must be an integer"):
        sw.Permutation([0], True)
    with pytest.raises(ValueError, match="values must be non-negative"):
        sw.Permutation([-1], 2)
    with pytest.raises(ValueError, match="smaller than codomain_size"):
        sw.Permutation([2], 2)
    with pytest.raises(ValueError, match="pairwise distinct"):
        sw.Permutation([1, 1], 2)


def test_composition_runs_the_inner_map_first_and_checks_bounds() -> None:
    outer = sw.Permutation([2, 0, 1], 3)
    inner = sw.Permutation([1, 2, 0], 3)
    both = outer.compose(inner)
    assert isinstance(both, sw.IndexMap) and both.shape == inner.shape
    assert [both(i) for i in range(3)] == [outer(inner(i)) for i in range(3)] == [0, 1, 2]
    assert both.is_injective is True
    three = both.compose(inner)
    assert [three(i) for i in range(3)] == [outer(inner(inner(i))) for i in range(3)]
    with pytest.raises(ValueError, match="inner codomain exceeds the outer map domain"):
        sw.Permutation([0, 1], 2).compose(sw.Permutation([3], 4))


def test_product_combines_children_mode_by_mode() -> None:
    first, second = sw.Permutation([2, 0, 1], 3), sw.Permutation([1, 0], 2)
    product = sw.Product(first, second)
    assert product.children == (first, second)
    assert product.shape == sw.Shape(3, 2) and product.target_shape == sw.Shape(3, 2)
    assert product.codomain_size == 6 and product.is_injective is True
    assert [product(i) for i in range(6)] == [5, 3, 4, 2, 0, 1]
    assert product((1, 1)) == first(1) + 3 * second(1)
    nested = sw.Product(product, sw.Permutation([0], 1))
    assert nested.target_shape == sw.Shape([3, 2], 1)
    with pytest.raises(ValueError, match="Product requires at least two children"):
        sw.Product(first)
    with pytest.raises(TypeError, match="Product children must be IndexMap values"):
        sw.Product(first, 3)  # type: ignore[arg-type]


def test_swizzles_xor_bit_fields_and_cancel_when_composed() -> None:
    stage = sw.SwizzleStage(bits=2, base=0, shift=2)
    assert repr(stage) == "SwizzleStage(bits=2, base=0, shift=2)"
    assert stage == sw.SwizzleStage(2, 0, 2) and hash(stage) == hash(sw.SwizzleStage(2, 0, 2))
    swizzle = sw.Swizzle(sw.Shape(16), stage)
    assert swizzle(0b1101) == 0b1110 and swizzle.stages == (stage,)
    assert sorted(swizzle(i) for i in range(16)) == list(range(16))
    back = sw.Swizzle(sw.Shape(16), sw.SwizzleStage(bits=1, base=0, shift=-2))
    assert back(0b0001) == 0b0101
    twice = swizzle.compose(swizzle)
    assert isinstance(twice, sw.Swizzle) and twice.stages == ()
    assert [twice(i) for i in range(16)] == list(range(16))
    assert sw.Permutation(list(range(16)), 16).compose(twice).shape == sw.Shape(16)
    with pytest.raises(FrozenInstanceError):
        stage.bits = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match="bits must be an integer"):
        sw.SwizzleStage(True, 0, 2)
    with pytest.raises(ValueError, match="bits must be positive"):
        sw.SwizzleStage(0, 0, 2)
    with pytest.raises(ValueError, match="base must be non-negative"):
        sw.SwizzleStage(1, -1, 2)
    with pytest.raises(ValueError, match="shift must be non-zero"):
        sw.SwizzleStage(1, 0, 0)
    with pytest.raises(ValueError, match="must not overlap"):
        sw.SwizzleStage(2, 0, 1)
    with pytest.raises(ValueError, match="power of two"):
        sw.Swizzle(sw.Shape(12))
    with pytest.raises(ValueError, match="exceed the domain bit width"):
        sw.Swizzle(sw.Shape(8), stage)
    with pytest.raises(TypeError, match="every stage must be a SwizzleStage"):
        sw.Swizzle(sw.Shape(8), (1, 0, 1))  # type: ignore[arg-type]


# --- tiles ------------------------------------------------------------------------------------


class OneShot:
    """An iterable that may be iterated once."""

    def __init__(self, values: List[Any]) -> None:
        self.values = values
        self.iterations = 0

    def __iter__(self) -> Iterator[Any]:
        self.iterations += 1
        assert self.iterations == 1, "iterated twice"
        return iter(self.values)


def test_tile_selection_orders_first_mode_fastest_and_keeps_axis_order() -> None:
    selection = sw.TileSelection(([7, 2], [4, 9]))
    assert selection.per_axis == ((7, 2), (4, 9))
    assert selection.coordinates == ((7, 4), (2, 4), (7, 9), (2, 9))
    assert (selection.rank, selection.compact_grid_shape) == (2, (2, 2))
    assert selection.tile_set == sw.TileSet(selection.coordinates)
    assert selection.tile_set.coordinates == ((2, 4), (7, 4), (2, 9), (7, 9))
    axes = [OneShot([2, 7, 19]), OneShot([4])]
    outer = OneShot(axes)
    assert sw.TileSelection(outer).per_axis == ((2, 7, 19), (4,))
    assert [axis.iterations for axis in axes] == [1, 1]


def test_tile_selection_errors() -> None:
    with pytest.raises(TypeError, match="per_axis must be a finite iterable"):
        sw.TileSelection(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"per_axis\[0\] must be a finite iterable"):
        sw.TileSelection((None,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one axis"):
        sw.TileSelection(())
    with pytest.raises(ValueError, match=r"per_axis\[1\] must not be empty"):
        sw.TileSelection(((0,), ()))
    for bad in (1.0, True, "1", None):
        with pytest.raises(TypeError, match="tile coordinates must be integers"):
            sw.TileSelection(((bad,),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        sw.TileSelection(((-1,),))
    with pytest.raises(ValueError, match="duplicate"):
        sw.TileSelection(((2, 2),))
    selection = sw.TileSelection(([2, 0], [1]))
    selection._validate_grid_shape((3, 2))
    with pytest.raises(ValueError, match="rank"):
        selection._validate_grid_shape((3,))
    with pytest.raises(ValueError, match="outside"):
        selection._validate_grid_shape((2, 2))


def test_tile_set_sorts_and_validates() -> None:
    tiles = sw.TileSet([(0, 1), (1, 0), (0, 0)])
    assert tiles.coordinates == ((0, 0), (1, 0), (0, 1))
    assert sw.TileSet().coordinates == ()
    sw.TileSet()._validate_grid_shape((2, 4, 5))
    with pytest.raises(TypeError, match="coordinates must be a finite iterable"):
        sw.TileSet(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"coordinates\[0\] must be a finite iterable"):
        sw.TileSet((3,))  # type: ignore[arg-type]
    for bad in (1.0, float("nan"), "1", True):
        with pytest.raises(TypeError, match="components must be integers"):
            sw.TileSet(((bad,),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        sw.TileSet(((-1,),))
    with pytest.raises(ValueError, match="same rank"):
        sw.TileSet(((0,), (0, 1)))
    with pytest.raises(ValueError, match="duplicate"):
        sw.TileSet(((0, 1), (0, 1)))
    ragged = sw.TileSet(((0, 1), (2, 0)))
    ragged._validate_grid_shape((3, 2))
    with pytest.raises(ValueError, match="rank"):
        ragged._validate_grid_shape((3,))
    with pytest.raises(ValueError, match="outside"):
        ragged._validate_grid_shape((2, 2))


def test_tile_values_are_immutable_equal_hashable_and_repr_stable() -> None:
    selection = sw.TileSelection(([2, 7], [4]))
    same = sw.TileSelection(((2, 7), (4,)))
    assert selection == same and hash(selection) == hash(same)
    assert repr(selection) == "TileSelection(per_axis=((2, 7), (4,)))"
    assert repr(sw.TileSet([(1,), (0,)])) == "TileSet(coordinates=((0,), (1,)))"
    assert hash(sw.TileSet([(1,), (0,)])) == hash(sw.TileSet([(0,), (1,)]))
    with pytest.raises(FrozenInstanceError):
        selection.per_axis = ((0,),)  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        sw.TileSet().coordinates = ()  # type: ignore[misc]


def test_tile_coordinates_drive_the_native_residency_calls() -> None:
    carrier = sw.TiledEvictable(sw.CPU(0), sw.CPU(6), [1, 2], [3, 1])
    facet = carrier.require_facet(sw.TiledResidencyFacet)
    tiles = sw.TileSelection(([0], [1])).tile_set
    handle = facet.promote_async(tiles.coordinates)
    assert isinstance(handle, sw.AwaitResult)
    handle.wait()
    assert facet.tiles_at("primary") == tiles.coordinates
    assert sw.ResidencyPlan(promote=tiles.coordinates).promote == ((0, 1),)


# --- movement ---------------------------------------------------------------------------------


def test_await_result_is_the_base_of_the_frameworks_handles() -> None:
    source = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0]), (2,))
    handle = sw.move_async(source, sw.CPU(2))
    assert isinstance(handle, sw.AwaitResult) and isinstance(handle, sw.AwaitMove)
    assert issubclass(sw.AwaitMove, sw.AwaitResult)
    assert issubclass(sw.AwaitResidency, sw.AwaitResult)
    assert not hasattr(sw.AwaitResult, "__await__")
    assert handle.wait() is handle.wait()
    with pytest.raises(TypeError, match="created by the framework"):
        sw.AwaitResult()


def test_registered_move_operation_holds_for_the_block_only() -> None:
    from strideweave.carriers.move import registered_move_operation

    # (Read by name: `_native.pyi` does not declare the native move registry yet.)
    ElementwiseMoveOperation: Any = getattr(move_module, "ElementwiseMoveOperation")
    dispatch_move: Any = getattr(move_module, "dispatch_move")

    class Spy(ElementwiseMoveOperation):  # type: ignore[misc]
        pass

    with registered_move_operation(sw.Generic, sw.CPU, Spy) as entered:
        assert entered is Spy
        assert dispatch_move(sw.Generic, sw.CPU) is Spy
        source = sw.Tensor.compact(sw.Generic([1.0, 2.0], dtype=sw.DType.Float32), (2,))
        assert sw.move(source, sw.CPU(2)).to_list() == [1.0, 2.0]
    assert dispatch_move(sw.Generic, sw.CPU) is ElementwiseMoveOperation
    with pytest.raises(KeyError, match="no move operation is registered"):
        with registered_move_operation(sw.Generic, sw.CPU, Spy):
            raise KeyError("no move operation is registered, raised in the block")
    assert dispatch_move(sw.Generic, sw.CPU) is ElementwiseMoveOperation


# --- operations -------------------------------------------------------------------------------


def test_view_functions_take_shapes_like_the_originals() -> None:
    x = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), (2, 3))
    assert sw.permute(x, 1, 0)[2, 1] == 6.0
    assert sw.permute(x, 1, 0).layout == x.permute(1, 0).layout
    assert sw.reshape(x, sw.Shape(3, 2)).layout == x.reshape((3, 2)).layout
    assert sw.reshape(x, sw.Shape(6)).to_list() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    row = sw.Tensor.compact(sw.CPU.from_values([3.0, 4.0]), (1, 2))
    widened = sw.broadcast_to(row, sw.Shape([3, 2]))
    assert [widened[i, 1] for i in range(3)] == [4.0, 4.0, 4.0]
    assert widened.layout == sw.Layout("(3,2):(0,1)")
    with pytest.raises(TypeError, match="shape must be a Shape"):
        sw.reshape(x, (3, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="target must be a Shape"):
        sw.broadcast_to(row, (3, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tensor must be a Tensor"):
        sw.permute([1.0], 0)  # type: ignore[arg-type]


def test_operation_policy_constants_state_what_planning_does() -> None:
    assert (operation_policy.INT32_MIN, operation_policy.INT32_MAX) == (-(2**31), 2**31 - 1)
    four = sw.Tensor.compact(sw.CPU.from_values([1.0, 2.0, 3.0, 4.0]), (2, 2))
    for dtype in operation_policy.SUPPORTED_ACCUMULATOR_DTYPES:
        assert sw.reduce_sum(four, dtype).to_list() == [4.0, 6.0]
        assert sw.matmul(four, four, dtype).dtype() is sw.DType.Float32
    for dtype in (sw.DType.Int32, sw.DType.Bool):
        with pytest.raises(NotImplementedError, match="accumulator dtypes are Float32 and Float64"):
            sw.reduce_sum(four, dtype)
    configurable = operation_policy.ACCUMULATOR_CONFIGURABLE_OPERATIONS
    assert configurable == frozenset({"reduce_sum", "matmul"})
    for dtype in operation_policy.SUPPORTED_TENSOR_DTYPES:
        t = sw.Tensor.compact(sw.CPU(2, dtype=dtype), (2,))
        assert sw.add(t, t).dtype() is dtype
    flags = sw.Tensor.compact(sw.CPU(2, dtype=sw.DType.Bool), (2,))
    with pytest.raises(TypeError, match="does not compute on Bool"):
        sw.add(flags, flags)
    largest = sw.CPU.from_values([operation_policy.INT32_MAX], dtype=sw.DType.Int32)
    big = sw.Tensor.compact(largest, (1,))
    with pytest.raises(OverflowError):
        sw.add(big, big)
