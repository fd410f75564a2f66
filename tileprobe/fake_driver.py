"""A stand-in for the CUDA driver's ``cuGetProcAddress_v2``, for cuTile's signature inference on a machine with no
GPU and no ``libcuda.so.1`` (:func:`tileprobe._cutile.install_fake_driver` hands it to cuTile). Pure ctypes: it
touches nothing of cuTile's. It answers the few queries signature inference makes (seen with cuda-tile 1.7.0:
``cuInit``, ``cuDriverGetVersion``, ``cuPointerGetAttribute(CONTEXT)``); every other entry point answers
``CUDA_ERROR_NOT_SUPPORTED`` and is logged in :data:`FAKE_DRIVER_CALLS`, so a cuTile release that starts asking for
more is caught by the tests rather than silently mis-inferring."""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from ctypes import POINTER, c_char_p, c_int, c_uint, c_uint64, c_void_p
from typing import Any

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_SUPPORTED = 801
#: Driver version the fake driver reports (CUDA 13.0, the minimum cuTile 1.x accepts).
FAKE_DRIVER_VERSION = 13000
#: Entry points the fake driver implements; anything else returns CUDA_ERROR_NOT_SUPPORTED.
FAKE_DRIVER_CALLS: list[str] = []

_KEEP_ALIVE: list[Any] = []
_FAKE_CONTEXT = 0x7E11_0000


def _impls() -> dict[str, tuple[Any, Callable]]:
    P = POINTER

    def cu_init(flags):
        return CUDA_SUCCESS

    def driver_version(out):
        out[0] = FAKE_DRIVER_VERSION
        return CUDA_SUCCESS

    def device_count(out):
        out[0] = 1
        return CUDA_SUCCESS

    def device_get(out, ordinal):
        out[0] = 0
        return CUDA_SUCCESS

    def ctx_current(out):
        out[0] = _FAKE_CONTEXT
        return CUDA_SUCCESS

    def ctx_device(out):
        out[0] = 0
        return CUDA_SUCCESS

    def pointer_attribute(data, attribute, ptr):
        # CU_POINTER_ATTRIBUTE_CONTEXT (1): every fake array lives in the fake current context.
        if attribute == 1:
            ctypes.cast(data, P(c_void_p))[0] = _FAKE_CONTEXT
            return CUDA_SUCCESS
        return CUDA_ERROR_NOT_SUPPORTED

    return {
        "cuInit": (ctypes.CFUNCTYPE(c_int, c_uint), cu_init),
        "cuDriverGetVersion": (ctypes.CFUNCTYPE(c_int, P(c_int)), driver_version),
        "cuDeviceGetCount": (ctypes.CFUNCTYPE(c_int, P(c_int)), device_count),
        "cuDeviceGet": (ctypes.CFUNCTYPE(c_int, P(c_int), c_int), device_get),
        "cuCtxGetCurrent": (ctypes.CFUNCTYPE(c_int, P(c_void_p)), ctx_current),
        "cuCtxGetDevice": (ctypes.CFUNCTYPE(c_int, P(c_int)), ctx_device),
        "cuPointerGetAttribute": (ctypes.CFUNCTYPE(c_int, c_void_p, c_int, c_uint64), pointer_attribute),
    }


def _make_entry(name: str):
    impls = _impls()
    if name in impls:
        proto, fn = impls[name]

        def logged(*args, _fn=fn, _name=name):
            FAKE_DRIVER_CALLS.append(_name)
            return _fn(*args)

        cb = proto(logged)
    else:
        def unsupported(_name=name):
            FAKE_DRIVER_CALLS.append(_name + " (unsupported)")
            return CUDA_ERROR_NOT_SUPPORTED

        cb = ctypes.CFUNCTYPE(c_int)(unsupported)
    _KEEP_ALIVE.append(cb)
    return cb


_GETPROC = ctypes.CFUNCTYPE(c_int, c_char_p, POINTER(c_void_p), c_int, c_uint64, c_void_p)


def _get_proc_address(symbol, pfn, cuda_version, flags, status):
    pfn[0] = ctypes.cast(_make_entry(symbol.decode()), c_void_p).value
    return CUDA_SUCCESS
