"""The GPU from Python (issue #34, item 5): the seed's Metal row and strideweave-wgpu's Gpu
carrier.

`Metal` is the shipped, closed, definition-free class the seed lists. Its carriers keep their
slots in a Gpu carrier on the Metal adapter; where wgpu finds none (every machine these tests
run on) the constructor raises NotImplementedError after checking its arguments. `Gpu` is
strideweave-wgpu's definition-backed class on whatever adapter wgpu finds; Mesa's llvmpipe
software Vulkan driver gives one on a machine without a GPU. Where there is no adapter, the
tests that need one print `SKIPPED: <reason>` and are skipped, as the Rust Gpu tests do.
"""

import math
from typing import Iterator, List

import pytest

import strideweave as sw
import strideweave._native as native
import strideweave.carriers as carriers
import strideweave.carriers.gpu as gpu_module
import strideweave.carriers.metal as metal_module

from authoring_helpers import ListStorage, RingInterface, elementwise, neg_plan
from conftest import cpu_tensor, flat

F32, I32, BOOL = sw.DType.Float32, sw.DType.Int32, sw.DType.Bool


def skip_without(adapter: str, test: str, error: NotImplementedError) -> None:
    print(f"SKIPPED: {test}: {error}")
    pytest.skip(f"no {adapter}: {error}")


@pytest.fixture
def gpu(request: pytest.FixtureRequest) -> Iterator[str]:
    """The Gpu class's adapter; the test is skipped (printing `SKIPPED:`) without one."""
    try:
        adapter = sw.Gpu.adapter()
    except NotImplementedError as error:
        skip_without("GPU adapter", request.node.name, error)
    yield adapter


def gpu_tensor(values: List[float], shape: object, dtype: sw.DType = F32) -> sw.Tensor:
    return sw.Tensor.compact(sw.Gpu.from_values(values, dtype=dtype), shape)


def close(got: List[float], expected: List[float], tolerance: float = 1e-5) -> bool:
    return len(got) == len(expected) and all(
        math.isclose(g, e, rel_tol=tolerance, abs_tol=tolerance) for g, e in zip(got, expected)
    )


# --- Metal ------------------------------------------------------------------------------------


def test_metal_is_one_object_everywhere() -> None:
    assert sw.Metal is carriers.Metal is metal_module.Metal is native.Metal
    assert sw.carriers.metal is metal_module and metal_module.__all__ == ["Metal"]
    assert "Metal" in sw.__all__ and "Metal" in carriers.__all__
    assert issubclass(sw.Metal, sw.Carrier)
    assert sw.Metal.__module__ == "strideweave"


def test_metal_checks_its_arguments_before_looking_for_a_device() -> None:
    with pytest.raises(TypeError, match="^Metal size must be an int, got float$"):
        sw.Metal(2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^Metal size must be an int, got bool$"):
        sw.Metal(True)
    with pytest.raises(ValueError, match="^Metal size must be a non-negative int, got -1$"):
        sw.Metal(-1, dtype=sw.DType.Float64)
    with pytest.raises(TypeError, match="^Metal mutable must be a bool, got int$"):
        sw.Metal(2, mutable=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^Metal dtype must be a DType, got str$"):
        sw.Metal(2, dtype="Float32")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^Metal dtype must be Float32, Int32 or Bool, got Float64$"):
        sw.Metal(2, dtype=sw.DType.Float64)
    with pytest.raises(TypeError, match="^Metal empty must be a bool, got int$"):
        sw.Metal(2, empty=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="required positional argument"):
        sw.Metal()  # type: ignore[call-arg]


def test_metal_without_a_metal_adapter_is_not_implemented() -> None:
    try:
        adapter = sw.Metal.adapter()
    except NotImplementedError as error:
        message = str(error)
    else:
        print(f"SKIPPED: test_metal_without_a_metal_adapter_is_not_implemented: {adapter}")
        pytest.skip(f"this machine has a Metal adapter: {adapter}")
    assert message.startswith(
        "Metal needs an Apple GPU with the Metal API; none was found (wgpu found no Metal "
        "adapter: "
    ), message
    for dtype in (F32, I32, BOOL):
        with pytest.raises(NotImplementedError) as raised:
            sw.Metal(4, dtype=dtype, mutable=False, empty=True)
        assert str(raised.value) == message
    # Nothing of the refused construction lingers: the error is the same every time.
    with pytest.raises(NotImplementedError, match="^Metal needs an Apple GPU"):
        sw.Metal(0)


def test_metal_is_closed_like_the_other_shipped_classes() -> None:
    with pytest.raises(TypeError) as shipped:
        type("SubCPU", (sw.CPU,), {})
    with pytest.raises(TypeError) as metal:
        type("SubMetal", (sw.Metal,), {})
    assert str(metal.value) == str(shipped.value).replace("CPU", "Metal")
    assert "Metal is a closed carrier implementation and cannot be subclassed" in str(metal.value)


def test_metal_is_shipped_and_definition_free() -> None:
    # Seed: "Generic, CPU, FileBacked, Evictable, BlockDeviceCarrier, and Metal SHALL remain
    # definition-free"; kernel packs, definitions and capability declarations are refused.
    definition = sw.CarrierDefinition(ListStorage().provider())
    with pytest.raises(
        TypeError, match="^Metal is a shipped carrier class; it cannot take a carrier definition$"
    ):
        sw.register_carrier_definition(sw.Metal, definition)
    ring = RingInterface()
    pattern = sw.KernelPattern(
        sw.operation_definition("neg"), [neg_plan()], "neg", elementwise(lambda x: -x), 0
    )
    with pytest.raises(
        TypeError, match="Metal is a shipped definition-free carrier class and takes no kernel packs"
    ):
        sw.register_kernel_pack(sw.KernelPack("ns", "1", sw.Metal, ring, [pattern]))
    register = sw.carriers.operation_capability.register_operation_capabilities
    with pytest.raises(TypeError, match="^Metal is a closed shipped carrier class; implement a sibling"):
        register(sw.Metal, [neg_plan()])
    # What a Metal carrier executes is its device carrier's, per instance: the class
    # declares nothing.
    assert sw.carriers.operation_capability.capabilities_for_carrier_class(sw.Metal) == ()
    # Refused registrations change nothing: the refusals repeat word for word.
    with pytest.raises(TypeError, match="^Metal is a shipped carrier class"):
        sw.register_carrier_definition(sw.Metal, definition)


def test_metal_on_a_metal_adapter_stores_and_computes() -> None:
    # Runs only on an Apple GPU (none here): the Metal carrier over the Metal adapter.
    try:
        sw.Metal.adapter()
    except NotImplementedError as error:
        skip_without("Metal adapter", "test_metal_on_a_metal_adapter_stores_and_computes", error)
    carrier = sw.Metal(4)
    assert type(carrier) is sw.Metal and carrier.class_name == "Metal"
    for i, v in enumerate([1.0, -2.0, 3.5, 4.0]):
        carrier.set_value(i, v)
    x = sw.Tensor.compact(carrier, (4,))
    y = sw.add(x, x)
    assert type(y.carrier) is sw.Metal and y.to_list() == [2.0, -4.0, 7.0, 8.0]
    assert sw.move(y, sw.CPU(4)).to_list() == [2.0, -4.0, 7.0, 8.0]


# --- the Gpu carrier --------------------------------------------------------------------------


def test_gpu_and_gpuhost_are_one_object_everywhere() -> None:
    assert sw.Gpu is carriers.Gpu is gpu_module.Gpu is native.Gpu
    assert sw.GpuHost is carriers.GpuHost is gpu_module.GpuHost is native.GpuHost
    assert sw.carriers.gpu is gpu_module
    for cls in (sw.Gpu, sw.GpuHost):
        assert issubclass(cls, sw.Carrier)
        with pytest.raises(TypeError, match=f"^{cls.__name__} is a closed carrier implementation"):
            type("Sub", (cls,), {})


def test_gpu_checks_its_arguments_before_looking_for_a_device() -> None:
    with pytest.raises(ValueError, match="^Gpu size must be a non-negative int, got -2$"):
        sw.Gpu(-2)
    with pytest.raises(ValueError, match="^Gpu dtype must be Float32, Int32 or Bool, got Float64$"):
        sw.Gpu(2, dtype=sw.DType.Float64)
    with pytest.raises(TypeError, match="^Gpu mutable must be a bool, got str$"):
        sw.Gpu(2, mutable="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^GpuHost size must be an int, got str$"):
        sw.GpuHost("2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Gpu.from_values values\[1\] must be a bool, int or float, got str$"):
        sw.Gpu.from_values([1.0, "x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="^Gpu.upload tensor must be a Tensor, got list$"):
        sw.Gpu.upload([1.0])  # type: ignore[arg-type]


def test_gpu_carriers_store_values_on_the_device(gpu: str) -> None:
    assert gpu == sw.Gpu.adapter() and "(" in gpu
    carrier = sw.Gpu(3)
    assert type(carrier) is sw.Gpu and carrier.class_name == "Gpu"
    assert (carrier.size(), carrier.dtype(), carrier.version) == (3, F32, 0)
    assert [carrier.get_value(i) for i in range(3)] == [0.0, 0.0, 0.0]
    carrier.set_value(1, 0.1)
    assert carrier.get_value(1) == 0.10000000149011612 and carrier.version == 1
    assert [carrier.supports_storage_dtype(d) for d in (F32, I32, BOOL, sw.DType.Float64)] == [
        True, True, True, False,
    ]
    ints = sw.Gpu.from_values([1, -2, 2**31 - 1], dtype=I32)
    assert [ints.get_value(i) for i in range(3)] == [1, -2, 2**31 - 1] and ints.dtype() is I32
    flags = sw.Gpu.from_values([True, False], dtype=BOOL)
    assert [flags.get_value(i) for i in range(2)] == [True, False]
    assert sw.Gpu.from_values([]).size() == 0
    with pytest.raises(OverflowError):
        sw.Gpu.from_values([2**31], dtype=I32)
    frozen = sw.Gpu(2, mutable=False)
    with pytest.raises(RuntimeError, match="immutable"):
        frozen.set_value(0, 1.0)
    carrier.release()
    assert carrier.is_released() and carrier.size() == 0
    with pytest.raises(RuntimeError, match="released"):
        carrier.get_value(0)


def test_gpu_tensors_go_up_by_upload_and_come_down_by_move(gpu: str) -> None:
    source = cpu_tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3))
    view = source[:, 1:]
    up = sw.Gpu.upload(view)
    assert type(up.carrier) is sw.Gpu and up.layout == view.layout
    assert up.to_list() == view.to_list() == [[3.0, 5.0], [4.0, 6.0]]
    assert not source.carrier.is_released()  # an upload is a copy
    # The CPU is definition-free and declares no route to the Gpu class.
    with pytest.raises(NotImplementedError, match="^no move route from CPU to Gpu"):
        sw.move(cpu_tensor([1.0, 2.0], (2,)), sw.Gpu(2))
    # Gpu -> CPU is the class's own route; the source is released.
    down = sw.move(up, sw.CPU(up.carrier.size()))
    assert type(down.carrier) is sw.CPU and down.to_list() == [[3.0, 5.0], [4.0, 6.0]]
    assert up.carrier.is_released()
    handle = sw.move_async(gpu_tensor([7.0, 8.0], (2,)), sw.CPU(2))
    assert handle.wait().to_list() == [7.0, 8.0] and handle.done
    # Gpu -> GpuHost -> Gpu -> CPU, each on a route its source class declares.
    host = sw.move(gpu_tensor([1.5, -2.5], (2,)), sw.GpuHost(2))
    assert type(host.carrier) is sw.GpuHost and host.to_list() == [1.5, -2.5]
    back_up = sw.move(host, sw.Gpu(2))
    assert type(back_up.carrier) is sw.Gpu and back_up.to_list() == [1.5, -2.5]
    ints = sw.move(sw.Tensor.compact(sw.GpuHost.from_values([3, 4], dtype=I32), (2,)), sw.CPU(2, dtype=I32))
    assert ints.to_list() == [3, 4]


def test_gpu_runs_the_builtins_as_the_cpu_does(gpu: str) -> None:
    values = [1.0, -2.0, 3.0, -4.0, 5.0, 6.5]
    x, dense = gpu_tensor(values, (2, 3)), cpu_tensor(values, (2, 3))
    exact = {
        "add": lambda t: sw.add(t, t),
        "sub": lambda t: sw.sub(t, sw.relu(t)),
        "mul": lambda t: sw.mul(t, 2.0),
        "neg": sw.neg,
        "abs": sw.abs,
        "relu": sw.relu,
        "maximum": lambda t: sw.maximum(t, sw.neg(t)),
        "reduce_max": sw.reduce_max,
        "reduce_sum": sw.reduce_sum,
        "matmul": lambda t: sw.matmul(t, t),
    }
    for name, op in exact.items():
        result = op(x)
        assert type(result.carrier) is sw.Gpu, name
        assert result.to_list() == op(dense).to_list(), name
    for name, fn in {"exp": sw.exp, "tanh": sw.tanh, "sigmoid": sw.sigmoid}.items():
        assert close(flat(fn(x).to_list()), flat(fn(dense).to_list())), name
    less = sw.lt(x, 0.0)
    assert less.dtype() is BOOL and type(less.carrier) is sw.Gpu
    assert less.to_list() == [[False, False, False], [True, True, False]]
    picked = sw.select(less, x, 0.0)
    assert picked.to_list() == [[0.0, 0.0, 0.0], [-2.0, -4.0, 0.0]]
    big = gpu_tensor([2**31 - 1, 1], (2,), I32)
    with pytest.raises(OverflowError, match="'add' overflows Int32"):
        sw.add(big, big)
    # Int32 sums are exact and only the narrowing is checked: MAX + 1 leaves Int32.
    with pytest.raises(OverflowError, match="'reduce_sum' overflows Int32"):
        sw.reduce_sum(sw.Tensor.compact(big.carrier, (1, 2)))
    # A CPU operand is another class: the call is refused before anything runs.
    with pytest.raises(TypeError, match="CPU"):
        sw.add(x, dense)


def test_gpu_is_definition_backed_and_keeps_its_own_definition(gpu: str) -> None:
    capabilities = sw.Gpu(1).operation_capabilities()
    assert any(c.operation == "matmul" for c in capabilities)
    assert sw.Gpu(1).operation_capabilities() == capabilities
    with pytest.raises(
        TypeError, match="^Gpu is strideweave-wgpu's carrier class and has its own carrier definition"
    ):
        sw.register_carrier_definition(sw.Gpu, sw.CarrierDefinition(ListStorage().provider()))
    register = sw.carriers.operation_capability.register_operation_capabilities
    with pytest.raises(TypeError, match="definition-backed"):
        register(sw.Gpu, [neg_plan()])
    query = sw.carriers.operation_capability.capabilities_for_carrier_class
    assert query(sw.Gpu, "add") == sw.Gpu(1).operation_capabilities("add") != ()
    assert sw.GpuHost(1).operation_capabilities() == ()  # storage only
    # A pack for Gpu is the core's decision: its provider's interface is the crate's, in Rust.
    pattern = sw.KernelPattern(
        sw.operation_definition("neg"), [neg_plan()], "neg", elementwise(lambda x: -x), 0
    )
    with pytest.raises(TypeError, match="GpuInterface version 'strideweave-wgpu-1' is not a Python"):
        sw.register_kernel_pack(sw.KernelPack("ns", "1", sw.Gpu, RingInterface(), [pattern]))
    with pytest.raises(TypeError, match="GpuHost is a storage-only carrier class"):
        sw.register_kernel_pack(sw.KernelPack("ns", "1", sw.GpuHost, RingInterface(), [pattern]))


def test_tiled_evictable_streams_gpuhost_tiles_onto_a_gpu_primary(gpu: str) -> None:
    values = [(i - 23) * 0.375 + 0.1 for i in range(64)]
    tiled = sw.TiledEvictable(sw.Gpu(0), sw.GpuHost.from_values(values), [2, 2], [4, 4])
    x = sw.Tensor.compact(tiled, (8, 8))
    dense = cpu_tensor(values, (8, 8))
    for name, op in {"add": lambda t: sw.add(t, t), "relu": sw.relu}.items():
        result = op(x)
        assert type(result.carrier) is sw.Gpu, name
        assert result.to_list() == op(dense).to_list(), name
    assert close(sw.reduce_sum(x).to_list(), sw.reduce_sum(dense).to_list(), 1e-4)
    product = sw.matmul(x, x)
    assert type(product.carrier) is sw.Gpu
    assert close(flat(product.to_list()), flat(sw.matmul(dense, dense).to_list()), 1e-4)
    facet = tiled.require_facet(sw.TiledResidencyFacet)
    assert facet.tiles_at("secondary") == ((0, 0), (1, 0), (0, 1), (1, 1))
    facet.promote_async([(1, 0)]).wait()
    assert tiled.tile_state([1, 0]).location == "primary"
    facet.evict_async([(1, 0)]).wait()
    assert tiled.tile_state([1, 0]).location == "secondary"
    assert x.to_list() == dense.to_list() and x.version == 0


def test_tiled_evictable_over_a_gpu_and_the_cpu_runs_while_resident(gpu: str) -> None:
    # The CPU cannot feed a Gpu primary (no route CPU -> Gpu): tiles run on the Gpu while
    # they are resident, evict to the CPU, and do not come back.
    values = [float(i) for i in range(16)]
    tiled = sw.TiledEvictable(sw.Gpu.from_values(values), sw.CPU(0), [2, 2], [2, 2])
    x = sw.Tensor.compact(tiled, (4, 4))
    doubled = sw.add(x, x)
    assert type(doubled.carrier) is sw.Gpu
    assert flat(doubled.to_list()) == flat(cpu_tensor([2 * v for v in values], (4, 4)).to_list())
    facet = tiled.require_facet(sw.TiledResidencyFacet)
    facet.evict_async([(0, 0)]).wait()
    assert tiled.tile_state([0, 0]).location == "secondary"
    with pytest.raises(NotImplementedError, match="CPU to Gpu"):
        facet.promote_async([(0, 0)]).wait()
    assert tiled.tile_state([0, 0]).location == "secondary"
    assert x.to_list() == cpu_tensor(values, (4, 4)).to_list()


def test_evictable_moves_a_gpu_carrier_to_host_memory_and_back(gpu: str) -> None:
    carrier = sw.Evictable(sw.Gpu.from_values([1.0, 2.0, 3.0]), sw.GpuHost(0))
    carrier.evict()
    assert carrier.is_evicted() and type(carrier.secondary) is sw.GpuHost
    carrier.promote()
    assert not carrier.is_evicted()
    t = sw.Tensor.compact(carrier, (3,))
    assert t.to_list() == [1.0, 2.0, 3.0]
    assert sw.neg(t).to_list() == [-1.0, -2.0, -3.0]
