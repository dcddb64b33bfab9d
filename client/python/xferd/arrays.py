"""numpy arrays and torch tensors that are views of an SHM region's mapping.

`Region.numpy()` and `Region.torch()` return them: no copy, the
application's array *is* the region's memory. They are subclasses
(`RegionArray`, `RegionTensor`) that check, on each access, that the region
is still mapped by its client: after deregister_region() or close() an
access raises ValueError naming the region instead of touching memory that
belongs to nothing. Views numpy or torch derive from them (slices, reshapes)
are checked too; results that own new memory (`a + 1`, `a.copy()`) are
not. The memory itself stays mapped while any view is alive
(`xferd.shm.ShmMapping`), so what escapes the checks (`np.asarray(view)`,
`bytes(view)` taken before the close) reads stale bytes, never crashes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from xferd.shm import ShmMapping

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

__all__ = ["RegionArray", "numpy_view", "torch_view", "nbytes_of", "fill", "torch_available"]

Shape = Union[int, Sequence[int], None]


def _mapping_of(obj: Any) -> Optional[ShmMapping]:
    mapping: Optional[ShmMapping] = getattr(obj, "_xferd_mapping", None)
    return mapping


def _check_all(objects: Any) -> None:
    """Raises for the first closed region among `objects` (one level of
    lists and tuples looked into: out=, np.concatenate's sequence)."""
    for obj in objects:
        if isinstance(obj, (list, tuple)):
            _check_all(obj)
            continue
        mapping = _mapping_of(obj)
        if mapping is not None:
            mapping.check()


def _plain(obj: Any) -> Any:
    return obj.view(np.ndarray) if isinstance(obj, RegionArray) else obj


class RegionArray(np.ndarray):  # type: ignore[type-arg]
    """A numpy array over an SHM region's memory, checked on access.

    Behaves as an ndarray; indexing, assignment, ufuncs, numpy functions and
    the methods that read the data raise ValueError once the region was
    deregistered or its client closed.
    """

    _xferd_mapping: Optional[ShmMapping] = None
    _xferd_span: Tuple[int, int] = (0, 0)

    def __array_finalize__(self, obj: Any) -> None:
        """Views keep the region's check; results in new memory drop it."""
        mapping = _mapping_of(obj)
        if mapping is None:
            return
        low, high = getattr(obj, "_xferd_span", (0, 0))
        if low <= self.__array_interface__["data"][0] < high:
            self._xferd_mapping, self._xferd_span = mapping, (low, high)

    def _xferd_check(self) -> None:
        if self._xferd_mapping is not None:
            self._xferd_mapping.check()

    def __getitem__(self, key: Any) -> Any:
        self._xferd_check()
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._xferd_check()
        _check_all((value,))
        super().__setitem__(key, value)  # type: ignore[no-untyped-call]

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        _check_all(inputs)
        out = kwargs.get("out", ())
        _check_all(out)
        # ndarray's own __array_ufunc__ defers to any override, ours included:
        # the ufunc runs on plain views, and in-place calls return `out`.
        if out:
            kwargs["out"] = tuple(_plain(x) for x in out)
        result = getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)
        if out:
            return out if isinstance(result, tuple) else out[0]
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        _check_all(args)
        _check_all(kwargs.values())
        return super().__array_function__(func, types, args, kwargs)

    def __iter__(self) -> Any:
        self._xferd_check()
        return super().__iter__()

    def __repr__(self) -> str:
        self._xferd_check()
        return super().__repr__()

    def __str__(self) -> str:
        self._xferd_check()
        return super().__str__()


def _checked(name: str) -> Callable[..., Any]:
    method = getattr(np.ndarray, name)

    def call(self: RegionArray, *args: Any, **kwargs: Any) -> Any:
        self._xferd_check()
        return method(self, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    return call


# The methods that read or write the data without going through a ufunc or
# numpy function (those are checked in __array_ufunc__/__array_function__).
for _name in ("tobytes", "tolist", "copy", "fill", "item", "astype", "byteswap", "tofile",
              "dump", "dumps", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__",
              "__array__", "__float__", "__int__", "__bool__", "__index__", "__complex__"):
    setattr(RegionArray, _name, _checked(_name))


def _count(shape: Tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def _shape(shape: Shape) -> Optional[Tuple[int, ...]]:
    if shape is None:
        return None
    return (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)


def _span(mapping: ShmMapping, offset: int, itemsize: int, shape: Optional[Tuple[int, ...]]
          ) -> Tuple[int, int]:
    """(offset, count): the elements a view of `shape` at `offset` covers
    (the rest of the region when shape is None); ValueError if they do not
    fit the region."""
    if offset < 0 or offset > mapping.size:
        raise ValueError(f"offset {offset} is outside region '{mapping.region}' of "
                         f"{mapping.size} bytes")
    if shape is None:
        if (mapping.size - offset) % itemsize:
            raise ValueError(f"the {mapping.size - offset} bytes of region '{mapping.region}' "
                             f"from offset {offset} are not a whole number of {itemsize}-byte "
                             "items: give a shape")
        return offset, (mapping.size - offset) // itemsize
    if any(n < 0 for n in shape):
        raise ValueError(f"shape {shape} has a negative dimension")
    count = _count(shape)
    if offset + count * itemsize > mapping.size:
        raise ValueError(f"a {shape} view of {itemsize}-byte items at offset {offset} needs "
                         f"{offset + count * itemsize} bytes; region '{mapping.region}' has "
                         f"{mapping.size}")
    return offset, count


def numpy_view(mapping: ShmMapping, dtype: npt.DTypeLike, shape: Shape = None,
               offset: int = 0) -> RegionArray:
    """A RegionArray of `dtype` and `shape` (None: 1-D, the rest of the
    region) over the region's bytes from `offset`.

    Raises:
        ValueError: it does not fit the region, or the region is closed.
    """
    dt = np.dtype(dtype)
    dims = _shape(shape)
    offset, count = _span(mapping, offset, dt.itemsize, dims)
    memory = mapping.mmap()
    base = np.frombuffer(memory, dtype=np.uint8)
    low = int(base.__array_interface__["data"][0])
    flat = np.frombuffer(memory, dtype=dt, count=count, offset=offset)
    view: RegionArray = flat.reshape(dims if dims is not None else (count,)).view(RegionArray)
    view._xferd_mapping, view._xferd_span = mapping, (low, low + mapping.size)
    return view


def torch_available() -> bool:
    """True when torch can be imported (it is optional)."""
    try:
        importlib.import_module("torch")
    except ImportError:
        return False
    return True


_TENSOR_CLASS: Dict[str, Any] = {}


def _tensor_class() -> Any:
    """RegionTensor, made on first use so that torch is imported only then."""
    if "cls" in _TENSOR_CLASS:
        return _TENSOR_CLASS["cls"]
    import torch

    class RegionTensor(torch.Tensor):  # type: ignore[misc]  # torch is Any to mypy
        """A CPU tensor over an SHM region's memory: every torch operation on
        it (indexing, methods, functions, .numpy()) raises ValueError once
        the region was deregistered or its client closed."""

        _xferd_mapping: Optional[ShmMapping] = None
        _xferd_span: Tuple[int, int] = (0, 0)

        @classmethod
        def __torch_function__(cls, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            _check_all(args)
            _check_all(kwargs.values())
            spans = [(_mapping_of(a), a._xferd_span) for a in args
                     if isinstance(a, RegionTensor) and a._xferd_mapping is not None]
            result = super().__torch_function__(func, types, args, kwargs)
            if spans:
                _keep_check(result, spans[0][0], spans[0][1])
            return result

    def _keep_check(result: Any, mapping: Optional[ShmMapping],
                    span: Tuple[int, int]) -> None:
        # Views (their data inside the region) keep the check; results in
        # memory of their own do not.
        outputs = result if isinstance(result, (list, tuple)) else (result,)
        with torch._C.DisableTorchFunction():
            for out in outputs:
                if isinstance(out, RegionTensor) and span[0] <= out.data_ptr() < span[1]:
                    out._xferd_mapping, out._xferd_span = mapping, span

    _TENSOR_CLASS["cls"] = RegionTensor
    return RegionTensor


def torch_view(mapping: ShmMapping, dtype: "torch.dtype", shape: Shape = None,
               offset: int = 0) -> "torch.Tensor":
    """A RegionTensor (CPU) of `dtype` and `shape` over the region's bytes
    from `offset`; as numpy_view().

    Raises:
        ImportError: torch is not installed.
        ValueError: it does not fit the region, or the region is closed.
    """
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    dims = _shape(shape)
    offset, count = _span(mapping, offset, itemsize, dims)
    memory = mapping.mmap()
    low = int(np.frombuffer(memory, dtype=np.uint8).__array_interface__["data"][0])
    cls = _tensor_class()
    if count == 0:
        flat = torch.empty(0, dtype=dtype)
    else:
        flat = torch.frombuffer(memory, dtype=dtype, count=count, offset=offset)
    tensor = flat.reshape(dims if dims is not None else (count,)).as_subclass(cls)
    tensor._xferd_mapping, tensor._xferd_span = mapping, (low, low + mapping.size)
    return tensor


def nbytes_of(array: Any) -> int:
    """The bytes of a numpy array or torch tensor (its data, contiguous)."""
    if isinstance(array, np.ndarray):
        return int(array.nbytes)
    return int(array.element_size() * array.numel())


def fill(mapping: ShmMapping, array: Any) -> Any:
    """Copies `array` (numpy, or torch on the CPU; any strides) into the
    start of the region, in place; returns the region's view of the same
    shape and dtype (a RegionArray or RegionTensor)."""
    if isinstance(array, np.ndarray):
        view = numpy_view(mapping, array.dtype, array.shape)
        np.copyto(view, array)
        return view
    tensor = torch_view(mapping, array.dtype, tuple(array.shape))
    tensor.copy_(array)
    return tensor
