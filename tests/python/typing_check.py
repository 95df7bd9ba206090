"""Checked by `mypy --strict` only: the stubs accept the documented calls and give the
documented types."""

from typing import Tuple, Type

import strideweave as sw
from strideweave.carriers.extension import ProviderCompletion


def typed_calls() -> None:
    layout: sw.Layout = sw.Layout("(2,3):(1,2)")
    carrier: sw.CPU = sw.CPU(6, dtype=sw.DType.Float32)
    t: sw.Tensor = sw.Tensor(carrier, 0, layout)
    total: sw.Tensor = sw.reduce_sum(t + t * 2.0, sw.DType.Float64)
    size: int = layout.cosize + total.size()
    with sw.no_grad():
        handle: ProviderCompletion[sw.Tensor] = sw.move_async(t, sw.CPU(6))
    moved: sw.Tensor = handle.wait()
    facet = sw.TiledEvictable(sw.CPU(0), sw.CPU(6), [1, 2], [3, 1]).facet(sw.TiledResidencyFacet)
    if facet is not None:
        state: sw.TileState = facet.tile_state((0, 0))
        print(state.location)
    print(size, moved.version)


class Prefetch(sw.ResidencyPolicy):
    def plan(self, required: "tuple[tuple[int, ...], ...]", purpose: str) -> sw.ResidencyPlan:
        return sw.ResidencyPlan(promote=required)

    def primary_capacity(self) -> "int | None":
        return 2


def typed_interop_calls(path: str) -> None:
    tiled = sw.TiledEvictable(sw.CPU(0), sw.CPU(6), [1, 2], [3, 1], residency_policy=Prefetch())
    plan: sw.ResidencyPlan = Prefetch().plan(((0, 0),), "operation")
    tiles: "tuple[tuple[int, ...], ...]" = plan.promote + plan.retain + plan.evict
    device: sw.BlockDevice = sw.BlockDevice.open(path)
    carrier: sw.BlockDeviceCarrier = device.allocate(4, dtype=sw.DType.Float32)
    offset: int = carrier.device_offset_bytes + device.free_bytes
    t: sw.Tensor = sw.from_numpy(object(), copy=False)
    print(tiled.class_name, tiles, offset, t.__array__(None, copy=True))


def typed_composite() -> None:
    from strideweave.carriers import extension as ext

    class Tiered(sw.DependentCarrier):
        dependency: sw.Carrier

    def capabilities(carrier: Tiered) -> Tuple[sw.OperationCapability, ...]:
        return carrier.dependency.operation_capabilities()

    def result_carriers(carrier: Tiered, invocation: ext.ResolvedInvocation) -> Tuple[Type[sw.Carrier], ...]:
        return (sw.CPU,) * len(invocation.results)

    def prepare(carrier: Tiered, invocation: ext.ResolvedInvocation) -> ext.PreparedComposite:
        operands = invocation.operands
        return ext.PreparedComposite(lambda: ext.ProviderResult([sw.neg(t) for t in operands if isinstance(t, sw.Tensor)]))

    provider: sw.CompositeProvider = sw.CompositeProvider(capabilities, result_carriers, prepare)
    rejection: sw.Unsupported = sw.Unsupported("no")
    definition = ext.CarrierDefinition(
        sw.StorageProvider(lambda c, d: True, lambda c: 0, lambda c, n: None, lambda c: None, lambda c, i: 0.0, lambda c, i, v: None),
        composite=provider,
    )
    sw.register_carrier_definition(Tiered, definition)
    identity = sw.KernelExecutionInterface("1").compatibility_identity
    print(rejection.reason, identity[1], definition.composite is provider)


def gpu_calls() -> None:
    from strideweave.carriers.metal import Metal

    adapter: str = sw.Gpu.adapter()
    carrier: sw.Gpu = sw.Gpu(4, dtype=sw.DType.Int32, mutable=False, empty=True)
    filled: sw.Gpu = sw.Gpu.from_values([1.0, 2.0], dtype=sw.DType.Float32)
    up: sw.Tensor = sw.Gpu.upload(sw.Tensor.compact(sw.CPU(2), (2,)))
    host: sw.GpuHost = sw.GpuHost.from_values([1, 2], dtype=sw.DType.Int32)
    tiled = sw.TiledEvictable(sw.Gpu(0), sw.GpuHost(4), [2], [2])
    metal: Metal = sw.Metal(2, mutable=True, dtype=sw.DType.Bool, empty=False)
    print(adapter, carrier.size(), filled.version, up.layout, host.size(), tiled, metal, Metal.adapter())
