# probe share -- python3 torch_import.py: can a process route's wrapper
# (torch) use device memory a clean process made and exported as a POSIX
# file descriptor (fd 3)? It imports and maps it with the driver API in
# torch's own (primary) context, wraps it as a tensor through
# __cuda_array_interface__, checks the parent's pattern with a torch
# kernel, and fills it with the child's pattern for the parent to check.
import ctypes
import torch

n_bytes = 64 << 20
torch.zeros(1, device="cuda")  # torch's primary context, current on this thread
cu = ctypes.CDLL("libcuda.so.1")


def ck(r, what):
    if r != 0:
        raise SystemExit(f"{what}: CUresult {r}")


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class Access(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


h = ctypes.c_ulonglong()
ck(cu.cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(3), 1), "cuMemImportFromShareableHandle")
d = ctypes.c_ulonglong()
ck(cu.cuMemAddressReserve(ctypes.byref(d), ctypes.c_size_t(n_bytes), ctypes.c_size_t(0), ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
ck(cu.cuMemMap(d, ctypes.c_size_t(n_bytes), ctypes.c_size_t(0), h, ctypes.c_ulonglong(0)), "cuMemMap")
acc = Access(Location(1, torch.cuda.current_device()), 3)
ck(cu.cuMemSetAccess(d, ctypes.c_size_t(n_bytes), ctypes.byref(acc), ctypes.c_size_t(1)), "cuMemSetAccess")


class Buf:
    pass


b = Buf()
b.__cuda_array_interface__ = {"shape": (n_bytes // 4,), "typestr": "<i4", "data": (d.value, False), "version": 3}
t = torch.as_tensor(b, device="cuda")
bad = int((t != 0x12345678).sum())
print(f"torch import: torch {torch.__version__} reads the parent's pattern through a tensor at {t.data_ptr():#x}: {bad} words differ")
t.fill_(0x9ABCDEF0 - (1 << 32))
torch.cuda.synchronize()
