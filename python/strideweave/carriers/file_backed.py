"""The file-backed carrier: the original's ``strideweave.carriers.file_backed`` (the native
``FileBacked``)."""

from .._native import FileBacked as FileBacked

__all__ = ["FileBacked"]
