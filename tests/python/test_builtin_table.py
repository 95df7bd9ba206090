"""The built-in operations' Python surface is checked against the core's table of built-ins.

The native module exports the table's names (``BUILTIN_OPERATIONS``) and each one's signature
derived from its schema (``_BUILTIN_SIGNATURES``). Every built-in must be a native function
taking exactly those parameters, re-exported by ``strideweave`` and ``strideweave.operation``,
and stubbed in ``_native.pyi`` with those parameters, annotations and defaults
(docs/operations.md, The table of built-ins). A built-in added to the table fails here until
its function and stub exist; nothing here lists the built-ins.
"""

import ast
import inspect
import pathlib
from typing import Dict, List, Optional, Tuple

import strideweave as sw
import strideweave.operation as operation
from strideweave import _native

STUBS = pathlib.Path(sw.__file__).with_name("_native.pyi")
PACKAGE_SOURCES = [pathlib.Path(sw.__file__), pathlib.Path(operation.__file__)]

Parameter = Tuple[str, str, Optional[str]]


def stub_functions() -> Dict[str, ast.FunctionDef]:
    tree = ast.parse(STUBS.read_text(encoding="utf-8"))
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def stub_parameters(node: ast.FunctionDef) -> List[Parameter]:
    arguments = node.args
    defaults: List[Optional[ast.expr]] = [None] * (len(arguments.args) - len(arguments.defaults))
    defaults += list(arguments.defaults)
    return [
        (
            argument.arg,
            ast.unparse(argument.annotation) if argument.annotation is not None else "",
            ast.unparse(default) if default is not None else None,
        )
        for argument, default in zip(arguments.args, defaults)
    ]


def test_the_table_names_every_builtin_once_and_each_has_a_signature() -> None:
    names = _native.BUILTIN_OPERATIONS
    assert isinstance(names, tuple) and len(names) > 0
    assert len(set(names)) == len(names)
    assert set(_native._BUILTIN_SIGNATURES) == set(names)
    for name in names:
        assert sw.operation_definition(name).is_builtin, name
        signature = _native._BUILTIN_SIGNATURES[name]
        assert len(signature) > 0, name


def test_every_builtin_is_a_native_function_taking_its_schema() -> None:
    for name in _native.BUILTIN_OPERATIONS:
        function = getattr(_native, name, None)
        assert callable(function), f"_native has no function {name!r}"
        expected = [parameter for parameter, _, _ in _native._BUILTIN_SIGNATURES[name]]
        actual = list(inspect.signature(function).parameters)
        assert actual == expected, f"{name}: native parameters {actual}, the schema's {expected}"


def test_the_package_reexports_every_builtin() -> None:
    for name in _native.BUILTIN_OPERATIONS:
        native = getattr(_native, name)
        assert getattr(sw, name, None) is native, f"strideweave.{name}"
        assert getattr(operation, name, None) is native, f"strideweave.operation.{name}"
        assert name in operation.__all__, f"strideweave.operation.__all__ lacks {name!r}"
        assert name in sw.__all__, f"strideweave.__all__ lacks {name!r}"
        # The explicit re-exports type checkers read.
        for source in PACKAGE_SOURCES:
            assert f"{name} as {name}" in source.read_text(encoding="utf-8"), (source, name)


def test_every_builtin_is_stubbed_with_its_schema() -> None:
    stubs = stub_functions()
    for name in _native.BUILTIN_OPERATIONS:
        assert name in stubs, f"_native.pyi has no stub for {name!r}"
        expected = [tuple(parameter) for parameter in _native._BUILTIN_SIGNATURES[name]]
        assert stub_parameters(stubs[name]) == expected, name
        returns = stubs[name].returns
        assert returns is not None and ast.unparse(returns) == "Tensor", name


def test_a_stub_parameter_mismatch_is_reported() -> None:
    # The comparison above can fail: a stub with other names or annotations differs.
    node = ast.parse("def add(x: Tensor, rhs: Operand) -> Tensor: ...").body[0]
    assert isinstance(node, ast.FunctionDef)
    assert stub_parameters(node) != [tuple(p) for p in _native._BUILTIN_SIGNATURES["add"]]
    assert stub_parameters(node) == [("x", "Tensor", None), ("rhs", "Operand", None)]
